//! The informer on a RealFIFO (`FifoKind::RealFifo`, client-go's `RealFIFO` with `AtomicFIFO`):
//! changes reach handlers in the server's order across keys, a relist is one store version that
//! handlers hear of only once the store holds all of it (deletions it found first), and churn
//! with disconnects ends with exactly the server's objects. Paused tokio time, seeded.

mod common;
mod support;
mod views;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{churn, churn_reflector, start_informer_with, wait_converged, wait_frozen};
use informer::fifo::{DeltaFifo, DeltaObject, DeltaType, FifoKind};
use informer::object::{Object, ObjectKey};
use informer::reflector::{ListerWatcher, ReflectorConfig};
use informer::sim::{Fault, SimConfig, SimServer, StreamFault};
use informer::{EventHandler, HandlerOptions, Informer, InformerConfig, Store};
use support::templates;
use views::{Recorder, Seen, ViewMap, view_of};

fn start<L: ListerWatcher>(
    lw: L,
    reflector: ReflectorConfig,
    handlers: usize,
) -> (Informer<L>, Vec<Recorder>) {
    let config = InformerConfig {
        reflector,
        fifo: FifoKind::RealFifo,
        ..Default::default()
    };
    start_informer_with(lw, config, handlers)
}

fn reflector() -> ReflectorConfig {
    ReflectorConfig::default().seed(Some(23))
}

/// Remembers what the store held when the first notification after `arm` arrived.
#[derive(Clone)]
struct StoreAtFirstNotification {
    store: Store,
    armed: Arc<Mutex<bool>>,
    seen: Arc<Mutex<Option<ViewMap>>>,
}

impl StoreAtFirstNotification {
    fn record(&self) {
        let mut armed = self.armed.lock().unwrap();
        if *armed {
            *armed = false;
            *self.seen.lock().unwrap() = Some(view_of(self.store.snapshot().iter()));
        }
    }
}

impl EventHandler for StoreAtFirstNotification {
    fn on_add(&mut self, _: &Arc<Object>, _: bool) {
        self.record();
    }
    fn on_update(&mut self, _: &Arc<Object>, _: &Arc<Object>) {
        self.record();
    }
    fn on_delete(&mut self, _: &DeltaObject) {
        self.record();
    }
}

#[tokio::test(start_paused = true)]
async fn a_relist_is_one_store_version_that_handlers_hear_of_after_it_with_deletions_first() {
    // 3 000 objects: a relist is three times the pop batch, so only the atomic relist keeps
    // it in one store version. A watch window of 50: the changes below force a relist.
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(5)
            .initial_objects(3_000)
            .target_objects(3_000)
            .history_window(50),
    )
    .unwrap();
    let (informer, views) = start(sim.clone(), reflector(), 1);
    let probe = StoreAtFirstNotification {
        store: informer.store(),
        armed: Arc::new(Mutex::new(false)),
        seen: Arc::new(Mutex::new(None)),
    };
    informer
        .add_event_handler(probe.clone(), HandlerOptions::new())
        .unwrap();
    wait_converged(&sim, &informer, &views).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = sim.truth();
    views[0].clear_seen();
    *probe.armed.lock().unwrap() = true;

    // The connection drops; meanwhile 1 500 objects change, 1 000 are deleted, 500 created.
    sim.inject(Fault::Stream {
        after_events: 0,
        action: StreamFault::Reset,
    });
    let keys: Vec<ObjectKey> = before.objects.keys().cloned().collect();
    for k in &keys[..1_500] {
        sim.update(k).unwrap();
    }
    for k in &keys[1_500..2_500] {
        sim.delete(k).unwrap();
    }
    for i in 0..500 {
        sim.create("ns-new", &format!("created-{i}")).unwrap();
    }
    wait_converged(&sim, &informer, &views).await;
    let after = sim.truth();
    assert_eq!(informer.reflector_metrics().unwrap().snapshot().relists, 1);

    // When the first notification of the relist arrived, the store held all of it.
    let at_first = probe.seen.lock().unwrap().clone().expect("a notification");
    assert_eq!(at_first, after.versions(), "the store had the whole relist");
    assert_eq!(
        informer.last_store_sync_resource_version(),
        after.resource_version
    );

    // Handlers heard the 1 000 deletions (tombstones) first, then the listed objects.
    let seen = views[0].seen();
    assert_eq!(seen.len(), 1_000 + 1_500 + 500);
    assert!(
        seen[..1_000].iter().all(|s| matches!(
            s,
            Seen::Delete {
                tombstone: true,
                ..
            }
        )),
        "deletions first"
    );
    assert!(
        seen[1_000..]
            .iter()
            .all(|s| matches!(s, Seen::Add { .. } | Seen::Update { .. })),
        "then adds and updates"
    );
    informer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn live_changes_reach_handlers_in_the_servers_order_across_keys() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(9)
            .initial_objects(20)
            .target_objects(20),
    )
    .unwrap();
    let (informer, views) = start(sim.clone(), reflector(), 2);
    wait_converged(&sim, &informer, &views).await;
    for v in &views {
        v.clear_seen();
    }
    // Two hot keys changed alternately, many times over, faster than one batch is applied.
    let truth = sim.truth();
    let mut keys = truth.objects.keys();
    let (a, b) = (keys.next().unwrap().clone(), keys.next().unwrap().clone());
    for _ in 0..500 {
        sim.update(&a).unwrap();
        sim.update(&b).unwrap();
    }
    wait_converged(&sim, &informer, &views).await;
    for v in &views {
        let rvs: Vec<u64> = v
            .seen()
            .iter()
            .map(|s| match s {
                Seen::Update { new_rv, .. } => new_rv.parse().unwrap(),
                other => panic!("only updates: {other:?}"),
            })
            .collect();
        assert_eq!(rvs.len(), 1_000, "one notification per change");
        assert!(
            rvs.windows(2).all(|w| w[0] < w[1]),
            "in the server's order across keys"
        );
    }
    informer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn churn_with_disconnects_ends_with_exactly_the_servers_objects() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(43)
            .history_window(300),
    )
    .unwrap();
    let (informer, views) = start(sim.clone(), churn_reflector(reflector()), 2);
    wait_frozen("synced", || informer.has_synced()).await;
    let mut rng = fastrand::Rng::with_seed(43);
    let kinds = [
        StreamFault::Reset,
        StreamFault::Expired,
        StreamFault::Close,
        StreamFault::Corrupt,
    ];
    let live = churn(&sim, &mut rng, 6_000, 6, |event, rng| {
        (event % 300 == 0).then(|| Fault::Stream {
            after_events: rng.u64(0..20),
            action: kinds[(event / 300) as usize % kinds.len()],
        })
    })
    .await;
    wait_converged(&sim, &informer, &views).await;
    assert_eq!(
        sim.truth().objects.keys().cloned().collect::<BTreeSet<_>>(),
        live
    );
    assert!(informer.reflector_metrics().unwrap().snapshot().relists >= 5);
    informer.shutdown();
}

#[test]
fn the_queue_itself_keeps_every_change_and_pops_a_relist_whole() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(1)
            .initial_objects(5)
            .target_objects(5),
    )
    .unwrap();
    let objects: Vec<Arc<Object>> = sim.truth().objects.values().cloned().collect();
    let known: Arc<Mutex<std::collections::BTreeMap<ObjectKey, Arc<Object>>>> =
        Arc::new(Mutex::new(Default::default()));
    let fifo = DeltaFifo::builder()
        .kind(FifoKind::RealFifo)
        .known_objects(known.clone())
        .build();
    fifo.replace(objects[..4].to_vec(), "10");
    let first = fifo.try_pop_batch(2).unwrap();
    assert_eq!(first.len(), 4, "the initial list whole, whatever max");
    {
        let mut k = known.lock().unwrap();
        for o in &objects[..4] {
            k.insert(o.key(), o.clone());
        }
    }
    drop(first);
    assert!(fifo.has_synced());

    fifo.update(objects[0].clone());
    fifo.update(objects[1].clone());
    fifo.update(objects[0].clone());
    assert_eq!(fifo.len(), 3, "three changes, none merged");
    let b = fifo.try_pop_batch(10).unwrap();
    let keys: Vec<&ObjectKey> = b.iter().map(|i| &i.key).collect();
    assert_eq!(keys, [&objects[0].key(), &objects[1].key()]);
    drop(b);
    assert_eq!(fifo.try_pop_batch(10).unwrap().len(), 1);

    // A relist without objects[2..4], with objects[4]: tombstones first, then the list.
    fifo.replace(
        vec![objects[0].clone(), objects[1].clone(), objects[4].clone()],
        "20",
    );
    let relist = fifo.try_pop_batch(1).unwrap();
    let kinds: Vec<(DeltaType, bool)> = relist
        .iter()
        .map(|i| {
            let d = i.deltas.oldest().unwrap();
            (d.kind, d.object.is_tombstone())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (DeltaType::Deleted, true),
            (DeltaType::Deleted, true),
            (DeltaType::Replaced, false),
            (DeltaType::Replaced, false),
            (DeltaType::Replaced, false),
        ]
    );
    assert_eq!(relist.list_resource_version(), 20);
    {
        let mut k = known.lock().unwrap();
        k.clear();
        for o in [&objects[0], &objects[1], &objects[4]] {
            k.insert(o.key(), (*o).clone());
        }
    }
    drop(relist);

    // Deleted on the watch, then missing from a relist: one deletion, no tombstone after it.
    fifo.delete(objects[0].clone());
    fifo.replace(vec![objects[1].clone(), objects[4].clone()], "30");
    let watch = fifo.try_pop_batch(10).unwrap();
    assert_eq!(watch.len(), 1);
    assert!(!watch[0].deltas.oldest().unwrap().object.is_tombstone());
    drop(watch);
    let relist = fifo.try_pop_batch(10).unwrap();
    assert!(
        relist
            .iter()
            .all(|i| i.deltas.oldest().unwrap().kind == DeltaType::Replaced),
        "{relist:?}"
    );
    assert_eq!(relist.len(), 2);
}
