//! The informer's filter (`set_filter`, `InformerConfig::filter`) and `refilter` on the
//! simulated API server: rejected objects never reach the store or the handlers, an object
//! that stops being accepted leaves with a Delete, and after the filter's answer changes a
//! refilter deletes at once and relists at once (no backoff, no timer: the waits below let no
//! tokio time pass), for list + watch and streaming lists, on both queue kinds.

mod common;
mod support;
mod views;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use informer::fifo::FifoKind;
use informer::object::{Object, ObjectKey};
use informer::reflector::{
    ApiError, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions, WatchResponse,
};
use informer::sim::{SimConfig, SimServer, SimWatch};
use informer::{AlreadyStarted, Informer, InformerConfig};

use common::{churn, churn_reflector, start_informer_with, wait_frozen, wait_until};
use support::{flood_config, templates};
use views::{Recorder, Seen, ViewMap, store_view, version};

/// The three ways an informer may run: list + watch or a streaming list, per-key or in-order
/// queue.
const MODES: [(bool, FifoKind); 3] = [
    (false, FifoKind::DeltaFifo),
    (true, FifoKind::DeltaFifo),
    (false, FifoKind::RealFifo),
];

fn config(watch_list: bool, fifo: FifoKind) -> InformerConfig {
    InformerConfig {
        reflector: ReflectorConfig::default()
            .seed(Some(23))
            .use_watch_list(watch_list),
        fifo,
        ..Default::default()
    }
}

/// FNV-1a of the key: a stable shard for every object.
fn shard(key: &ObjectKey) -> u64 {
    let h = key
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    h % 4
}

/// Whether `mask` (one bit per shard) accepts `o`.
fn in_shards(mask: u64, o: &Object) -> bool {
    mask & (1 << shard(&o.key())) != 0
}

fn out_labelled(o: &Object) -> bool {
    o.meta().labels().get("filter") == Some("out")
}

/// The server's objects `accept` keeps, and the server's resourceVersion.
fn expected(sim: &SimServer, accept: &dyn Fn(&Object) -> bool) -> (u64, ViewMap) {
    let truth = sim.truth();
    let view = truth
        .objects
        .iter()
        .filter(|(_, o)| accept(o))
        .map(|(k, o)| (k.clone(), version(o)))
        .collect();
    (truth.resource_version, view)
}

/// `true` when the store and every handler's view hold exactly the server's objects that
/// `accept` keeps (and the store caught up with the server's version).
///
/// # Panics
/// When a handler saw an add of a key it had, an update or delete of one it did not have.
fn converged_to(
    sim: &SimServer,
    informer: &Informer<impl ListerWatcher>,
    views: &[Recorder],
    accept: &dyn Fn(&Object) -> bool,
) -> bool {
    let (rv, want) = expected(sim, accept);
    if informer.store().resource_version() < rv || store_view(informer) != want {
        return false;
    }
    informer.flush();
    for (i, v) in views.iter().enumerate() {
        v.assert_exact(&format!("handler {i}"));
    }
    views.iter().all(|v| v.objects() == want)
}

/// The simulator, with lists (and streaming lists) held while `hold` is set, counting those
/// answered.
#[derive(Clone)]
struct Gated {
    sim: SimServer,
    hold: Arc<tokio::sync::watch::Sender<bool>>,
    /// List requests and streaming-list watches that reached the server.
    lists: Arc<AtomicUsize>,
}

impl Gated {
    fn new(sim: &SimServer, hold: bool) -> Self {
        Gated {
            sim: sim.clone(),
            hold: Arc::new(tokio::sync::watch::channel(hold).0),
            lists: Arc::default(),
        }
    }

    fn hold(&self, on: bool) {
        self.hold.send_replace(on);
    }

    async fn pass(&self) {
        let mut rx = self.hold.subscribe();
        let _ = rx.wait_for(|held| !*held).await;
        self.lists.fetch_add(1, Ordering::SeqCst);
    }
}

impl ListerWatcher for Gated {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.pass().await;
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        if opts.send_initial_events {
            self.pass().await;
        }
        self.sim.watch(opts).await
    }
}

/// `seen` sorted (for comparing sets of notifications).
fn sorted(mut seen: Vec<Seen>) -> Vec<Seen> {
    seen.sort();
    seen
}

#[tokio::test(start_paused = true)]
async fn rejected_objects_stay_out_and_an_object_that_stops_matching_is_deleted() {
    for (watch_list, fifo) in MODES {
        let mode = format!("watch_list={watch_list} {fifo:?}");
        let sim = SimServer::new(
            SimConfig::new(templates("etcd"))
                .seed(5)
                .initial_objects(30),
        )
        .unwrap();
        let keys: Vec<ObjectKey> = sim.truth().objects.keys().cloned().collect();
        for k in keys.iter().step_by(3) {
            sim.update_with(k, |m| {
                m.labels.insert("filter".into(), "out".into());
            })
            .unwrap();
        }
        let accept = |o: &Object| !out_labelled(o);
        // The filter through the config (the other tests use `set_filter`).
        let cfg = InformerConfig {
            filter: Some(Arc::new(accept)),
            ..config(watch_list, fifo)
        };
        let (informer, views) = start_informer_with(sim.clone(), cfg, 2);
        wait_frozen("initial sync", || {
            converged_to(&sim, &informer, &views, &accept)
        })
        .await;
        assert_eq!(informer.store().len(), 20, "{mode}");
        assert!(informer.store().list().iter().all(|o| !out_labelled(o)));
        assert_eq!(views[0].0.lock().unwrap().adds, 20, "{mode}");
        for v in &views {
            v.clear_seen();
        }

        let (leaving, joining, still_out, deleted_out, updated) =
            (&keys[1], &keys[3], &keys[6], &keys[9], &keys[2]);
        let old = sim.get(updated).unwrap();
        sim.update_with(leaving, |m| {
            m.labels.insert("filter".into(), "out".into());
        })
        .unwrap();
        let joined = sim
            .update_with(joining, |m| {
                m.labels.remove("filter");
            })
            .unwrap();
        sim.update(still_out).unwrap();
        sim.delete(deleted_out).unwrap();
        let new = sim.update(updated).unwrap();
        let created = sim.create("default", "created").unwrap();
        wait_frozen("watch changes", || {
            converged_to(&sim, &informer, &views, &accept)
        })
        .await;
        let want = sorted(vec![
            // Carrying the rejected state, as a server-side selector's DELETED would.
            Seen::Delete {
                key: leaving.clone(),
                tombstone: false,
            },
            Seen::Add {
                key: joining.clone(),
                rv: joined.resource_version().to_owned(),
                initial: false,
            },
            Seen::Update {
                key: updated.clone(),
                old_rv: old.resource_version().to_owned(),
                new_rv: new.resource_version().to_owned(),
            },
            Seen::Add {
                key: created.key(),
                rv: created.resource_version().to_owned(),
                initial: false,
            },
        ]);
        for (i, v) in views.iter().enumerate() {
            assert_eq!(sorted(v.seen()), want, "{mode}: handler {i}");
        }
        assert_eq!(informer.set_filter(|_| true), Err(AlreadyStarted), "{mode}");
        informer.shutdown();
    }
}

#[tokio::test(start_paused = true)]
async fn refilter_deletes_at_once_then_relists_at_once_and_kept_objects_stay_quiet() {
    for (watch_list, fifo) in MODES {
        let mode = format!("watch_list={watch_list} {fifo:?}");
        let sim = SimServer::new(flood_config("etcd", 80, 13)).unwrap();
        let gated = Gated::new(&sim, false);
        let mask = Arc::new(AtomicU64::new(0b0011));
        let informer = Informer::new(gated.clone(), config(watch_list, fifo));
        let m = mask.clone();
        informer
            .set_filter(move |o| in_shards(m.load(Ordering::Acquire), o))
            .unwrap();
        informer.refilter(); // before start: nothing to do
        let views: Vec<Recorder> = (0..2).map(|_| Recorder::default()).collect();
        for v in &views {
            informer
                .add_event_handler(v.clone(), informer::HandlerOptions::new())
                .unwrap();
        }
        informer.start(&tokio::runtime::Handle::current());
        let accept_old = |o: &Object| in_shards(0b0011, o);
        let accept_new = |o: &Object| in_shards(0b0110, o);
        wait_frozen("initial sync", || {
            converged_to(&sim, &informer, &views, &accept_old)
        })
        .await;
        let before = sim.truth();
        let shard_of = |s: u64| -> Vec<ObjectKey> {
            before
                .objects
                .keys()
                .filter(|k| shard(k) == s)
                .cloned()
                .collect()
        };
        assert!(
            !shard_of(0).is_empty() && !shard_of(1).is_empty() && !shard_of(2).is_empty(),
            "every shard has objects"
        );
        for v in &views {
            v.clear_seen();
        }
        let metrics = informer.reflector_metrics().unwrap();
        let requested = metrics.snapshot().requested_relists;

        // The assignment moves from shards {0, 1} to {1, 2}; the server holds any relist.
        gated.hold(true);
        let lists = gated.lists.load(Ordering::SeqCst);
        mask.store(0b0110, Ordering::Release);
        informer.refilter();
        let kept = |o: &Object| accept_old(o) && accept_new(o);
        wait_frozen("deletions before any relist answer", || {
            converged_to(&sim, &informer, &views, &kept)
        })
        .await;
        assert_eq!(
            gated.lists.load(Ordering::SeqCst),
            lists,
            "{mode}: no relist yet"
        );
        let deletes: Vec<Seen> = shard_of(0)
            .into_iter()
            .map(|key| Seen::Delete {
                key,
                tombstone: false,
            })
            .collect();
        for (i, v) in views.iter().enumerate() {
            assert_eq!(
                sorted(v.seen()),
                sorted(deletes.clone()),
                "{mode}: handler {i}"
            );
            v.clear_seen();
        }

        // The relist was requested at once: released, it brings shard 2 in.
        gated.hold(false);
        wait_frozen("the relist", || {
            converged_to(&sim, &informer, &views, &accept_new)
        })
        .await;
        let adds: Vec<Seen> = shard_of(2)
            .into_iter()
            .map(|key| Seen::Add {
                rv: before.objects[&key].resource_version().to_owned(),
                key,
                initial: false,
            })
            .collect();
        for (i, v) in views.iter().enumerate() {
            // Shard 1 was kept: no add, no update (these handlers have no resync).
            assert_eq!(
                sorted(v.seen()),
                sorted(adds.clone()),
                "{mode}: handler {i}"
            );
        }
        let after = metrics.snapshot();
        assert_eq!(after.requested_relists, requested + 1, "{mode}");
        assert!(gated.lists.load(Ordering::SeqCst) > lists, "{mode}");
        assert_eq!(after.backoffs, 0, "{mode}: no backoff");

        // Live changes go on being filtered with the new answer.
        let live = sim.step(40).unwrap();
        wait_frozen("live changes", || {
            informer.store().resource_version() >= live
                && converged_to(&sim, &informer, &views, &accept_new)
        })
        .await;
        informer.shutdown();
    }
}

#[tokio::test(start_paused = true)]
async fn a_refilter_during_the_initial_list_relists_before_watching() {
    for (watch_list, fifo) in MODES {
        let mode = format!("watch_list={watch_list} {fifo:?}");
        let sim = SimServer::new(flood_config("etcd", 60, 17)).unwrap();
        let gated = Gated::new(&sim, true);
        let mask = Arc::new(AtomicU64::new(0b0101));
        let m = mask.clone();
        let informer = Informer::new(gated.clone(), config(watch_list, fifo));
        informer
            .set_filter(move |o| in_shards(m.load(Ordering::Acquire), o))
            .unwrap();
        let views = vec![Recorder::default()];
        informer
            .add_event_handler(views[0].clone(), informer::HandlerOptions::new())
            .unwrap();
        informer.start(&tokio::runtime::Handle::current());
        // The first list is under way (held at the server): the answer changes.
        wait_frozen("the first list asked", || gated.hold.receiver_count() > 0).await;
        mask.store(0b1010, Ordering::Release);
        informer.refilter();
        gated.hold(false);
        let accept = |o: &Object| in_shards(0b1010, o);
        wait_frozen("convergence", || {
            converged_to(&sim, &informer, &views, &accept)
        })
        .await;
        let stats = informer.reflector_metrics().unwrap().snapshot();
        assert_eq!(stats.requested_relists, 1, "{mode}");
        assert_eq!(
            stats.lists, 2,
            "{mode}: the first list, then the requested one"
        );
        informer.shutdown();
    }
}

#[tokio::test(start_paused = true)]
async fn repeated_flips_during_churn_converge_with_nothing_lost_or_doubled() {
    for (watch_list, fifo) in MODES {
        let mode = format!("watch_list={watch_list} {fifo:?}");
        let sim = SimServer::new(SimConfig::new(templates("etcd")).seed(41)).unwrap();
        let mask = Arc::new(AtomicU64::new(0b1111));
        let m = mask.clone();
        let informer = Informer::new(
            sim.clone(),
            InformerConfig {
                reflector: churn_reflector(config(watch_list, fifo).reflector),
                ..config(watch_list, fifo)
            },
        );
        informer
            .set_filter(move |o| in_shards(m.load(Ordering::Acquire), o))
            .unwrap();
        let views: Vec<Recorder> = (0..2).map(|_| Recorder::default()).collect();
        for v in &views {
            informer
                .add_event_handler(v.clone(), informer::HandlerOptions::new())
                .unwrap();
        }
        informer.start(&tokio::runtime::Handle::current());
        let mut rng = fastrand::Rng::with_seed(3);
        let mut flips = 0;
        churn(&sim, &mut rng, 600, 3, |event, rng| {
            if event % 23 == 0 {
                mask.store(rng.u64(0..16), Ordering::Release);
                informer.refilter();
                flips += 1;
            }
            None
        })
        .await;
        let last = mask.load(Ordering::Acquire);
        let accept = move |o: &Object| in_shards(last, o);
        wait_until("convergence", || {
            converged_to(&sim, &informer, &views, &accept)
        })
        .await;
        assert!(flips >= 20, "{mode}");
        assert!(
            informer
                .reflector_metrics()
                .unwrap()
                .snapshot()
                .requested_relists
                >= 1,
            "{mode}"
        );
        informer.shutdown();
    }
}

/// A flood on another thread while the answer flips and refilters run: the reflector's
/// judging and the refilter's deletions race for real; every handler still ends with exactly
/// what the filter accepts, having never seen an add of a key it had or a delete of one it
/// did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refilters_racing_a_flood_converge() {
    // Each mode four times (a race: more rounds, more interleavings).
    for (round, (watch_list, fifo)) in MODES.into_iter().cycle().take(12).enumerate() {
        let round = round as u64;
        let sim = SimServer::new(flood_config("etcd", 200, 29 + round)).unwrap();
        let mask = Arc::new(AtomicU64::new(0b0011));
        let m = mask.clone();
        let informer = Arc::new(Informer::new(sim.clone(), config(watch_list, fifo)));
        informer
            .set_filter(move |o| in_shards(m.load(Ordering::Acquire), o))
            .unwrap();
        let views: Vec<Recorder> = (0..2).map(|_| Recorder::default()).collect();
        for v in &views {
            informer
                .add_event_handler(v.clone(), informer::HandlerOptions::new())
                .unwrap();
        }
        informer.start(&tokio::runtime::Handle::current());
        // Small steps, so that the watch carries changes between the flips; a flip every 100
        // changes, its refilter on a blocking thread (as a controller's election callback
        // might call it) while the reflector's task runs on a worker.
        let flood = tokio::spawn({
            let (sim, mask, informer) = (sim.clone(), mask.clone(), informer.clone());
            let mut rng = fastrand::Rng::with_seed(round + 7);
            async move {
                for step in 1..=1_000 {
                    sim.step(5).unwrap();
                    if step % 20 == 0 {
                        mask.store(rng.u64(0..16), Ordering::Release);
                        let i = informer.clone();
                        tokio::task::spawn_blocking(move || i.refilter())
                            .await
                            .unwrap();
                    }
                    tokio::task::yield_now().await;
                }
            }
        });
        flood.await.unwrap();
        let last = mask.load(Ordering::Acquire);
        let accept = move |o: &Object| in_shards(last, o);
        wait_until("convergence", || {
            converged_to(&sim, &informer, &views, &accept)
        })
        .await;
        let stats = informer.reflector_metrics().unwrap().snapshot();
        let mode = format!("round {round}: watch_list={watch_list} {fifo:?}");
        assert!(stats.requested_relists >= 1, "{mode}: {stats:?}");
        informer.shutdown();
    }
}
