//! `Writer::replace` builds a buffer's indexes in bulk (`src/store/version/rebuild.rs`); writes
//! maintain them one change at a time. Both must give the same store: the same objects, the
//! same values in every index, each value's keys in key order. Checked over generated lists:
//! keys in any order, keys listed twice (the later object wins), objects listing one value
//! twice, a caller's index function, sets of every shape, then further writes on both stores
//! (which the other buffer replays).

use std::sync::Arc;

use informer::object::{Object, ObjectKey};
use informer::store::{
    LABELS_INDEX, NAMESPACE_INDEX, Store, StoreConfig, WriteBatch, Writer, index_func,
    labels_index_func, store,
};
use proptest::prelude::*;

mod support;

/// A Pod in namespace `ns{ns}` named `p{name}` with label `g` = `{group}`; `vals` lists the
/// values of the caller's index (repeats kept).
fn pod(ns: u8, name: u16, group: u8, vals: &[u8]) -> Arc<Object> {
    let vals: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
    support::labeled_pod(
        &format!("ns{ns}"),
        &format!("p{name}"),
        "",
        &[("g", &group.to_string()), ("vals", &vals.join(","))],
    )
}

fn config(shards: usize) -> StoreConfig {
    StoreConfig::default()
        .shards(shards)
        .indexer(LABELS_INDEX, labels_index_func())
        .indexer(
            "vals",
            index_func(|o| {
                Ok(o.meta()
                    .labels()
                    .get("vals")
                    .filter(|v| !v.is_empty())
                    .map(|v| v.split(',').map(str::to_owned).collect())
                    .unwrap_or_default())
            }),
        )
}

/// Everything a reader can see of the indexes: per index, per value, the keys in order.
fn indexes(r: &Store) -> Vec<(String, String, Vec<String>)> {
    let snap = r.snapshot();
    let mut out = Vec::new();
    for name in [NAMESPACE_INDEX, LABELS_INDEX, "vals"] {
        for value in snap.index_values(name).unwrap() {
            let keys: Vec<String> = snap
                .index_keys(name, &value)
                .unwrap()
                .iter()
                .map(ObjectKey::to_string)
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(keys, sorted, "{name}={value}: keys in order, each once");
            let objs = snap.by_index(name, &value).unwrap();
            assert_eq!(objs.len(), keys.len());
            out.push((name.to_owned(), value.to_string(), keys));
        }
    }
    out
}

fn contents(r: &Store) -> Vec<(String, Arc<Object>)> {
    let mut all: Vec<(String, Arc<Object>)> = r
        .snapshot()
        .list()
        .into_iter()
        .map(|o| (o.key().to_string(), o))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

fn same(a: &Store, b: &Store) {
    assert_eq!(indexes(a), indexes(b));
    let (ca, cb) = (contents(a), contents(b));
    assert_eq!(ca.len(), cb.len());
    for ((ka, oa), (kb, ob)) in ca.iter().zip(&cb) {
        assert_eq!(ka, kb);
        assert!(Arc::ptr_eq(oa, ob), "{ka}: the same object");
    }
}

/// Applies `objs` one batch of `batch` at a time (the incremental path).
fn apply_in_batches(w: &mut Writer, objs: &[Arc<Object>], batch: usize) {
    for chunk in objs.chunks(batch.max(1)) {
        let mut b = WriteBatch::new();
        for o in chunk {
            b.add(o.clone());
        }
        w.apply(b).unwrap();
    }
}

type Spec = (u8, u16, u8, Vec<u8>);

fn spec() -> impl Strategy<Value = Spec> {
    (
        0u8..4,
        0u16..700,
        0u8..6,
        proptest::collection::vec(0u8..5, 0..4),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn replace_builds_the_indexes_writes_would(
        list in proptest::collection::vec(spec(), 0..900),
        later in proptest::collection::vec((spec(), any::<bool>()), 0..300),
        batch in 1usize..64,
        shards in prop_oneof![Just(1usize), Just(16)],
    ) {
        let objs: Vec<Arc<Object>> =
            list.iter().map(|(ns, n, g, v)| pod(*ns, *n, *g, v)).collect();
        let (bulk, mut wb) = store(config(shards));
        wb.replace(objs.iter().cloned(), 7).unwrap();
        let (inc, mut wi) = store(config(shards));
        apply_in_batches(&mut wi, &objs, batch);
        same(&bulk, &inc);

        // Further writes (adds, updates, deletes) on both, in batches: each buffer replays.
        for chunk in later.chunks(batch) {
            let mut b = WriteBatch::new();
            for ((ns, n, g, v), delete) in chunk {
                if *delete {
                    b.delete(ObjectKey::new(&format!("ns{ns}"), &format!("p{n}")));
                } else {
                    b.add(pod(*ns, *n, *g, v));
                }
            }
            wb.apply(b.clone()).unwrap();
            wi.apply(b).unwrap();
            same(&bulk, &inc);
        }
        // A second replace over a full store, of the current content in reverse order.
        let now: Vec<Arc<Object>> = contents(&inc).into_iter().rev().map(|(_, o)| o).collect();
        wb.replace(now.iter().cloned(), 8).unwrap();
        same(&bulk, &inc);
    }
}

/// A list with one large namespace (chunked sets) and keys listed in descending order, with
/// a key listed twice: the bulk build sorts, and the later object wins.
#[test]
fn replace_of_an_unsorted_list_with_a_repeated_key() {
    let mut objs: Vec<Arc<Object>> = (0..2000u16)
        .rev()
        .map(|n| pod(0, n, (n % 3) as u8, &[]))
        .collect();
    let again = pod(0, 5, 9, &[1, 1]);
    objs.push(again.clone());
    let (bulk, mut wb) = store(config(16));
    wb.replace(objs.iter().cloned(), 1).unwrap();
    let (inc, mut wi) = store(config(16));
    apply_in_batches(&mut wi, &objs, 100);
    same(&bulk, &inc);
    let snap = bulk.snapshot();
    assert_eq!(snap.len(), 2000);
    assert!(Arc::ptr_eq(
        snap.get(&ObjectKey::new("ns0", "p5")).unwrap(),
        &again
    ));
    assert_eq!(snap.index_keys(LABELS_INDEX, "g=9").unwrap().len(), 1);
    assert_eq!(snap.index_keys("vals", "1").unwrap().len(), 1);
    assert_eq!(snap.index_keys(NAMESPACE_INDEX, "ns0").unwrap().len(), 2000);
}

/// In one batch a set grows to two, shrinks to one and grows to two again: the other buffer,
/// which replays the batch, must end with the same two members (the log may merge a set's
/// states only when nothing else about that set was logged between them).
#[test]
fn a_set_that_shrinks_and_regrows_in_one_batch_replays_exactly() {
    for shards in [1, 16] {
        let (r, mut w) = store(config(shards));
        w.replace([pod(0, 1, 7, &[])], 1).unwrap();
        let mut b = WriteBatch::new();
        b.add(pod(0, 2, 7, &[]))
            .delete(ObjectKey::new("ns0", "p2"))
            .add(pod(0, 3, 7, &[]))
            .delete(ObjectKey::new("ns0", "p1"))
            .add(pod(0, 1, 7, &[]));
        w.apply(b).unwrap();
        let want = ["ns0/p1", "ns0/p3"];
        for round in 0..3 {
            let keys: Vec<String> = r
                .snapshot()
                .index_keys(LABELS_INDEX, "g=7")
                .unwrap()
                .iter()
                .map(ObjectKey::to_string)
                .collect();
            assert_eq!(keys, want, "{shards} shards, round {round}");
            // Publishes the other buffer, which replayed the batch.
            w.bookmark(10 + round);
        }
    }
}
