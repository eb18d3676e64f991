//! How far per-object zstd with a trained dictionary compresses cached objects, on the
//! simulator's plain templates (one fixture re-keyed: every object shares its bytes outside
//! `metadata`) and on the varied corpus (`SimConfig::vary`: every Pod its own spec and status),
//! side by side: the figures a compressed store would be designed from, and the measure of how
//! much the plain templates flatter a dictionary.
//!
//! For each template and corpus: `COMPRESSION_N` objects (default 3 000) as the simulator serves
//! them, a dictionary of [`DICT_BYTES`] trained on [`TRAIN`] of them, then every object
//! compressed on its own: bytes per object and the ratio to the wire bytes, without and with
//! the dictionary, and the time to decompress one object. Printed as a table (no criterion
//! groups: the figures are sizes and one timing per row).
//!
//! A second table measures the informer's own compact form ([`Compactor`], what
//! `Compression::Zstd` caches) on the varied corpus: compaction time per object, a typed decode
//! of a compacted object against the same decode of the received one, and `get` + a metadata
//! read from a store of compacted objects against a store of received ones (same keys, same
//! order, best of 5 passes each, alternated; the keys are copies, as a work queue's are, so
//! that neither store compares them by pointer).
//!
//! A third table splits the heap bytes each compact object holds (allocator count): the
//! `Arc<Object>`, the metadata's own bytes (packed strings, their ends, managed-fields
//! handles), the compressed body, and the rest (shared metadata tails among it).
//! The count adds two atomic updates to every allocation and free, in every timing alike.
//!
//! `cargo bench --bench compression` (about a minute).

// A bench's main is not documented API.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cap::Cap;
use informer::object::{Compactor, Dictionary, Encoding, Object, ObjectKey};
use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::store::{Op, Store, StoreConfig, WriteBatch};

/// mimalloc with a count of the bytes allocated and not yet freed (the `cap` crate), for the heap
/// bytes per compact object.
#[global_allocator]
static GLOBAL: Cap<mimalloc::MiMalloc> = Cap::new(mimalloc::MiMalloc, usize::MAX);

/// Dictionary size, bytes (zstd's own default for trained dictionaries is about 110 KB).
const DICT_BYTES: usize = 112 * 1024;
/// Objects the dictionary is trained on.
const TRAIN: usize = 1000;
/// zstd level of every compression (`COMPRESSION_LEVEL`, default 3).
fn level() -> i32 {
    std::env::var("COMPRESSION_LEVEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn n() -> usize {
    std::env::var("COMPRESSION_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// The wire bytes of `n` objects from `templates`.
fn corpus(templates: Templates, vary: bool, n: usize) -> Vec<Vec<u8>> {
    objects(templates, vary, n)
        .iter()
        .map(|o| o.raw().unwrap().to_vec())
        .collect()
}

/// `n` objects from `templates`, as the simulator serves them.
fn objects(templates: Templates, vary: bool, n: usize) -> Vec<Arc<Object>> {
    let sim = SimServer::new(
        SimConfig::new(templates)
            .seed(1)
            .initial_objects(n)
            .vary(vary),
    )
    .expect("simulator");
    sim.truth().objects.into_values().collect()
}

/// One typed decode of `o`: k8s-pb for protobuf, k8s-openapi (serde) for JSON.
fn typed(o: &Object) -> usize {
    match o.encoding() {
        Encoding::Protobuf => {
            let pod: k8s_pb::api::core::v1::Pod = o.decode().expect("typed decode");
            pod.spec.map_or(0, |s| s.containers.len())
        }
        Encoding::Json => {
            let pod: k8s_openapi::api::core::v1::Pod = o.deserialize().expect("serde decode");
            pod.spec.map_or(0, |s| s.containers.len())
        }
    }
}

fn store_of(objs: &[Arc<Object>]) -> Store {
    let (store, mut writer) = informer::store::store(StoreConfig::new());
    let mut batch = WriteBatch::with_capacity(objs.len());
    for o in objs {
        batch.push(Op::Upsert(o.clone()));
    }
    writer.apply(batch).expect("store write");
    // The writer must outlive the reads only as long as the store; leak it with the bench.
    std::mem::forget(writer);
    store
}

/// One pass of `f` over `keys`, ns per key.
fn best_keys(keys: &[ObjectKey], mut f: impl FnMut(&ObjectKey) -> usize) -> f64 {
    let t0 = Instant::now();
    let sink = keys.iter().fold(0usize, |s, k| s.wrapping_add(f(k)));
    std::hint::black_box(sink);
    t0.elapsed().as_nanos() as f64 / keys.len() as f64
}

/// Best of `passes` of `f` over `objs`, ns per object.
fn best(passes: usize, objs: &[Arc<Object>], mut f: impl FnMut(&Arc<Object>) -> usize) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..passes {
        let t0 = Instant::now();
        let mut sink = 0usize;
        for o in objs {
            sink = sink.wrapping_add(f(o));
        }
        std::hint::black_box(sink);
        best = best.min(t0.elapsed());
    }
    best.as_nanos() as f64 / objs.len() as f64
}

/// Where a compact object's heap bytes go, averaged over a corpus (bytes per object).
struct Heap {
    total: f64,
    object: f64,
    meta: f64,
    body: f64,
}

/// The compact-form table's row for one corpus; returns where the compact objects' heap bytes
/// go.
fn reads(objs: &[Arc<Object>], level: i32) -> Heap {
    let step = (objs.len() / TRAIN).max(1);
    let samples: Vec<bytes::Bytes> = objs
        .iter()
        .step_by(step)
        .map(|o| o.raw().unwrap())
        .collect();
    let dict = Arc::new(Dictionary::train(&samples, DICT_BYTES, level).expect("dictionary"));
    let mut c = Compactor::new(dict);
    let mut small: Vec<Arc<Object>> = Vec::with_capacity(objs.len());
    let live = GLOBAL.allocated();
    let t0 = Instant::now();
    small.extend(
        objs.iter()
            .map(|o| Arc::new(c.compact(o).expect("compact"))),
    );
    let compact_ns = t0.elapsed().as_nanos() as f64 / objs.len() as f64;
    // Everything the compact objects hold, the shared metadata tails included (spread over the
    // corpus), the received objects still alive beside them.
    let heap = heap_of(&small, GLOBAL.allocated() as isize - live as isize);
    let (mut plain_ns, mut small_ns) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        plain_ns = plain_ns.min(best(1, objs, |o| typed(o)));
        small_ns = small_ns.min(best(1, &small, |o| typed(o)));
    }
    let (plain_store, small_store) = (store_of(objs), store_of(&small));
    // Keys of their own, as a work queue holds them: neither store's objects share one, so
    // both compare key texts (a stored object's own key compares by pointer alone, which
    // only the received objects' store would get from keys taken off those same objects).
    let keys: Vec<ObjectKey> = objs
        .iter()
        .map(|o| ObjectKey::from_raw(o.key_ref().as_str()))
        .collect();
    let (mut plain_get, mut small_get) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        plain_get = plain_get.min(best_keys(&keys, |k| {
            plain_store.get(k).map_or(0, |g| g.name().len())
        }));
        small_get = small_get.min(best_keys(&keys, |k| {
            small_store.get(k).map_or(0, |g| g.name().len())
        }));
    }
    println!(
        "{:>12.0} {:>12.0} {:>12.0} {:>8.2} {:>10.0} {:>10.0} {:>8.2}",
        compact_ns,
        plain_ns,
        small_ns,
        small_ns / plain_ns,
        plain_get,
        small_get,
        small_get / plain_get
    );
    heap
}

/// Splits `total` heap bytes of `objs` into the `Arc<Object>` blocks, the metadata's own
/// packed strings and string ends (with their `Arc` headers) and managed-fields handles
/// ([`ObjectMeta::heap_len`](informer::object::ObjectMeta::heap_len)), and the compressed
/// bodies; the rest is what those leave out (shared metadata tails, managed-fields copies,
/// allocator rounding).
fn heap_of(objs: &[Arc<Object>], total: isize) -> Heap {
    use std::mem::size_of;
    let n = objs.len() as f64;
    let arc_header = 2 * size_of::<usize>();
    let meta: usize = objs
        .iter()
        .map(|o| {
            let arcs = if o.meta().tail_is_shared() { 1 } else { 2 };
            o.meta().heap_len() + arcs * arc_header
        })
        .sum();
    Heap {
        total: total as f64 / n,
        object: (arc_header + size_of::<Object>()) as f64,
        meta: meta as f64 / n,
        body: objs.iter().map(|o| o.cached_len()).sum::<usize>() as f64 / n,
    }
}

/// Loads one template set from the fixtures directory.
type Loader = fn(&std::path::Path) -> Templates;

struct Row {
    mean: f64,
    plain: f64,
    dict: f64,
    decompress_ns: f64,
    compress_ns: f64,
}

fn measure(objs: &[Vec<u8>], level: i32) -> Row {
    let raw: usize = objs.iter().map(Vec::len).sum();
    // Every k-th object, so the sample spans the corpus.
    let step = (objs.len() / TRAIN).max(1);
    let samples: Vec<&[u8]> = objs.iter().step_by(step).map(Vec::as_slice).collect();
    let dict = zstd::dict::from_samples(&samples, DICT_BYTES).expect("dictionary training");
    let plain: usize = objs
        .iter()
        .map(|o| zstd::bulk::compress(o, level).expect("compress").len())
        .sum();
    let mut c = zstd::bulk::Compressor::with_dictionary(level, &dict).expect("compressor");
    let t0 = Instant::now();
    let packed: Vec<Vec<u8>> = objs
        .iter()
        .map(|o| c.compress(o).expect("compress"))
        .collect();
    let compress_ns = t0.elapsed().as_nanos() as f64 / objs.len() as f64;
    let with_dict: usize = packed.iter().map(Vec::len).sum();
    let mut d = zstd::bulk::Decompressor::with_dictionary(&dict).expect("decompressor");
    let max = objs.iter().map(Vec::len).max().unwrap_or(0);
    let t0 = Instant::now();
    let mut out = 0usize;
    for (p, o) in packed.iter().zip(objs) {
        let back = d.decompress(p, max).expect("decompress");
        assert_eq!(&back, o, "round trip");
        out += back.len();
    }
    let took = t0.elapsed();
    std::hint::black_box(out);
    Row {
        mean: raw as f64 / objs.len() as f64,
        plain: plain as f64 / raw as f64,
        dict: with_dict as f64 / raw as f64,
        decompress_ns: took.as_nanos() as f64 / objs.len() as f64,
        compress_ns,
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and criterion-style filters); this report takes none.
    let dir = default_fixtures_dir().expect("fixtures");
    let n = n();
    let level = level();
    println!(
        "\nPer-object zstd level {level}, {} KiB dictionary trained on {TRAIN} objects, {n} objects per corpus",
        DICT_BYTES / 1024
    );
    println!(
        "{:<16} {:<7} {:>10} {:>14} {:>14} {:>12} {:>14} {:>16}",
        "template",
        "corpus",
        "wire B",
        "ratio no dict",
        "ratio w/ dict",
        "B / object",
        "compress ns",
        "decompress ns"
    );
    let sets: [(&str, Loader); 3] = [
        ("etcd-pod", |d| Templates::etcd_pod(d).expect("etcd Pod")),
        ("head-pod", |d| Templates::head_pod(d).expect("HEAD Pod")),
        ("openshift-json", |d| {
            Templates::openshift_json(d).expect("OpenShift Pods")
        }),
    ];
    for (name, load) in &sets {
        for vary in [false, true] {
            let objs = corpus(load(&dir), vary, n);
            let r = measure(&objs, level);
            println!(
                "{:<16} {:<7} {:>10.0} {:>14.3} {:>14.3} {:>12.0} {:>14.0} {:>16.0}",
                name,
                if vary { "varied" } else { "plain" },
                r.mean,
                r.plain,
                r.dict,
                r.mean * r.dict,
                r.compress_ns,
                r.decompress_ns
            );
        }
    }
    println!();

    println!(
        "\nThe informer's compact form (Compactor, level {level}), varied corpus, ns per object"
    );
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10} {:>8}",
        "template",
        "compact",
        "typed plain",
        "typed zstd",
        "ratio",
        "get plain",
        "get zstd",
        "ratio"
    );
    let mut heaps = Vec::new();
    for (name, load) in &sets {
        let objs = objects(load(&dir), true, n);
        print!("{name:<16} ");
        heaps.push((name, reads(&objs, level)));
    }
    println!("\nHeap bytes per compact object (allocator count), varied corpus");
    println!(
        "{:<16} {:>8} {:>12} {:>14} {:>8} {:>18}",
        "template", "total", "Arc<Object>", "metadata", "body", "rest"
    );
    for (name, h) in heaps {
        println!(
            "{:<16} {:>8.0} {:>12.0} {:>14.0} {:>8.0} {:>18.0}",
            name,
            h.total,
            h.object,
            h.meta,
            h.body,
            h.total - h.object - h.meta - h.body
        );
    }
}
