//! Store memory under churn, measured with a counting global allocator (`cap`): create/delete
//! cycles of objects indexed by UID (a value per object, the high-cardinality case of
//! kubernetes/kubernetes#84959) leave no index value behind and give their memory back; a
//! large batch holds each changed index set once in its log. Its own test binary, so that no
//! other test allocates while it measures; its tests take turns (`SERIAL`).

use std::alloc::System;
use std::sync::{Arc, Mutex};

use cap::Cap;
use informer::object::{Object, ObjectKey};
use informer::store::{
    LABELS_INDEX, NAMESPACE_INDEX, StoreConfig, UID_INDEX, WriteBatch, labels_index_func, store,
    uid_index_func,
};

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

mod support;

/// Held by each test while it measures.
static SERIAL: Mutex<()> = Mutex::new(());

fn pod(name: &str, uid: &str) -> Arc<Object> {
    support::labeled_pod("ns", name, uid, &[("app", "churn")])
}

/// `cycles` create/delete cycles of a UID-indexed object (each its own batch, so each its own
/// published version), next to a few objects that stay. Checks that the UID index ends with
/// exactly the survivors' values and that the allocated bytes come back to what they were
/// after a warm-up (tables at their working size), within `slack` bytes.
fn churn(cycles: usize, shards: usize) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (r, mut w) = store(
        StoreConfig::default()
            .shards(shards)
            .indexer(UID_INDEX, uid_index_func()),
    );
    let mut batch = WriteBatch::new();
    for i in 0..3 {
        batch.add(pod(&format!("stay-{i}"), &format!("stay-uid-{i}")));
    }
    w.apply(batch).unwrap();
    let mut cycle = |i: usize| {
        let uid = format!("churn-uid-{i}");
        w.apply(WriteBatch::new().add(pod("churn", &uid)).clone())
            .unwrap();
        assert_eq!(r.index_keys(UID_INDEX, &uid).unwrap().len(), 1);
        w.apply(
            WriteBatch::new()
                .delete(ObjectKey::new("ns", "churn"))
                .clone(),
        )
        .unwrap();
    };
    for i in 0..1_000 {
        cycle(i);
    }
    let before = ALLOC.allocated();
    for i in 1_000..1_000 + cycles {
        cycle(i);
    }
    let after = ALLOC.allocated();
    let values: Vec<String> = r
        .index_values(UID_INDEX)
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert_eq!(values, ["stay-uid-0", "stay-uid-1", "stay-uid-2"]);
    assert_eq!(r.len(), 3);
    assert_eq!(r.index_keys(NAMESPACE_INDEX, "ns").unwrap().len(), 3);
    let grown = after.saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "{cycles} cycles ({shards} shards) kept {grown} bytes (before {before}, after {after})"
    );
}

#[test]
fn uid_churn_releases_memory() {
    for shards in [1, 2, 64] {
        churn(100_000, shards);
    }
}

/// The full-size case of issue 3: 1 000 000 create/delete cycles
/// (`cargo test --release --test store_memory -- --ignored`).
#[test]
#[ignore = "heavy: 1 000 000 cycles"]
fn uid_churn_releases_memory_over_a_million_cycles() {
    churn(1_000_000, 16);
}

/// One batch deleting 40 000 Pods in an order that alternates between their 200 namespaces
/// and 200 label values (as a watch's events come, not sorted by key): each namespace and
/// label set of 200 changes 200 times, and each change makes a new array. The log must hold
/// each set's last array only (it held all 40 000 of them, 43 MB beside the store's own 7 MB,
/// when only states within 16 log entries merged).
#[test]
fn a_large_batch_logs_each_changed_set_once() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (r, mut w) = store(
        StoreConfig::default()
            .indexer(LABELS_INDEX, labels_index_func())
            .indexer(UID_INDEX, uid_index_func()),
    );
    let objs: Vec<Arc<Object>> = (0..40_000)
        .map(|i| {
            support::labeled_pod(
                &format!("ns{:03}", i % 200),
                &format!("p{i:05}"),
                &format!("u{i}"),
                &[("app", &format!("a{}", i % 200))],
            )
        })
        .collect();
    let start = ALLOC.allocated();
    w.replace(objs.iter().cloned(), 1).unwrap();
    let store_bytes = ALLOC.allocated() - start;
    let mut batch = WriteBatch::new();
    for o in &objs {
        batch.delete(o.key());
    }
    drop(objs);
    let now = ALLOC.allocated();
    w.apply(batch).unwrap();
    assert!(r.is_empty());
    // The highest count since the process began bounds the peak of the apply from above.
    let peak = ALLOC.max_allocated().saturating_sub(now);
    // About 6 MB: the log's entry per delete and per UID value, the replaced objects' list.
    assert!(
        peak < 2 * store_bytes,
        "the batch peaked at {peak} bytes over its start, beside a store of {store_bytes}"
    );
}
