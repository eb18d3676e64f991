//! DeltaFIFO semantics (client-go `tools/cache/delta_fifo.go`), one named test per rule.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use informer::fifo::{
    DeletedFinalStateUnknown, Delta, DeltaFifo, DeltaObject, DeltaType, KnownObjects, PopError,
    TryPopError,
};
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta};

type Known = Arc<Mutex<HashMap<ObjectKey, Arc<Object>>>>;
type Shape = Vec<(DeltaType, String, bool)>;

fn obj(name: &str, rv: &str) -> Arc<Object> {
    let meta = ObjectMeta::from(ObjectMetaFields {
        name: name.to_owned().into(),
        namespace: "ns".to_owned().into(),
        resource_version: rv.to_owned().into(),
        ..Default::default()
    });
    Arc::new(Object::from_parts(
        Arc::new(GroupVersionKind::new("", "v1", "ConfigMap")),
        meta,
        Bytes::new(),
        Encoding::Json,
    ))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("ns", name)
}

/// (kind, resourceVersion, is tombstone) of each delta, for compact assertions.
fn shape(deltas: &[Delta]) -> Shape {
    deltas
        .iter()
        .map(|d| {
            (
                d.kind,
                d.object.object().resource_version().to_owned(),
                d.object.is_tombstone(),
            )
        })
        .collect()
}

fn known_with(objs: &[Arc<Object>]) -> Known {
    Arc::new(Mutex::new(
        objs.iter().map(|o| (o.key(), o.clone())).collect(),
    ))
}

fn fifo_with(known: &Known) -> DeltaFifo {
    DeltaFifo::with_known_objects(known.clone())
}

/// Applies each popped key's newest state to `known`, as an informer would.
fn apply(batch: &informer::fifo::PopBatch, known: &Known) {
    let mut map = known.lock().unwrap();
    for item in batch {
        let newest = item.deltas.newest().unwrap();
        if newest.kind == DeltaType::Deleted {
            map.remove(&item.key);
        } else {
            map.insert(item.key.clone(), newest.object.object().clone());
        }
    }
}

/// Pops and applies everything queued.
fn drain_into(fifo: &DeltaFifo, known: &Known) -> Vec<(ObjectKey, Vec<Delta>)> {
    let mut out = Vec::new();
    while let Ok(batch) = fifo.try_pop_batch(usize::MAX) {
        apply(&batch, known);
        out.extend(batch.iter().map(|i| (i.key.clone(), i.deltas.to_vec())));
    }
    out
}

fn by_key(batch: &informer::fifo::PopBatch) -> HashMap<ObjectKey, Shape> {
    batch
        .iter()
        .map(|i| (i.key.clone(), shape(&i.deltas)))
        .collect()
}

#[test]
fn deltas_of_a_key_are_kept_oldest_first() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.update(obj("a", "2"));
    fifo.update(obj("a", "3"));
    fifo.delete(obj("a", "4"));
    let batch = fifo.pop_batch(10).unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(
        shape(&batch[0].deltas),
        vec![
            (DeltaType::Added, "1".into(), false),
            (DeltaType::Updated, "2".into(), false),
            (DeltaType::Updated, "3".into(), false),
            (DeltaType::Deleted, "4".into(), false),
        ]
    );
}

#[test]
fn a_key_is_queued_once() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.add(obj("b", "1"));
    fifo.update(obj("a", "2"));
    assert_eq!(fifo.len(), 2);
    assert_eq!(fifo.queued_keys(), vec![key("a"), key("b")]);
}

#[test]
fn pop_batches_distinct_keys_in_first_enqueue_order() {
    let fifo = DeltaFifo::new();
    for name in ["c", "a", "d", "b", "e"] {
        fifo.add(obj(name, "1"));
    }
    fifo.update(obj("a", "2")); // does not move `a` back
    fifo.update(obj("c", "2"));
    let first = fifo.pop_batch(3).unwrap();
    let keys: Vec<_> = first.iter().map(|i| i.key.clone()).collect();
    assert_eq!(keys, vec![key("c"), key("a"), key("d")]);
    assert_eq!(first[0].deltas.len(), 2);
    assert_eq!(first[1].deltas.len(), 2);
    // A key queued again after its pop goes to the back.
    fifo.update(obj("c", "3"));
    let second = fifo.pop_batch(10).unwrap();
    let keys: Vec<_> = second.iter().map(|i| i.key.clone()).collect();
    assert_eq!(keys, vec![key("b"), key("e"), key("c")]);
    assert!(fifo.is_empty());
}

#[test]
fn pop_batch_of_zero_takes_one() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.add(obj("b", "1"));
    assert_eq!(fifo.pop_batch(0).unwrap().len(), 1);
}

#[test]
fn two_consecutive_deletes_collapse_into_one() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.delete(obj("a", "2"));
    fifo.delete(obj("a", "3"));
    let batch = fifo.pop_batch(1).unwrap();
    // Neither is a tombstone: the older one is kept (upstream `isDeletionDup`).
    assert_eq!(
        shape(&batch[0].deltas),
        vec![
            (DeltaType::Added, "1".into(), false),
            (DeltaType::Deleted, "2".into(), false)
        ]
    );
}

#[test]
fn double_delete_keeps_the_one_without_tombstone() {
    // Queued delete, then a relist detects the deletion again (tombstone): the real one stays.
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.delete(obj("a", "2"));
    fifo.replace(vec![], "10");
    let batch = fifo.pop_batch(1).unwrap();
    assert_eq!(
        shape(&batch[0].deltas),
        vec![
            (DeltaType::Added, "1".into(), false),
            (DeltaType::Deleted, "2".into(), false)
        ]
    );
    drop(batch);

    // Tombstone first, then the watch's real delete: the real one replaces the tombstone.
    let known = known_with(&[obj("b", "1")]);
    let fifo = fifo_with(&known);
    fifo.replace(vec![], "10");
    fifo.delete(obj("b", "5"));
    let batch = fifo.pop_batch(1).unwrap();
    assert_eq!(
        shape(&batch[0].deltas),
        vec![(DeltaType::Deleted, "5".into(), false)]
    );
}

#[test]
fn only_consecutive_deletes_collapse() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.delete(obj("a", "2"));
    fifo.add(obj("a", "3"));
    fifo.delete(obj("a", "4"));
    let batch = fifo.pop_batch(1).unwrap();
    let kinds: Vec<_> = batch[0].deltas.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        vec![
            DeltaType::Added,
            DeltaType::Deleted,
            DeltaType::Added,
            DeltaType::Deleted
        ]
    );
}

#[test]
fn delete_of_a_key_neither_queued_nor_known_is_ignored() {
    let fifo = DeltaFifo::new();
    fifo.delete(obj("a", "1"));
    assert!(fifo.is_empty());

    let known = known_with(&[obj("b", "1")]);
    let fifo = fifo_with(&known);
    fifo.delete(obj("a", "1"));
    assert!(fifo.is_empty());
    // Known: queued.
    fifo.delete(obj("b", "2"));
    assert_eq!(fifo.queued_keys(), vec![key("b")]);
}

#[test]
fn replace_queues_replaced_for_listed_and_tombstones_for_queued_and_known() {
    let known = known_with(&[
        obj("k-listed", "1"),
        obj("k-gone", "1"),
        obj("both-gone", "1"),
    ]);
    let fifo = fifo_with(&known);
    fifo.add(obj("q-gone", "2"));
    fifo.update(obj("both-gone", "3")); // queued and known: the tombstone carries the queued object
    fifo.update(obj("q-listed", "4")); // queued and listed: no tombstone
    fifo.replace(
        vec![obj("k-listed", "9"), obj("new", "9"), obj("q-listed", "9")],
        "9",
    );

    let batch = fifo.pop_batch(100).unwrap();
    let got = by_key(&batch);
    assert_eq!(batch.len(), 6);
    assert_eq!(
        got[&key("q-listed")],
        vec![
            (DeltaType::Updated, "4".into(), false),
            (DeltaType::Replaced, "9".into(), false)
        ]
    );
    assert_eq!(
        got[&key("k-listed")],
        vec![(DeltaType::Replaced, "9".into(), false)]
    );
    assert_eq!(
        got[&key("new")],
        vec![(DeltaType::Replaced, "9".into(), false)]
    );
    assert_eq!(
        got[&key("q-gone")],
        vec![
            (DeltaType::Added, "2".into(), false),
            (DeltaType::Deleted, "2".into(), true)
        ]
    );
    assert_eq!(
        got[&key("both-gone")],
        vec![
            (DeltaType::Updated, "3".into(), false),
            (DeltaType::Deleted, "3".into(), true)
        ]
    );
    assert_eq!(
        got[&key("k-gone")],
        vec![(DeltaType::Deleted, "1".into(), true)]
    );
    // Queued keys keep their place; the listed keys and the known deletion follow.
    assert_eq!(batch[0].key, key("q-gone"));
    assert_eq!(batch[1].key, key("both-gone"));

    let tomb = &batch
        .iter()
        .find(|i| i.key == key("k-gone"))
        .unwrap()
        .deltas[0]
        .object;
    match tomb {
        DeltaObject::Tombstone(t) => {
            let DeletedFinalStateUnknown { key: k, obj } = &**t;
            assert_eq!(k, &key("k-gone"));
            assert_eq!(obj.key(), key("k-gone"));
        }
        DeltaObject::Object(_) => panic!("expected a tombstone"),
    }
}

#[test]
fn replace_tombstone_of_a_tombstone_carries_the_object() {
    let known = known_with(&[obj("a", "1")]);
    let fifo = fifo_with(&known);
    fifo.replace(vec![], "5");
    fifo.replace(vec![], "6");
    let batch = fifo.pop_batch(1).unwrap();
    // Two tombstones collapse into one whose object is the real object, not a nested tombstone.
    assert_eq!(
        shape(&batch[0].deltas),
        vec![(DeltaType::Deleted, "1".into(), true)]
    );
}

#[test]
fn resync_adds_sync_for_known_keys_with_nothing_queued() {
    let known = known_with(&[obj("a", "1"), obj("b", "1")]);
    let fifo = fifo_with(&known);
    fifo.update(obj("a", "2"));
    fifo.resync();
    let batch = fifo.pop_batch(10).unwrap();
    let got = by_key(&batch);
    assert_eq!(
        got[&key("a")],
        vec![(DeltaType::Updated, "2".into(), false)]
    );
    assert_eq!(got[&key("b")], vec![(DeltaType::Sync, "1".into(), false)]);

    // Without known objects, resync does nothing.
    let fifo = DeltaFifo::new();
    fifo.resync();
    assert!(fifo.is_empty());
}

#[test]
fn has_synced_after_first_replace_items_and_deletions_are_popped() {
    let known = known_with(&[obj("gone", "1")]);
    let fifo = fifo_with(&known);
    assert!(!fifo.has_synced());
    fifo.add(obj("early", "1"));
    assert!(!fifo.has_synced(), "an add alone does not populate");
    fifo.replace(vec![obj("a", "2"), obj("b", "2")], "2");
    assert!(!fifo.has_synced());
    fifo.add(obj("late", "3")); // after the replace: not part of the initial population

    // Initial population = early (tombstoned), a, b, gone (tombstone) = 4 keys.
    let first = fifo.pop_batch(3).unwrap();
    assert!(first.iter().all(|i| i.is_in_initial_list));
    assert!(!fifo.has_synced());
    let second = fifo.pop_batch(10).unwrap();
    let flags: Vec<_> = second
        .iter()
        .map(|i| (i.key.clone(), i.is_in_initial_list))
        .collect();
    assert_eq!(flags, vec![(key("gone"), true), (key("late"), false)]);
    drop(second);
    assert!(
        !fifo.has_synced(),
        "a batch still being applied holds back sync"
    );
    drop(first);
    assert!(fifo.has_synced());

    // Later replaces and events never unsync.
    fifo.replace(vec![obj("x", "5")], "5");
    assert!(fifo.has_synced());
}

#[test]
fn has_synced_is_callable_from_inside_the_consumer() {
    let fifo = DeltaFifo::new();
    fifo.replace(vec![obj("a", "1")], "1");
    let batch = fifo.pop_batch(1).unwrap();
    // Upstream would deadlock here (HasSynced takes the lock Pop holds).
    assert!(!fifo.has_synced());
    fifo.add(obj("b", "2")); // producers are not blocked by a batch in progress
    batch.complete();
    assert!(fifo.has_synced());
}

#[test]
fn empty_first_replace_syncs_immediately() {
    let fifo = DeltaFifo::new();
    fifo.replace(vec![], "1");
    assert!(fifo.has_synced());
}

#[test]
fn transform_applies_before_queueing() {
    let fifo = DeltaFifo::builder()
        .transform(|o: Arc<Object>| {
            let mut meta = o.meta().to_fields();
            meta.labels.insert("transformed".into(), "yes".into());
            Arc::new(Object::from_parts(
                o.gvk_arc().clone(),
                ObjectMeta::from(meta),
                o.raw().unwrap().clone(),
                o.encoding(),
            ))
        })
        .build();
    fifo.add(obj("a", "1"));
    fifo.replace(vec![obj("b", "1")], "1");
    let batch = fifo.pop_batch(10).unwrap();
    assert_eq!(batch.len(), 2);
    for item in &batch {
        for d in &item.deltas {
            let label = d.object.object().meta().labels().get("transformed");
            assert_eq!(label, Some("yes"), "{:?}", item.key);
        }
    }
}

#[test]
fn close_hands_out_the_rest_then_reports_closed() {
    let fifo = DeltaFifo::new();
    fifo.add(obj("a", "1"));
    fifo.close();
    assert!(fifo.is_closed());
    assert_eq!(fifo.pop_batch(10).unwrap().len(), 1);
    assert_eq!(fifo.pop_batch(10).unwrap_err(), PopError::Closed);
    assert_eq!(fifo.try_pop_batch(10).unwrap_err(), TryPopError::Closed);
}

#[test]
fn try_pop_on_empty_reports_empty() {
    let fifo = DeltaFifo::new();
    assert_eq!(fifo.try_pop_batch(10).unwrap_err(), TryPopError::Empty);
}

#[test]
fn blocked_pop_wakes_on_push_and_on_close() {
    let fifo = DeltaFifo::new();
    let consumer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                match fifo.pop_batch(4) {
                    Ok(batch) => got.extend(batch.iter().map(|i| i.key.clone())),
                    Err(PopError::Closed) => return got,
                }
            }
        })
    };
    let names: Vec<String> = (0..1000).map(|i| format!("o{i}")).collect();
    for n in &names {
        fifo.add(obj(n, "1"));
    }
    fifo.close();
    let got = consumer.join().unwrap();
    let want: Vec<ObjectKey> = names.iter().map(|n| key(n)).collect();
    assert_eq!(got, want);
}

#[test]
fn async_pop_waits_for_items_and_close() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let fifo = DeltaFifo::new();
        let consumer = {
            let fifo = fifo.clone();
            tokio::spawn(async move {
                let mut n = 0;
                while let Ok(batch) = fifo.pop_batch_async(16).await {
                    n += batch.len();
                }
                n
            })
        };
        tokio::task::yield_now().await; // let the consumer park on the empty queue
        for i in 0..100 {
            fifo.add(obj(&format!("o{i}"), "1"));
            if i % 10 == 0 {
                tokio::task::yield_now().await;
            }
        }
        fifo.close();
        assert_eq!(consumer.await.unwrap(), 100);
    });
}

#[test]
fn replace_during_an_in_flight_add_still_tombstones_it() {
    // The consumer popped Added(x) but has not applied it yet when a relist without x arrives.
    // Upstream's lock makes this impossible; the in-flight overlay gives the same outcome: x is
    // deleted in the end, no ghost.
    let known: Known = Arc::new(Mutex::new(HashMap::new()));
    let fifo = fifo_with(&known);
    fifo.replace(vec![], "1");
    fifo.add(obj("x", "2"));
    let batch = fifo.pop_batch(10).unwrap();
    fifo.replace(vec![], "3"); // x not listed
    apply(&batch, &known); // the consumer applies the add only now
    drop(batch);
    let rest = drain_into(&fifo, &known);
    assert_eq!(rest.len(), 1);
    assert_eq!(
        shape(&rest[0].1),
        vec![(DeltaType::Deleted, "2".into(), true)]
    );
    assert!(known.lock().unwrap().is_empty(), "no ghost object");
}

#[test]
fn events_during_an_in_flight_delete_see_the_key_as_gone() {
    let known = known_with(&[obj("x", "1")]);
    let fifo = fifo_with(&known);
    fifo.delete(obj("x", "2"));
    let batch = fifo.pop_batch(10).unwrap();
    // The store still has x, but the batch in flight deletes it: a second delete is ignored,
    // a resync skips it and a relist does not tombstone it again.
    fifo.delete(obj("x", "2"));
    fifo.resync();
    fifo.replace(vec![], "3");
    assert!(fifo.is_empty());
    drop(batch);
}

#[test]
fn random_operations_end_with_store_equal_to_last_list() {
    // Reference model: after any sequence of events (with a popped batch sometimes applied only
    // after later events) followed by a final replace(list) and a full drain, the applied store equals the list
    // exactly: no ghosts, no lost deletes.
    use proptest::prelude::*;
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 128,
        ..Default::default()
    });
    let op = (0u8..6, 0u8..12, any::<bool>());
    let ops = proptest::collection::vec(op, 1..80);
    let last = proptest::collection::vec(0u8..12, 0..12);
    runner
        .run(&(ops, last), |(ops, last)| {
            let known: Known = Arc::new(Mutex::new(HashMap::new()));
            let fifo = fifo_with(&known);
            // At most one batch in flight, applied only when the consumer gets to it (the
            // next pop op, or the end), like a single informer consumer.
            let mut in_flight: Option<informer::fifo::PopBatch> = None;
            for (i, (kind, k, hold)) in ops.iter().enumerate() {
                let o = obj(&format!("k{k}"), &i.to_string());
                match kind {
                    0 => fifo.add(o),
                    1 => fifo.update(o),
                    2 => fifo.delete(o),
                    3 => fifo.replace(vec![o], &i.to_string()),
                    4 => fifo.resync(),
                    _ => {
                        if let Some(batch) = in_flight.take() {
                            apply(&batch, &known);
                        } else if let Ok(batch) = fifo.try_pop_batch(3) {
                            if *hold {
                                in_flight = Some(batch);
                            } else {
                                apply(&batch, &known);
                            }
                        }
                    }
                }
            }
            let list: Vec<_> = last
                .iter()
                .map(|k| obj(&format!("k{k}"), "final"))
                .collect();
            fifo.replace(list, "final");
            if let Some(batch) = in_flight.take() {
                apply(&batch, &known);
            }
            drain_into(&fifo, &known);
            let mut got: Vec<_> = known.lock().unwrap().keys().cloned().collect();
            got.sort();
            let mut want: Vec<_> = last.iter().map(|k| key(&format!("k{k}"))).collect();
            want.sort();
            want.dedup();
            prop_assert_eq!(got, want);
            Ok(())
        })
        .unwrap();
}

#[test]
fn known_objects_impls_agree() {
    let a = obj("a", "1");
    let map: HashMap<ObjectKey, Arc<Object>> = [(a.key(), a.clone())].into_iter().collect();
    assert_eq!(map.list_keys(), vec![key("a")]);
    assert_eq!(KnownObjects::get(&map, &key("a")), Some(a));
    assert_eq!(KnownObjects::get(&map, &key("b")), None);
}
