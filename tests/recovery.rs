//! How the informer recovers from a broken watch: which adds, updates and deletes handlers get
//! after a relist, that a relist reports unchanged objects as syncs and changed ones as updates,
//! and that random churn with disconnects ends with exactly the server's objects. All on paused
//! tokio time, deterministic from the seeds.

mod common;
mod support;
mod views;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    churn, churn_reflector, start_informer, wait_converged, wait_converged_frozen, wait_frozen,
    wait_until,
};
use informer::fifo::{DeltaFifo, DeltaType};
use informer::object::{Object, ObjectKey};
use informer::reflector::{Reflector, ReflectorConfig};
use informer::sim::{Fault, SimConfig, SimServer, StreamFault};
use support::templates;
use views::{Seen, view_of};

fn reflector() -> ReflectorConfig {
    ReflectorConfig::default().seed(Some(17))
}

fn stream(after_events: u64, action: StreamFault) -> Fault {
    Fault::Stream {
        after_events,
        action,
    }
}

#[tokio::test(start_paused = true)]
async fn a_relist_after_a_disconnect_reports_exactly_the_adds_updates_and_tombstone_deletes() {
    // A watch window of 30 events: a watch that missed more cannot resume.
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(31)
            .initial_objects(60)
            .target_objects(60)
            .history_window(30),
    )
    .unwrap();
    let (informer, views) = start_informer(sim.clone(), reflector(), 2);
    wait_converged_frozen(&sim, &informer, &views).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = sim.truth();
    for v in &views {
        v.clear_seen();
    }

    // The connection drops; while it is down, objects are created, updated and deleted: 53
    // changes, more than the window.
    sim.inject(stream(0, StreamFault::Reset));
    let keys: Vec<ObjectKey> = before.objects.keys().cloned().collect();
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(sim.create("ns-new", &format!("created-{i}")).unwrap().key());
    }
    for _ in 0..4 {
        for k in &keys[..10] {
            sim.update(k).unwrap();
        }
    }
    for k in &keys[10..18] {
        sim.delete(k).unwrap();
    }
    wait_converged(&sim, &informer, &views).await;
    let after = sim.truth();

    // Exactly: an add per created object, an update (old → new) per updated object, a
    // tombstone delete per deleted object, nothing for the 42 unchanged ones.
    let mut expected: Vec<Seen> = Vec::new();
    for k in &created {
        expected.push(Seen::Add {
            key: k.clone(),
            rv: after.objects[k].resource_version().to_owned(),
            initial: false,
        });
    }
    for k in &keys[..10] {
        expected.push(Seen::Update {
            key: k.clone(),
            old_rv: before.objects[k].resource_version().to_owned(),
            new_rv: after.objects[k].resource_version().to_owned(),
        });
    }
    for k in &keys[10..18] {
        expected.push(Seen::Delete {
            key: k.clone(),
            tombstone: true,
        });
    }
    expected.sort();
    for (i, v) in views.iter().enumerate() {
        let mut seen = v.seen();
        seen.sort();
        assert_eq!(seen, expected, "handler {i}");
    }
    // The way there: the watch resumed from the last version, got 410, and the relist asked
    // for that version (not "").
    let m = informer.reflector_metrics().unwrap().snapshot();
    assert_eq!(m.relists, 1);
    let lists: Vec<String> = sim
        .requests()
        .iter()
        .filter(|r| r.is_first_page())
        .map(|r| r.resource_version().to_owned())
        .collect();
    assert_eq!(lists, ["0".to_owned(), before.resource_version.to_string()]);
    informer.shutdown();
}

/// How a consumer classifies one delta (client-go `processDeltas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Add,
    Update,
    Sync,
    Delete,
}

#[tokio::test(start_paused = true)]
async fn a_relist_delivers_unchanged_objects_as_syncs_and_changed_ones_as_updates() {
    let build = || {
        SimServer::new(
            SimConfig::new(templates("etcd"))
                .seed(32)
                .initial_objects(50)
                .target_objects(50),
        )
        .unwrap()
    };
    // The relist's ERROR comes before the 10 updates reach the watch, so the relist brings
    // them: 10 objects at a new resourceVersion, 40 at the one already cached.
    let relist_with_updates = |sim: &SimServer| -> BTreeSet<ObjectKey> {
        sim.inject(stream(0, StreamFault::Expired));
        let keys: Vec<ObjectKey> = sim.truth().objects.keys().step_by(5).cloned().collect();
        for k in &keys {
            sim.update(k).unwrap();
        }
        keys.into_iter().collect()
    };

    // At the DeltaFIFO: every listed object is a Replaced delta; the consumer tells syncs
    // (same resourceVersion as cached) from updates.
    let sim = build();
    let known: Arc<Mutex<BTreeMap<ObjectKey, Arc<Object>>>> = Arc::default();
    let fifo = DeltaFifo::with_known_objects(known.clone());
    let r = Reflector::new(Arc::new(sim.clone()), Arc::new(fifo.clone()), reflector());
    let metrics = r.metrics();
    let reflector_task = tokio::spawn(r.run());
    let classes: Arc<Mutex<Vec<(ObjectKey, Class)>>> = Arc::default();
    let consumer = {
        let (fifo, known, classes) = (fifo.clone(), known.clone(), classes.clone());
        tokio::spawn(async move {
            while let Ok(batch) = fifo.pop_batch_async(64).await {
                let mut map = known.lock().unwrap();
                for item in batch.iter() {
                    for d in item.deltas.iter() {
                        let class = if d.kind == DeltaType::Deleted {
                            map.remove(&item.key);
                            Class::Delete
                        } else {
                            let new = d.object.object().clone();
                            match map.insert(item.key.clone(), new.clone()) {
                                None => Class::Add,
                                Some(old)
                                    if d.kind == DeltaType::Sync
                                        || (d.kind == DeltaType::Replaced
                                            && old.resource_version()
                                                == new.resource_version()) =>
                                {
                                    Class::Sync
                                }
                                Some(_) => Class::Update,
                            }
                        };
                        classes.lock().unwrap().push((item.key.clone(), class));
                    }
                }
                drop(map);
                drop(batch);
            }
        })
    };
    let versions =
        |known: &Mutex<BTreeMap<ObjectKey, Arc<Object>>>| view_of(known.lock().unwrap().iter());
    wait_until("synced", || sim.truth().diff(&versions(&known)).is_none()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    classes.lock().unwrap().clear();
    let updated = relist_with_updates(&sim);
    wait_until("relisted", || {
        metrics.snapshot().relists == 1
            && fifo.is_empty()
            && sim.truth().diff(&versions(&known)).is_none()
    })
    .await;
    let got: BTreeMap<ObjectKey, Class> = classes.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        classes.lock().unwrap().len(),
        50,
        "one delta per listed key"
    );
    for (k, c) in &got {
        let expected = if updated.contains(k) {
            Class::Update
        } else {
            Class::Sync
        };
        assert_eq!(*c, expected, "{k}");
    }
    assert_eq!(got.values().filter(|c| **c == Class::Sync).count(), 40);
    reflector_task.abort();
    fifo.close();
    consumer.await.unwrap();

    // Through the informer: handlers that did not ask for resyncs get the 10 real updates and
    // nothing for the 40 syncs (a sync only goes to handlers due for a resync).
    let sim = build();
    let (informer, views) = start_informer(sim.clone(), reflector(), 2);
    wait_converged_frozen(&sim, &informer, &views).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for v in &views {
        v.clear_seen();
    }
    let before = sim.truth();
    let updated = relist_with_updates(&sim);
    wait_converged(&sim, &informer, &views).await;
    assert_eq!(informer.reflector_metrics().unwrap().snapshot().relists, 1);
    let after = sim.truth();
    let expected: Vec<Seen> = updated
        .iter()
        .map(|k| Seen::Update {
            key: k.clone(),
            old_rv: before.objects[k].resource_version().to_owned(),
            new_rv: after.objects[k].resource_version().to_owned(),
        })
        .collect();
    for (i, v) in views.iter().enumerate() {
        let mut seen = v.seen();
        seen.sort();
        assert_eq!(seen, expected, "handler {i}");
    }
    informer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn churn_on_100_keys_with_disconnects_ends_with_exactly_the_servers_objects() {
    // 10 000 random creates, deletes and updates on 100 names (a deleted name comes back with
    // a new uid), a disconnect of some kind every 200–400 events, a watch window of 400.
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(41)
            .history_window(400),
    )
    .unwrap();
    let (informer, views) = start_informer(sim.clone(), churn_reflector(reflector()), 2);
    // Synced without letting tokio time pass: from here the reflector's run depends only on
    // the seeds, not on how fast the processing thread is.
    wait_frozen("synced", || informer.has_synced()).await;
    let mut rng = fastrand::Rng::with_seed(41);
    let kinds = [
        StreamFault::Reset,
        StreamFault::Close,
        StreamFault::Expired,
        StreamFault::Stall,
        StreamFault::Corrupt,
    ];
    let mut next_disconnect = rng.u64(200..=400);
    let mut disconnects = 0;
    let live = churn(&sim, &mut rng, 10_000, 7, |event, rng| {
        if event != next_disconnect {
            return None;
        }
        let fault = stream(rng.u64(0..20), kinds[disconnects % kinds.len()]);
        disconnects += 1;
        next_disconnect += rng.u64(200..=400);
        Some(fault)
    })
    .await;
    wait_converged(&sim, &informer, &views).await;
    let truth = sim.truth();
    assert_eq!(truth.objects.keys().cloned().collect::<BTreeSet<_>>(), live);
    let m = informer.reflector_metrics().unwrap().snapshot();
    let fired = sim.stats().faults_fired;
    assert!(disconnects >= 25, "{disconnects} disconnects");
    assert!(
        fired + 2 >= disconnects as u64,
        "{fired} of {disconnects} fired"
    );
    assert!(m.relists >= 10, "{m:?}");
    assert!(m.watches >= fired, "{m:?}");
    informer.shutdown();
}
