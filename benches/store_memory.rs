//! Store memory, measured with a counting global allocator (`cap` over mimalloc; the figures
//! are requested bytes, not the allocator's page footprint). Not a criterion bench: it prints a
//! table. Run: `cargo bench --bench store_memory` (100 000 and 1 000 000 objects; set
//! `STORE_MEMORY_SIZES=100000` to skip the large run; `STORE_MEMORY_NO_REPLACE=1` skips the
//! replace peaks, which need about 7.5 GB at 1 000 000 objects).
//!
//! - *overhead per object*: bytes the store allocates beyond the objects it holds, divided by
//!   the object count, measured as the allocation delta of filling a store with objects that
//!   already exist (our objects are shared `Arc`s: the store adds keys, tables and indexes);
//! - *replace peak*: a relist of N freshly decoded objects (new allocations, as a real relist
//!   decodes them) into a full store. Printed three ways: the whole process peak during the
//!   call over the steady state (old and new objects both exist until the swap in every
//!   design, so this is at least about 2x by construction); the store's own bytes at the peak
//!   (peak minus both object sets) over its steady bytes; and a relist that hands back the same
//!   object allocations (nothing changed), peak over steady.
//!
//! Objects: the real etcd Pod fixture re-keyed (see `store_baselines/workload.rs`).

#![allow(missing_docs)]

#[path = "store_baselines/mod.rs"]
#[allow(dead_code, unreachable_pub)]
mod store_baselines;

use std::sync::Arc;

use cap::Cap;
use informer::object::Object;
use store_baselines::{Indexes, Workload};

#[global_allocator]
static ALLOC: Cap<mimalloc::MiMalloc> = Cap::new(mimalloc::MiMalloc, usize::MAX);

fn now() -> usize {
    ALLOC.allocated()
}

/// N fresh objects (nothing else of the workload kept).
fn objects(n: usize) -> Vec<Arc<Object>> {
    Workload::objects(n)
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Structure bytes per object of a store filled by `fill` from `objs`.
fn overhead<T>(objs: &[Arc<Object>], fill: impl FnOnce(&[Arc<Object>]) -> T) -> (f64, T) {
    let before = now();
    let store = fill(objs);
    let bytes = now() - before;
    (bytes as f64 / objs.len() as f64, store)
}

fn run(n: usize) {
    println!("\n== {n} objects ==");
    let base = now();
    let objs = objects(n);
    let obj_bytes = now() - base - objs.capacity() * std::mem::size_of::<Arc<Object>>();
    println!(
        "objects' own bytes: {:.1} MiB ({} per object)",
        mib(obj_bytes),
        obj_bytes / n
    );
    let w = Workload {
        objects: objs,
        keys: Vec::new(),
        namespaces: Vec::new(),
        updates: Vec::new(),
        pods: Vec::new(),
    };
    println!("{:<44} {:>14}", "store (indexes)", "bytes/object");
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::ours::filled(&w, Indexes::One)
    });
    println!("{:<44} {:>14.1}", "informer (left-right), namespace", b);
    drop(s);
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::ours::filled(&w, Indexes::Two)
    });
    println!(
        "{:<44} {:>14.1}",
        "informer (left-right), namespace + labels", b
    );
    drop(s);
    if n > 100_000 {
        // The baselines' figures do not depend on the size; measure them at 100 000 only.
        drop(w);
        measure_replace(n);
        return;
    }
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::imbl_store::filled(&w, Indexes::One)
    });
    println!(
        "{:<44} {:>14.1}",
        "imbl HAMT versions (previous), namespace", b
    );
    drop(s);
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::cow_shards::filled(&w, Indexes::One)
    });
    println!("{:<44} {:>14.1}", "per-shard copy-on-write, namespace", b);
    drop(s);
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::client_go::filled(&w, Indexes::One)
    });
    println!(
        "{:<44} {:>14.1}",
        "client-go threadSafeMap port, namespace", b
    );
    drop(s);
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::locked::filled(&w, Indexes::One)
    });
    println!(
        "{:<44} {:>14.1}",
        "parking_lot RwLock<HashMap>, namespace", b
    );
    drop(s);
    let (b, s) = overhead(&w.objects, |_| {
        store_baselines::dash::filled(&w, Indexes::One)
    });
    println!("{:<44} {:>14.1}", "dashmap, namespace", b);
    drop(s);
    if n <= 100_000 {
        // kube-runtime keeps its own copy of each object (a k8s-openapi Pod in a new Arc):
        // subtract that copy's bytes to get its structure.
        let pw = Workload::new(n, true);
        let pods = pw.pods;
        drop(pw.objects);
        let before = now();
        let copy: Vec<Arc<k8s_openapi::api::core::v1::Pod>> =
            pods.iter().map(|p| Arc::new(p.clone())).collect();
        let pod_bytes = now() - before - copy.capacity() * 8;
        drop(copy);
        let before = now();
        let s = store_baselines::kube::filled(&pods);
        let b = (now() - before).saturating_sub(pod_bytes) as f64 / n as f64;
        println!(
            "{:<44} {:>14.1}",
            "kube-runtime reflector::store, no index", b
        );
        drop(s);
    }

    drop(w);
    measure_replace(n);
}

/// The replace peaks need the allocator's high-water mark from a clean start: each is measured
/// in a child process.
fn measure_replace(n: usize) {
    if std::env::var("STORE_MEMORY_NO_REPLACE").is_ok_and(|v| v == "1") {
        return;
    }
    for mode in ["fresh", "same"] {
        let out = std::process::Command::new(std::env::current_exe().expect("own path"))
            .env(CHILD, format!("{mode}:{n}"))
            .output()
            .expect("run the replace measurement");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            panic!("replace measurement failed");
        }
    }
}

/// Environment variable that makes this binary measure one replace peak (child process).
const CHILD: &str = "STORE_MEMORY_REPLACE";

/// Replace peaks of our store (namespace index) holding `n` objects.
fn replace_peaks(n: usize) {
    let base = now();
    let objs = objects(n);
    let obj_bytes = now() - base - objs.capacity() * std::mem::size_of::<Arc<Object>>();
    let (_reader, mut writer) = informer::store::store(informer::store::StoreConfig::default());
    writer.replace(objs, 1).expect("replace");
    let steady = now() - base;
    let structure = steady - obj_bytes;
    let fresh = objects(n);
    let fresh_bytes = now() - base - steady;
    let max_before = ALLOC.max_allocated();
    writer.replace(fresh, 2).expect("replace");
    let max_after = ALLOC.max_allocated();
    let after = now() - base;
    let peak = max_after - base;
    let exact = max_after > max_before;
    println!(
        "replace, {n} fresh objects: steady {:.1} MiB (objects {:.1} + store {:.1}), peak {}{:.1} MiB = {:.2}x steady",
        mib(steady),
        mib(obj_bytes),
        mib(structure),
        if exact { "" } else { "<= " },
        mib(peak),
        peak as f64 / steady as f64,
    );
    let own = peak.saturating_sub(obj_bytes + fresh_bytes);
    println!(
        "    store's own bytes at the peak (peak minus both object sets): {:.1} MiB = {:.2}x its steady {:.1} MiB; after the call {:.1} MiB",
        mib(own),
        own as f64 / structure as f64,
        mib(structure),
        mib(after),
    );
}

/// Replace peak of our store (namespace index) holding `n` objects, relisted with the same
/// object allocations (nothing changed since the last list).
fn replace_same_peak(n: usize) {
    let base = now();
    let (reader, mut writer) = informer::store::store(informer::store::StoreConfig::default());
    writer.replace(objects(n), 1).expect("replace");
    let same: Vec<Arc<Object>> = reader.list();
    let steady = now() - base - same.capacity() * 8;
    let max_before = ALLOC.max_allocated();
    writer.replace(same, 3).expect("replace");
    let max_after = ALLOC.max_allocated();
    let exact = max_after > max_before;
    println!(
        "replace, the same {n} objects again: steady {:.1} MiB, peak {}{:.1} MiB = {:.2}x steady",
        mib(steady),
        if exact { "" } else { "<= " },
        mib(max_after - base),
        (max_after - base) as f64 / steady as f64,
    );
}

fn main() {
    if let Ok(child) = std::env::var(CHILD) {
        match child.split_once(':').map(|(m, n)| (m, n.parse::<usize>())) {
            Some(("fresh", Ok(n))) => replace_peaks(n),
            Some(("same", Ok(n))) => replace_same_peak(n),
            _ => panic!("{CHILD}={child}: expected fresh:N or same:N"),
        }
        return;
    }
    let sizes: Vec<usize> = std::env::var("STORE_MEMORY_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100_000, 1_000_000]);
    // `cargo bench` passes `--bench`; nothing else to parse.
    for n in sizes {
        run(n);
    }
}
