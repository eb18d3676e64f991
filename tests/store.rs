//! Store tests: named cases, reads, waits, and a concurrency test of atomic batches.
//! The model-based proptest lives in `tests/store_model.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta, OwnerReference};
use informer::store::{
    IndexError, IndexValues, LABELS_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, StoreConfig,
    StoreError, UID_INDEX, WaitError, WriteBatch, index_func, labels_index_func,
    owner_uid_index_func, store, uid_index_func,
};

mod support;

use support::labeled_pod as pod;

/// Every test runs against these shard counts.
const SHARDS: [usize; 3] = [1, 2, 64];

fn keys(objs: &[Arc<Object>]) -> Vec<String> {
    objs.iter().map(|o| o.key().to_string()).collect()
}

/// Index `vals`: the comma-separated values of label `vals`.
fn vals_index() -> informer::store::IndexFunc {
    index_func(|obj| {
        Ok(obj
            .meta()
            .labels()
            .get("vals")
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default())
    })
}

#[test]
fn add_get_update_delete_list() {
    for shards in SHARDS {
        let (r, mut w) = store(StoreConfig::default().shards(shards));
        assert!(r.is_empty());
        let a = pod("default", "a", "ua", &[]);
        let b = pod("kube-system", "b", "ub", &[]);
        let node = pod("", "node-1", "un", &[]);
        let mut batch = WriteBatch::new();
        batch.add(a.clone()).add(b.clone()).add(node.clone());
        batch.set_resource_version(5);
        let prev = w.apply(batch).unwrap();
        assert!(prev.iter().all(Option::is_none));
        assert_eq!(r.len(), 3);
        assert_eq!(r.resource_version(), 5);
        assert!(Arc::ptr_eq(&r.get("default/a").unwrap(), &a));
        assert!(Arc::ptr_eq(
            &r.get(&ObjectKey::new("", "node-1")).unwrap(),
            &node
        ));
        assert!(r.get("default/zzz").is_none());
        let mut listed = keys(&r.list());
        listed.sort();
        assert_eq!(listed, ["default/a", "kube-system/b", "node-1"]);
        let mut ks: Vec<String> = r.keys().iter().map(|k| k.to_string()).collect();
        ks.sort();
        assert_eq!(ks, listed);

        // Update returns the old object; delete returns the deleted one; rv never goes back.
        let a2 = pod("default", "a", "ua", &[("v", "2")]);
        let mut batch = WriteBatch::new();
        batch
            .update(a2.clone())
            .delete(ObjectKey::new("kube-system", "b"));
        batch.delete(ObjectKey::new("nope", "x"));
        batch.set_resource_version(3);
        let prev = w.apply(batch).unwrap();
        assert!(Arc::ptr_eq(prev[0].as_ref().unwrap(), &a));
        assert!(Arc::ptr_eq(prev[1].as_ref().unwrap(), &b));
        assert!(prev[2].is_none());
        assert_eq!(r.len(), 2);
        assert_eq!(r.resource_version(), 5, "resourceVersion must not go back");
        assert!(Arc::ptr_eq(&r.get("default/a").unwrap(), &a2));
        assert_eq!(
            keys(&r.by_index(NAMESPACE_INDEX, "kube-system").unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            r.index_values(NAMESPACE_INDEX)
                .unwrap()
                .iter()
                .map(|v| &**v)
                .collect::<Vec<_>>(),
            ["", "default"]
        );
    }
}

#[test]
fn resource_version_from_objects_when_batch_has_none() {
    let (r, mut w) = store(StoreConfig::default());
    let mut meta = ObjectMetaFields {
        name: "a".into(),
        namespace: "ns".into(),
        resource_version: "42".into(),
        ..Default::default()
    };
    let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
    let o42 = Arc::new(Object::from_parts(
        gvk.clone(),
        ObjectMeta::from(meta.clone()),
        Bytes::new(),
        Encoding::Protobuf,
    ));
    meta.name = "b".into();
    meta.resource_version = "not-a-number".into();
    let onum = Arc::new(Object::from_parts(
        gvk,
        ObjectMeta::from(meta),
        Bytes::new(),
        Encoding::Protobuf,
    ));
    let mut batch = WriteBatch::new();
    batch.add(o42).add(onum);
    w.apply(batch).unwrap();
    assert_eq!(r.resource_version(), 42);
}

#[test]
fn index_queries_follow_client_go() {
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer(LABELS_INDEX, labels_index_func()),
        );
        let mut batch = WriteBatch::new();
        batch
            .add(pod("ns", "web-2", "1", &[("app", "web"), ("tier", "fe")]))
            .add(pod("ns", "web-1", "2", &[("app", "web")]))
            .add(pod("ns", "db", "3", &[("app", "db"), ("tier", "be")]))
            .add(pod("other", "web-3", "4", &[("app", "web")]));
        w.apply(batch).unwrap();
        // by_index / index_keys sorted by key.
        assert_eq!(
            keys(&r.by_index(LABELS_INDEX, "app=web").unwrap()),
            ["ns/web-1", "ns/web-2", "other/web-3"]
        );
        let ik: Vec<String> = r
            .index_keys(LABELS_INDEX, "app=web")
            .unwrap()
            .iter()
            .map(|k| k.to_string())
            .collect();
        assert_eq!(ik, ["ns/web-1", "ns/web-2", "other/web-3"]);
        assert!(r.by_index(LABELS_INDEX, "app=none").unwrap().is_empty());
        assert_eq!(
            r.index_values(LABELS_INDEX)
                .unwrap()
                .iter()
                .map(|v| &**v)
                .collect::<Vec<_>>(),
            ["app=db", "app=web", "tier=be", "tier=fe"]
        );
        // index(): objects sharing any value, each once, the probe need not be stored.
        let probe = pod("x", "probe", "9", &[("app", "db"), ("tier", "fe")]);
        assert_eq!(
            keys(&r.index(LABELS_INDEX, &probe).unwrap()),
            ["ns/db", "ns/web-2"]
        );
        // Unknown index: typed error everywhere.
        let unknown = StoreError::UnknownIndex {
            name: "nope".into(),
        };
        assert_eq!(r.by_index("nope", "v").unwrap_err(), unknown);
        assert_eq!(r.index_keys("nope", "v").unwrap_err(), unknown);
        assert_eq!(r.index_values("nope").unwrap_err(), unknown);
        assert_eq!(r.index("nope", &probe).unwrap_err(), unknown);
        assert!(r.snapshot().index_key_iter("nope", "v").is_err());
    }
}

#[test]
fn provided_index_funcs() {
    let mut o = ObjectMetaFields {
        name: "p".into(),
        namespace: "ns".into(),
        uid: "u-1".into(),
        ..Default::default()
    };
    o.labels.insert("a".into(), "1".into());
    o.labels.insert("b".into(), "".into());
    o.owner_references = vec![
        OwnerReference {
            uid: "owner-1".into(),
            ..OwnerReference::default()
        },
        OwnerReference {
            uid: "owner-2".into(),
            ..OwnerReference::default()
        },
    ];
    let obj = Object::from_parts(
        Arc::new(GroupVersionKind::new("", "v1", "Pod")),
        ObjectMeta::from(o),
        Bytes::new(),
        Encoding::Protobuf,
    );
    let v = |f: informer::store::IndexFunc| f(&obj).unwrap().into_vec();
    assert_eq!(v(labels_index_func()), ["a=1", "b="]);
    assert_eq!(v(owner_uid_index_func()), ["owner-1", "owner-2"]);
    assert_eq!(v(uid_index_func()), ["u-1"]);
    assert_eq!(v(informer::store::namespace_index_func()), ["ns"]);
    let cluster = pod("", "node", "", &[]);
    assert_eq!(uid_index_func()(&cluster).unwrap().len(), 0);
    assert_eq!(
        informer::store::namespace_index_func()(&cluster)
            .unwrap()
            .into_vec(),
        [""]
    );
}

/// Named case: an object updated from index values ["a"] to ["a","b"] is found under both.
#[test]
fn update_from_a_to_a_b_is_found_under_both() {
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer("vals", vals_index()),
        );
        w.apply(
            WriteBatch::new()
                .add(pod("ns", "x", "1", &[("vals", "a")]))
                .clone(),
        )
        .unwrap();
        assert_eq!(keys(&r.by_index("vals", "a").unwrap()), ["ns/x"]);
        assert!(r.by_index("vals", "b").unwrap().is_empty());

        w.apply(
            WriteBatch::new()
                .update(pod("ns", "x", "1", &[("vals", "a,b")]))
                .clone(),
        )
        .unwrap();
        assert_eq!(keys(&r.by_index("vals", "a").unwrap()), ["ns/x"]);
        assert_eq!(keys(&r.by_index("vals", "b").unwrap()), ["ns/x"]);
        let vals: Vec<String> = r
            .index_values("vals")
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(vals, ["a", "b"]);

        // And back down to ["b"]: "a" is gone from the index altogether.
        w.apply(
            WriteBatch::new()
                .update(pod("ns", "x", "1", &[("vals", "b,b")]))
                .clone(),
        )
        .unwrap();
        assert!(r.by_index("vals", "a").unwrap().is_empty());
        let vals: Vec<String> = r
            .index_values("vals")
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(vals, ["b"]);
    }
}

/// Named case: an index function failing on the second of two indexers leaves the item and
/// both indexes at the old version, and publishes nothing (the rest of the batch included).
#[test]
fn index_error_on_second_indexer_rejects_whole_batch() {
    let strict = index_func(|obj| {
        if obj.meta().labels().contains_key("bad") {
            Err(IndexError::new("bad label"))
        } else {
            Ok(obj
                .meta()
                .labels()
                .get("vals")
                .map(|v| IndexValues::from_elem(v.to_string(), 1))
                .unwrap_or_default())
        }
    });
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer("first", vals_index())
                .indexer("second", strict.clone()),
        );
        let v1 = pod("ns", "x", "1", &[("vals", "old")]);
        w.apply(
            WriteBatch::new()
                .add(v1.clone())
                .clone()
                .with_resource_version(7),
        )
        .unwrap();
        let before = r.snapshot();

        let mut batch = WriteBatch::new();
        batch.add(pod("ns", "other", "2", &[("vals", "new")])); // valid, must not appear
        batch.delete(ObjectKey::new("ns", "x")); // valid, must not happen
        batch.add(pod("ns", "x", "1", &[("vals", "new"), ("bad", "1")]));
        batch.set_resource_version(8);
        let err = w.apply(batch).unwrap_err();
        match &err {
            StoreError::IndexFunc { index, key, source } => {
                assert_eq!(&**index, "second");
                assert_eq!(key.as_str(), "ns/x");
                assert_eq!(source.message(), "bad label");
            }
            other => panic!("unexpected error {other:?}"),
        }
        let after = r.snapshot();
        assert_eq!(after.generation(), before.generation(), "nothing published");
        assert_eq!(r.resource_version(), 7);
        assert_eq!(r.len(), 1);
        assert!(Arc::ptr_eq(&r.get("ns/x").unwrap(), &v1));
        assert!(r.get("ns/other").is_none());
        for index in ["first", "second"] {
            assert_eq!(keys(&r.by_index(index, "old").unwrap()), ["ns/x"]);
            assert!(r.by_index(index, "new").unwrap().is_empty());
            let vals: Vec<String> = r
                .index_values(index)
                .unwrap()
                .iter()
                .map(|v| v.to_string())
                .collect();
            assert_eq!(vals, ["old"]);
        }
        // replace() with a bad object is rejected the same way.
        assert!(
            w.replace([pod("ns", "y", "3", &[("bad", "1")])], 100)
                .is_err()
        );
        assert!(Arc::ptr_eq(&r.get("ns/x").unwrap(), &v1));
        assert_eq!(r.resource_version(), 7);
        // index() on a probe the function rejects: a typed error, no panic.
        let probe = pod("ns", "p", "4", &[("bad", "1")]);
        assert!(matches!(
            r.index("second", &probe),
            Err(StoreError::IndexFunc { .. })
        ));
    }
}

fn uid_cycles(cycles: usize) {
    let (r, mut w) = store(StoreConfig::default().indexer(UID_INDEX, uid_index_func()));
    for i in 0..cycles {
        let uid = format!("uid-{i}");
        w.apply(WriteBatch::new().add(pod("ns", "churn", &uid, &[])).clone())
            .unwrap();
        if i % 10_000 == 0 {
            assert_eq!(r.index_keys(UID_INDEX, &uid).unwrap().len(), 1);
        }
        w.apply(
            WriteBatch::new()
                .delete(ObjectKey::new("ns", "churn"))
                .clone(),
        )
        .unwrap();
    }
    assert!(r.is_empty());
    assert!(r.index_values(UID_INDEX).unwrap().is_empty());
    assert!(r.index_values(NAMESPACE_INDEX).unwrap().is_empty());
}

/// Named case: create/delete cycles with a UID index leave no index value behind.
#[test]
fn uid_index_does_not_leak_over_create_delete_cycles() {
    uid_cycles(100_000);
}

/// The full-size version of the case above (run with `--ignored`, preferably `--release`).
#[test]
#[ignore = "heavy: 1 000 000 cycles"]
fn uid_index_does_not_leak_over_a_million_cycles() {
    uid_cycles(1_000_000);
}

#[test]
fn add_indexers_indexes_existing_items() {
    for shards in SHARDS {
        let (r, mut w) = store(StoreConfig::default().shards(shards));
        let mut batch = WriteBatch::new();
        for i in 0..50 {
            batch.add(pod(
                "ns",
                &format!("p{i:02}"),
                &format!("u{i}"),
                &[("app", if i % 2 == 0 { "even" } else { "odd" })],
            ));
        }
        w.apply(batch).unwrap();
        assert!(r.by_index(LABELS_INDEX, "app=even").is_err());
        w.add_indexers([
            (LABELS_INDEX.to_owned(), labels_index_func()),
            (OWNER_UID_INDEX.to_owned(), owner_uid_index_func()),
        ])
        .unwrap();
        assert_eq!(r.by_index(LABELS_INDEX, "app=even").unwrap().len(), 25);
        assert_eq!(r.index_names(), ["namespace", "labels", "owner-uid"]);
        // Conflicts and failures leave the store as it was.
        let gen_before = r.snapshot().generation();
        assert_eq!(
            w.add_indexer(LABELS_INDEX, labels_index_func())
                .unwrap_err(),
            StoreError::IndexExists {
                name: LABELS_INDEX.into()
            }
        );
        assert!(matches!(
            w.add_indexers([
                ("x".to_owned(), uid_index_func()),
                ("x".to_owned(), uid_index_func())
            ]),
            Err(StoreError::IndexExists { .. })
        ));
        let failing = index_func(|o| {
            if o.name() == "p33" {
                Err(IndexError::new("no"))
            } else {
                Ok(IndexValues::new())
            }
        });
        assert!(matches!(
            w.add_indexer("failing", failing),
            Err(StoreError::IndexFunc { .. })
        ));
        assert_eq!(r.snapshot().generation(), gen_before);
        assert_eq!(r.index_names().len(), 3);
        // New writes maintain the new index.
        w.apply(
            WriteBatch::new()
                .delete(ObjectKey::new("ns", "p00"))
                .clone(),
        )
        .unwrap();
        assert_eq!(r.by_index(LABELS_INDEX, "app=even").unwrap().len(), 24);
    }
}

#[test]
fn replace_swaps_everything_and_bookmark_moves_rv() {
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer(LABELS_INDEX, labels_index_func()),
        );
        let mut batch = WriteBatch::new();
        batch
            .add(pod("a", "1", "u1", &[("k", "v")]))
            .add(pod("a", "2", "u2", &[("k", "v")]));
        w.apply(batch.with_resource_version(10)).unwrap();
        let old = r.snapshot();
        let n3 = pod("b", "3", "u3", &[("k", "w")]);
        w.replace(
            [
                pod("b", "3", "dup", &[]),
                n3.clone(),
                pod("c", "4", "u4", &[]),
            ],
            20,
        )
        .unwrap();
        assert_eq!(r.len(), 2);
        assert!(
            Arc::ptr_eq(&r.get("b/3").unwrap(), &n3),
            "later duplicate wins"
        );
        assert!(r.get("a/1").is_none());
        assert!(r.by_index(LABELS_INDEX, "k=v").unwrap().is_empty());
        assert_eq!(keys(&r.by_index(LABELS_INDEX, "k=w").unwrap()), ["b/3"]);
        let ns: Vec<String> = r
            .index_values(NAMESPACE_INDEX)
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(ns, ["b", "c"]);
        assert_eq!(r.resource_version(), 20);
        // The old snapshot still sees the old world.
        assert_eq!(old.len(), 2);
        assert_eq!(old.resource_version(), 10);
        assert_eq!(old.by_index(LABELS_INDEX, "k=v").unwrap().len(), 2);
        drop(old);

        w.bookmark(25);
        assert_eq!(r.resource_version(), 25);
        assert_eq!(r.len(), 2);
        w.bookmark(22);
        assert_eq!(r.resource_version(), 25, "bookmark never goes back");
        // replace may go back (the list is the truth after a relist).
        w.replace(Vec::new(), 15).unwrap();
        assert_eq!(r.resource_version(), 15);
        assert!(r.is_empty());
        assert!(r.index_values(LABELS_INDEX).unwrap().is_empty());
    }
}

#[test]
fn snapshot_iter_and_consistency() {
    let (r, mut w) = store(StoreConfig::default().shards(8));
    let mut batch = WriteBatch::new();
    for i in 0..100 {
        batch.add(pod("ns", &format!("p{i}"), "", &[]));
    }
    w.apply(batch.with_resource_version(1)).unwrap();
    let snap = r.snapshot();
    assert_eq!(snap.shard_count(), 8);
    w.apply(
        WriteBatch::new()
            .delete(ObjectKey::new("ns", "p0"))
            .clone()
            .with_resource_version(2),
    )
    .unwrap();
    assert_eq!(snap.iter().count(), 100);
    assert_eq!(snap.len(), 100);
    assert!(snap.get("ns/p0").is_some());
    assert_eq!(r.len(), 99);
    assert!(!r.contains_key("ns/p0"));
    let mut seen: Vec<&str> = snap.iter().map(|(k, _)| k.as_str()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 100);
    assert_eq!(w.snapshot().generation(), snap.generation() + 1);
}

/// `Store::with` borrows what `get` would clone: the same object at every step, the closure
/// not called for a missing key, no reference taken, and the store readable inside it.
#[test]
fn with_borrows_the_object_get_returns() {
    let (r, mut w) = store(StoreConfig::default());
    let a = pod("ns", "a", "u1", &[("app", "x")]);
    w.apply(
        WriteBatch::new()
            .add(a.clone())
            .clone()
            .with_resource_version(1),
    )
    .unwrap();
    let key = ObjectKey::new("ns", "a");
    let counts_before = Arc::strong_count(&a);
    let seen = r.with(&key, |o| {
        assert!(Arc::ptr_eq(o, &a));
        // Nothing was cloned to call us, and reading the store again works.
        assert_eq!(Arc::strong_count(o), counts_before);
        assert!(r.with("ns/a", |o2| Arc::ptr_eq(o, o2)).unwrap());
        o.uid().to_owned()
    });
    assert_eq!(seen.as_deref(), Some("u1"));
    let mut called = false;
    assert_eq!(r.with("ns/b", |_| called = true), None);
    assert!(!called);

    // After an update the new object is borrowed; after a delete, nothing.
    let a2 = pod("ns", "a", "u2", &[]);
    w.apply(
        WriteBatch::new()
            .add(a2.clone())
            .clone()
            .with_resource_version(2),
    )
    .unwrap();
    assert!(r.with(&key, |o| Arc::ptr_eq(o, &a2)).unwrap());
    assert!(Arc::ptr_eq(&r.get(&key).unwrap(), &a2));
    w.apply(
        WriteBatch::new()
            .delete(key.clone())
            .clone()
            .with_resource_version(3),
    )
    .unwrap();
    assert_eq!(r.with(&key, |o| o.uid().to_owned()), None);
    assert!(r.get(&key).is_none());
}

#[test]
fn store_and_snapshot_are_send_sync_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<informer::store::Store>();
    check::<informer::store::Snapshot>();
    fn send<T: Send>() {}
    send::<informer::store::Writer>();
}

#[tokio::test]
async fn wait_for_async() {
    let (r, mut w) = store(StoreConfig::default());
    // Already there: immediate.
    assert_eq!(r.wait_for(0).await.unwrap().resource_version(), 0);
    let r2 = r.clone();
    let waiter = tokio::spawn(async move { r2.wait_for(5).await });
    tokio::task::yield_now().await;
    w.bookmark(3);
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    let mut batch = WriteBatch::new();
    batch.add(pod("ns", "a", "u", &[]));
    w.apply(batch.with_resource_version(7)).unwrap();
    let snap = waiter.await.unwrap().unwrap();
    assert_eq!(snap.resource_version(), 7);
    assert!(
        snap.get("ns/a").is_some(),
        "the snapshot reflects the write"
    );
    // Writer dropped: waiters get an error, not a hang.
    let r3 = r.clone();
    let waiter = tokio::spawn(async move { r3.wait_for(100).await });
    tokio::task::yield_now().await;
    drop(w);
    assert_eq!(
        waiter.await.unwrap().unwrap_err(),
        WaitError::WriterDropped {
            wanted: 100,
            reached: 7
        }
    );
}

#[test]
fn wait_for_blocking_wakes_times_out_and_sees_writer_drop() {
    let (r, mut w) = store(StoreConfig::default());
    let r2 = r.clone();
    let t = std::thread::spawn(move || r2.wait_for_blocking(5, Duration::from_secs(30)));
    w.bookmark(5);
    assert_eq!(t.join().unwrap().unwrap().resource_version(), 5);
    assert_eq!(
        r.wait_for_blocking(6, Duration::from_millis(20))
            .unwrap_err(),
        WaitError::Timeout {
            wanted: 6,
            reached: 5
        }
    );
    let r3 = r.clone();
    let t = std::thread::spawn(move || r3.wait_for_blocking(6, Duration::from_secs(30)));
    drop(w);
    assert_eq!(
        t.join().unwrap().unwrap_err(),
        WaitError::WriterDropped {
            wanted: 6,
            reached: 5
        }
    );
}

/// A batch that changes keys in different shards is seen by readers entirely or not at all:
/// readers spin on snapshots (and on single `Store` calls) while the writer floods batches.
#[test]
fn batches_across_shards_are_atomic_for_readers() {
    const KEYS: usize = 32;
    const BATCHES: u64 = 1_500;
    for shards in [2, 64] {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer(LABELS_INDEX, labels_index_func()),
        );
        let names: Vec<String> = (0..KEYS).map(|i| format!("k{i}")).collect();
        // rv 1: the even keys at gen 0 (the state an odd rv describes).
        let mut batch = WriteBatch::new();
        for name in names.iter().step_by(2) {
            batch.add(pod("ns", name, "", &[("gen", "0")]));
        }
        w.apply(batch.with_resource_version(1)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let r = r.clone();
                let done = done.clone();
                let names = names.clone();
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    let mut last_gen = 0;
                    while !done.load(Ordering::Acquire) && checks < 200_000 {
                        let snap = r.snapshot();
                        let rv = snap.resource_version();
                        assert!(snap.generation() >= last_gen, "versions go forward");
                        last_gen = snap.generation();
                        // Even batches write all keys, odd batches delete the odd keys.
                        let expect_len = if rv % 2 == 0 { KEYS } else { KEYS / 2 };
                        assert_eq!(snap.len(), expect_len, "rv {rv}");
                        let gen_label = format!("gen={}", rv - rv % 2);
                        for (i, name) in names.iter().enumerate() {
                            let got = snap.get(&*format!("ns/{name}"));
                            if rv % 2 == 1 && i % 2 == 1 {
                                assert!(got.is_none(), "rv {rv}: {name} should be deleted");
                                continue;
                            }
                            let obj = got.unwrap_or_else(|| panic!("rv {rv}: {name} missing"));
                            assert_eq!(
                                obj.meta().labels().get("gen").unwrap(),
                                (rv - rv % 2).to_string()
                            );
                        }
                        assert_eq!(
                            snap.index_keys(LABELS_INDEX, &gen_label).unwrap().len(),
                            expect_len
                        );
                        assert_eq!(snap.index_values(LABELS_INDEX).unwrap().len(), 1);
                        // A single Store call also sees one version.
                        let n = r.by_index(NAMESPACE_INDEX, "ns").unwrap().len();
                        assert!(n == KEYS || n == KEYS / 2);
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        for rv in 2..=BATCHES {
            let mut batch = WriteBatch::with_capacity(KEYS);
            if rv % 2 == 0 {
                for name in &names {
                    batch.add(pod("ns", name, "", &[("gen", &rv.to_string())]));
                }
            } else {
                for name in names.iter().skip(1).step_by(2) {
                    batch.delete(ObjectKey::new("ns", name));
                }
            }
            w.apply(batch.with_resource_version(rv)).unwrap();
        }
        done.store(true, Ordering::Release);
        let total: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(total > 0, "readers checked something");
        assert_eq!(r.resource_version(), BATCHES);
    }
}

/// A snapshot held across many writes keeps seeing its own version, never blocks the writer
/// (which copies the held buffer's tables once instead of waiting), and later snapshots see
/// every write.
#[test]
fn held_snapshot_is_stable_and_does_not_block_the_writer() {
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer(LABELS_INDEX, labels_index_func()),
        );
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            batch.add(pod("ns", &format!("p{i}"), "", &[("gen", "0")]));
        }
        w.apply(batch.with_resource_version(1)).unwrap();
        let held = r.snapshot();
        let copies_before = w.buffer_copies();
        for rv in 2..50u64 {
            let mut batch = WriteBatch::new();
            for i in 0..100 {
                batch.add(pod("ns", &format!("p{i}"), "", &[("gen", &rv.to_string())]));
            }
            batch.delete(ObjectKey::new("ns", &format!("p{}", rv % 100)));
            w.apply(batch.with_resource_version(rv)).unwrap();
            // The held version is untouched.
            assert_eq!(held.resource_version(), 1);
            assert_eq!(held.len(), 100);
            assert_eq!(held.index_keys(LABELS_INDEX, "gen=0").unwrap().len(), 100);
            // The latest version has the write.
            let now = r.snapshot();
            assert_eq!(now.resource_version(), rv);
            assert_eq!(now.len(), 99);
            let gen_label = format!("gen={rv}");
            assert_eq!(now.index_keys(LABELS_INDEX, &gen_label).unwrap().len(), 99);
            assert_eq!(now.index_values(LABELS_INDEX).unwrap().len(), 1);
        }
        // One copy for the held buffer, not one per write.
        assert_eq!(w.buffer_copies() - copies_before, 1, "{shards} shards");
        assert!(held.get("ns/p0").is_some());
        drop(held);
        // The released buffer is freed by the writer and writes go on in place.
        w.bookmark(100);
        assert_eq!(r.resource_version(), 100);
        assert_eq!(w.buffer_copies() - copies_before, 1);
    }
}

/// `by_index` and `index` look keys up in groups; sets larger than a group, with updates and
/// deletes between queries, return every object once, sorted, the stored version of each, for
/// shard counts with weighted shares (2..=256) and with equal shares (above 256).
#[test]
fn large_index_sets_return_every_current_object() {
    for shards in [1, 2, 16, 64, 256, 300] {
        let (r, mut w) = store(StoreConfig::default().shards(shards));
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            batch.add(pod(
                "big",
                &format!("p{i:03}"),
                &format!("u{i}"),
                &[("app", "x")],
            ));
            batch.add(pod("other", &format!("p{i:03}"), &format!("o{i}"), &[]));
        }
        w.apply(batch).unwrap();
        let mut batch = WriteBatch::new();
        for i in (0..100).step_by(3) {
            batch.add(pod(
                "big",
                &format!("p{i:03}"),
                &format!("v{i}"),
                &[("app", "x")],
            ));
        }
        for i in (1..100).step_by(7) {
            batch.delete(ObjectKey::new("big", &format!("p{i:03}")));
        }
        w.apply(batch).unwrap();
        let want: Vec<String> = (0..100)
            .filter(|i| i % 7 != 1)
            .map(|i| format!("big/p{i:03}"))
            .collect();
        let got = r.by_index(NAMESPACE_INDEX, "big").unwrap();
        assert_eq!(keys(&got), want, "shards {shards}");
        for o in &got {
            let i: usize = o.name()[1..].parse().unwrap();
            let uid = if i.is_multiple_of(3) {
                format!("v{i}")
            } else {
                format!("u{i}")
            };
            assert_eq!(o.uid(), uid, "shards {shards}");
            assert!(Arc::ptr_eq(o, &r.get(o.key().as_str()).unwrap()));
        }
        let probe = pod("big", "not-stored", "z", &[]);
        assert_eq!(keys(&r.index(NAMESPACE_INDEX, &probe).unwrap()), want);
        assert_eq!(r.len(), 100 + want.len());
    }
}

/// Index sets past a few hundred members change shape (sorted slot vector ↔ B-tree) and slots
/// are reused after deletes; both buffers, and a buffer copied while a snapshot holds the other,
/// must keep every index in key order. Keys are added in an order unlike their sort order, so
/// slot order differs from key order.
#[test]
fn large_index_sets_stay_sorted_across_shapes_slot_reuse_and_both_buffers() {
    for shards in SHARDS {
        let (r, mut w) = store(
            StoreConfig::default()
                .shards(shards)
                .indexer(LABELS_INDEX, labels_index_func()),
        );
        let name = |i: usize| format!("p{:04}", (i * 7919) % 1000);
        let mut want: BTreeMap<String, bool> = BTreeMap::new(); // key -> label "big"
        let check = |snap: &informer::store::Snapshot, want: &BTreeMap<String, bool>| {
            let all: Vec<String> = want.keys().cloned().collect();
            assert_eq!(keys(&snap.by_index(NAMESPACE_INDEX, "ns").unwrap()), all);
            let ks: Vec<String> = snap
                .index_keys(NAMESPACE_INDEX, "ns")
                .unwrap()
                .iter()
                .map(|k| k.to_string())
                .collect();
            assert_eq!(ks, all);
            let big: Vec<String> = want
                .iter()
                .filter(|(_, b)| **b)
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(keys(&snap.by_index(LABELS_INDEX, "size=big").unwrap()), big);
            assert_eq!(snap.len(), want.len());
        };
        // Grow to 600 in batches of 50 (sets pass 256: vector -> B-tree).
        for b in 0..12 {
            let mut batch = WriteBatch::new();
            for i in b * 50..(b + 1) * 50 {
                let big = i % 3 != 0;
                batch.add(pod(
                    "ns",
                    &name(i),
                    &format!("u{i}"),
                    &[("size", if big { "big" } else { "small" })],
                ));
                want.insert(format!("ns/{}", name(i)), big);
            }
            w.apply(batch).unwrap();
            check(&r.snapshot(), &want);
        }
        // Shrink to 60 (B-tree -> vector), holding a snapshot now and then so the writer
        // copies a buffer instead of replaying into it.
        let mut held = None;
        for b in 0..12 {
            let mut batch = WriteBatch::new();
            for i in (0..600).filter(|i| i % 10 != 0 && i % 12 == b) {
                batch.delete(ObjectKey::new("ns", &name(i)));
                want.remove(&format!("ns/{}", name(i)));
            }
            // Relabel a few: moves between label values.
            for i in (0..600).filter(|i| i % 10 == 0 && i % 12 == b) {
                batch.add(pod("ns", &name(i), &format!("u{i}"), &[("size", "big")]));
                want.insert(format!("ns/{}", name(i)), true);
            }
            w.apply(batch).unwrap();
            check(&r.snapshot(), &want);
            if b % 4 == 0 {
                held = Some((r.snapshot(), want.clone()));
            }
            if let Some((snap, at)) = &held {
                check(snap, at);
            }
        }
        drop(held);
        // Refill into the freed slots and check again, twice (both buffers written).
        for round in 0..2 {
            let mut batch = WriteBatch::new();
            for i in 1000..1100 {
                let n = format!("q{:04}-{round}", (i * 31) % 100);
                batch.add(pod("ns", &n, &format!("v{i}"), &[("size", "big")]));
                want.insert(format!("ns/{n}"), true);
            }
            w.apply(batch).unwrap();
            check(&r.snapshot(), &want);
            w.bookmark(10 + round as u64);
            check(&r.snapshot(), &want);
        }
    }
}

/// A write that panics half-way (an index function panicking on a stored object, caught by
/// the caller) is never published, and the buffer it half-wrote is rebuilt: both buffers,
/// published in turn by the following writes, hold only complete versions.
#[test]
fn write_that_panics_half_way_is_never_published() {
    static PANIC: AtomicBool = AtomicBool::new(false);
    let config = StoreConfig::default().indexer(
        "uid",
        index_func(|o| {
            if PANIC.load(Ordering::Relaxed) && o.uid() == "old-a" {
                panic!("index function panics on the stored a");
            }
            Ok(std::iter::once(o.uid().to_owned()).collect())
        }),
    );
    let (reader, mut writer) = store(config);
    let a = pod("ns", "a", "old-a", &[]);
    let b = pod("ns", "b", "old-b", &[]);
    writer
        .apply(
            [a.clone(), b.clone()]
                .into_iter()
                .map(informer::store::Op::Upsert)
                .collect(),
        )
        .unwrap();

    PANIC.store(true, Ordering::Relaxed);
    let batch: WriteBatch = [pod("ns", "b", "new-b", &[]), pod("ns", "a", "new-a", &[])]
        .into_iter()
        .map(informer::store::Op::Upsert)
        .collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.apply(batch)));
    assert!(result.is_err(), "the index function panicked");
    PANIC.store(false, Ordering::Relaxed);

    let check = |want_c: bool| {
        let snap = reader.snapshot();
        assert_eq!(
            snap.get("ns/a").map(|o| o.uid().to_owned()).as_deref(),
            Some("old-a")
        );
        assert_eq!(
            snap.get("ns/b").map(|o| o.uid().to_owned()).as_deref(),
            Some("old-b")
        );
        assert!(snap.by_index("uid", "new-b").unwrap().is_empty());
        assert_eq!(keys(&snap.by_index("uid", "old-b").unwrap()), ["ns/b"]);
        assert_eq!(snap.get("ns/c").is_some(), want_c);
        assert_eq!(snap.len(), 2 + usize::from(want_c));
    };
    check(false);
    // More versions: each buffer is published, in turn.
    let upsert = |obj| WriteBatch::from_iter([informer::store::Op::Upsert(obj)]);
    writer.apply(upsert(pod("ns", "c", "c", &[]))).unwrap();
    check(true);
    writer.bookmark(100);
    check(true);
    writer.apply(upsert(pod("ns", "c", "c2", &[]))).unwrap();
    check(true);
}

/// A pending `wait_for` holds no version: the writer never waits for it or copies the store
/// because of it, and objects it replaces are freed.
#[test]
fn pending_wait_for_holds_no_version() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let (reader, mut writer) = store(StoreConfig::default());
    let a = pod("ns", "a", "ua", &[]);
    let first = Arc::downgrade(&a);
    writer
        .apply(WriteBatch::from_iter([informer::store::Op::Upsert(a)]).with_resource_version(1))
        .unwrap();
    let mut wait = Box::pin(reader.wait_for(1_000));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    for rv in 2..20u64 {
        let obj = pod("ns", "a", &format!("u{rv}"), &[]);
        let batch = WriteBatch::from_iter([informer::store::Op::Upsert(obj)]);
        writer.apply(batch.with_resource_version(rv)).unwrap();
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(
        writer.buffer_copies(),
        0,
        "the writer copied for a pending wait_for"
    );
    assert!(
        first.upgrade().is_none(),
        "a replaced object is still alive"
    );
    writer.bookmark(1_000);
    match wait.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(snap)) => assert_eq!(snap.resource_version(), 1_000),
        other => panic!("wait_for did not finish: {other:?}"),
    }
}

/// A `with` closure that writes and then drops the writer (the store's buffers are then still
/// read by this very call) returns, and the store stays readable at the last version.
#[test]
fn a_with_closure_that_drops_the_writer_does_not_hang() {
    for shards in SHARDS {
        let (r, mut w) = store(StoreConfig::default().shards(shards));
        let mut batch = WriteBatch::new();
        batch.add(pod("default", "a", "ua", &[]));
        batch.set_resource_version(1);
        w.apply(batch).unwrap();
        let mut writer = Some(w);
        let seen = r.with("default/a", |a| {
            let mut w = writer.take().unwrap();
            for rv in 2..5 {
                let mut batch = WriteBatch::new();
                batch.update(pod("default", "a", &format!("u{rv}"), &[]));
                batch.set_resource_version(rv);
                w.apply(batch).unwrap();
            }
            drop(w);
            a.uid().to_owned()
        });
        assert_eq!(
            seen.as_deref(),
            Some("ua"),
            "the closure read the version it started on"
        );
        assert_eq!(r.resource_version(), 4);
        assert_eq!(r.get("default/a").unwrap().uid(), "u4");
        assert_eq!(r.snapshot().resource_version(), 4);
    }
}

/// One thread's reads never go back a version, whichever way each reads (a borrow under a
/// hazard slot, or a counted snapshot through arc-swap), while a writer publishes.
#[test]
fn reads_on_one_thread_never_go_back_across_the_two_read_paths() {
    let (r, mut w) = store(StoreConfig::default());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rv = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rv += 1;
                let mut batch = WriteBatch::new();
                batch.add(pod("default", &format!("p{}", rv % 16), "u", &[]));
                batch.set_resource_version(rv);
                w.apply(batch).unwrap();
            }
        })
    };
    let mut last = 0;
    for _ in 0..200_000 {
        let a = r.resource_version();
        let b = r.snapshot().resource_version();
        let c = r.resource_version();
        assert!(
            last <= a && a <= b && b <= c,
            "went back: {last} {a} {b} {c}"
        );
        last = c;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}
