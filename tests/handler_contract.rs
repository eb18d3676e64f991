//! The informer's handler contract under adversarial use, as a controller author coming from
//! client-go would try it: handlers registered and removed (and streams dropped) during a
//! flood, `Block` handlers that register, remove and read the store from their own thread,
//! panicking handlers, shutdown with a stream nobody polls, sync timeouts, per-handler resync
//! periods (due handlers only, 1 s minimum, 0 = never), and a factory shut down while it starts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use crossbeam::channel::bounded;
use informer::distributor::{HandlerFns, OverflowPolicy};
use informer::reflector::ListerWatcher;
use informer::sim::SimServer;
use informer::{HandlerOptions, Informer, InformerConfig, Registration};

/// Runs `f` on its own thread; fails the test if it has not returned within `secs` (a
/// deadlock: the stuck thread is left behind, the test reports instead of hanging).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("deadlock: {what} did not finish in {secs} s"))
}

mod common;
mod support;
mod views;

use common::wait_frozen;
use support::flood_config;
use views::{Recorder, store_view};

/// An informer (batch size 8) over `sim`, started and synced, while a task floods `sim` with
/// `changes` changes (its result: the last resourceVersion).
async fn flooding(
    sim: &SimServer,
    changes: u64,
) -> (Arc<Informer<SimServer>>, tokio::task::JoinHandle<u64>) {
    let informer = Arc::new(Informer::new(
        sim.clone(),
        InformerConfig {
            batch_size: 8,
            ..InformerConfig::default()
        },
    ));
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let s = sim.clone();
    let flood = tokio::spawn(async move { s.flood(changes).await.unwrap() });
    (informer, flood)
}

/// Handlers of every policy registered (and some removed) while a flood is applied in small
/// batches: each gets the cache as initial adds, then live events, none missed or doubled (its
/// view rebuilt from notifications equals the store); removed ones stay consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handlers_and_removals_during_a_flood() {
    let sim = SimServer::new(flood_config("etcd", 500, 5)).unwrap();
    let (informer, flood) = flooding(&sim, 60_000).await;
    let policies = [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 1 },
        OverflowPolicy::CoalesceByKey,
    ];
    let mut kept: Vec<(Registration, Recorder)> = Vec::new();
    let mut removed: Vec<Recorder> = Vec::new();
    let mut i = 0;
    while !flood.is_finished() {
        let v = Recorder::default();
        let reg = informer
            .add_event_handler(v.clone(), HandlerOptions::new().policy(policies[i % 3]))
            .unwrap();
        if i % 4 == 3 {
            let inf = informer.clone();
            let r = reg.clone();
            tokio::task::spawn_blocking(move || inf.remove_event_handler(&r))
                .await
                .unwrap();
            removed.push(v);
        } else {
            kept.push((reg, v));
        }
        i += 1;
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        if kept.len() > 40 {
            break;
        }
    }
    let rv = flood.await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || inf.flush())
        .await
        .unwrap();
    let store = store_view(&informer);
    assert!(
        kept.len() >= 10 && !removed.is_empty(),
        "too few registrations during the flood"
    );
    for (n, (reg, v)) in kept.iter().enumerate() {
        assert!(reg.has_synced());
        let v = v.0.lock().unwrap();
        assert!(
            v.violations.is_empty(),
            "view {n}: {:?}",
            &v.violations[..v.violations.len().min(5)]
        );
        assert_eq!(v.objects, store, "view {n}");
    }
    for v in &removed {
        let v = v.0.lock().unwrap();
        assert!(
            v.violations.is_empty(),
            "removed: {:?}",
            &v.violations[..v.violations.len().min(5)]
        );
    }
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || inf.shutdown())
        .await
        .unwrap();
}

/// Regression: shutting down with a full `Block` stream that nobody polls (here: the replay of
/// a late registration fills its one slot) waited for room forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_shutdown_with_an_unpolled_late_block_stream() {
    let sim = SimServer::new(flood_config("etcd", 50, 5)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), InformerConfig::default()));
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let (_reg, _stream) = informer
        .add_stream(HandlerOptions::new().policy(OverflowPolicy::Block { capacity: 1 }))
        .unwrap();
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || within(5, "informer shutdown", move || inf.shutdown()))
        .await
        .unwrap();
}

/// Counts notifications by kind; on every add, reads the store and registers (then removes) a
/// child handler when asked: work a controller might do from a handler.
/// A `Block { capacity: 1 }` handler that reads the store and registers and removes other
/// handlers from its own thread during a flood: the publisher releases its locks before
/// waiting for room, so nothing deadlocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_handlers_that_register_remove_and_read_the_store_from_inside() {
    let sim = SimServer::new(flood_config("etcd", 200, 5)).unwrap();
    let informer: Arc<OnceLock<Arc<Informer<SimServer>>>> = Arc::new(OnceLock::new());
    let inf = Arc::new(Informer::new(
        sim.clone(),
        InformerConfig {
            batch_size: 4,
            ..InformerConfig::default()
        },
    ));
    let _ = informer.set(inf.clone());
    let children = Arc::new(AtomicUsize::new(0));
    let slot = informer.clone();
    let c = children.clone();
    let mut n = 0u64;
    let reg = inf
        .add_event_handler(
            HandlerFns::new().with_update(move |_, new| {
                n += 1;
                let inf = slot.get().unwrap();
                // Reads the store: lock-free, never blocks on the publisher.
                let _ = inf.store().get(new.key().as_str());
                let _ = inf.has_synced();
                if n.is_multiple_of(50) {
                    let r = inf
                        .add_event_handler(Recorder::default(), informer::HandlerOptions::new())
                        .unwrap();
                    c.fetch_add(1, Ordering::SeqCst);
                    inf.remove_event_handler(&r);
                }
            }),
            HandlerOptions::new().policy(OverflowPolicy::Block { capacity: 1 }),
        )
        .unwrap();
    inf.start(&tokio::runtime::Handle::current());
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let rv = tokio::time::timeout(Duration::from_secs(30), sim.flood(5_000))
        .await
        .expect("the flood stalled: deadlock between the publisher and a handler")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), inf.store().wait_for(rv))
        .await
        .expect("store stalled")
        .unwrap();
    let i = inf.clone();
    tokio::task::spawn_blocking(move || within(30, "flush", move || i.flush()))
        .await
        .unwrap();
    assert!(reg.has_synced());
    assert!(children.load(Ordering::SeqCst) > 0);
    let i = inf.clone();
    tokio::task::spawn_blocking(move || within(30, "shutdown", move || i.shutdown()))
        .await
        .unwrap();
}

/// Handlers that panic on every third add, under each policy: every add is still delivered,
/// panics are counted, and the registration syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_handlers_sync_and_go_on() {
    let sim = SimServer::new(flood_config("etcd", 100, 5)).unwrap();
    let inf = Informer::new(sim.clone(), InformerConfig::default());
    let mut regs = Vec::new();
    let mut counts = Vec::new();
    for p in [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 1 },
        OverflowPolicy::CoalesceByKey,
    ] {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let reg = inf
            .add_event_handler(
                HandlerFns::new().with_add(move |_, _| {
                    if c.fetch_add(1, Ordering::SeqCst).is_multiple_of(3) {
                        panic!("boom");
                    }
                }),
                HandlerOptions::new().policy(p),
            )
            .unwrap();
        regs.push(reg);
        counts.push(count);
    }
    inf.start(&tokio::runtime::Handle::current());
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    for (reg, count) in regs.iter().zip(&counts) {
        assert!(reg.wait_for_sync(Duration::from_secs(30)).await);
        assert_eq!(count.load(Ordering::SeqCst), 100);
        assert_eq!(reg.listener().stats().panics, 34);
    }
    inf.shutdown();
}

struct Never;

impl ListerWatcher for Never {
    type Body = informer::sim::SimWatch;
    async fn list(
        &self,
        _: &informer::reflector::ListOptions,
    ) -> Result<Bytes, informer::reflector::ApiError> {
        std::future::pending().await
    }
    async fn watch(
        &self,
        _: &informer::reflector::WatchOptions,
    ) -> Result<informer::reflector::WatchResponse<Self::Body>, informer::reflector::ApiError> {
        std::future::pending().await
    }
}

struct Refused;

impl ListerWatcher for Refused {
    type Body = informer::sim::SimWatch;
    async fn list(
        &self,
        _: &informer::reflector::ListOptions,
    ) -> Result<Bytes, informer::reflector::ApiError> {
        Err(informer::reflector::ApiError::connection_refused("refused"))
    }
    async fn watch(
        &self,
        _: &informer::reflector::WatchOptions,
    ) -> Result<informer::reflector::WatchResponse<Self::Body>, informer::reflector::ApiError> {
        Err(informer::reflector::ApiError::connection_refused("refused"))
    }
}

/// A server that never answers (and one that refuses): sync waits time out after exactly their
/// timeout on tokio's clock (paused), the blocking ones on the std clock; after shutdown they
/// return at once.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn wait_for_cache_sync_times_out_on_tokio_time() {
    let inf = Informer::new(Never, InformerConfig::default());
    let reg = inf
        .add_event_handler(Recorder::default(), informer::HandlerOptions::new())
        .unwrap();
    inf.start(&tokio::runtime::Handle::current());
    let t0 = tokio::time::Instant::now();
    assert!(
        inf.wait_for_cache_sync(Duration::from_secs(5))
            .await
            .is_err()
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(5));
    assert!(!reg.wait_for_sync(Duration::from_secs(3)).await);
    assert_eq!(t0.elapsed(), Duration::from_secs(8));
    assert!(inf.wait_for_cache_sync(Duration::ZERO).await.is_err());

    let inf2 = Informer::new(Refused, InformerConfig::default());
    inf2.start(&tokio::runtime::Handle::current());
    let t1 = tokio::time::Instant::now();
    assert!(
        inf2.wait_for_cache_sync(Duration::from_secs(60))
            .await
            .is_err()
    );
    assert_eq!(t1.elapsed(), Duration::from_secs(60));
    let m = inf2.reflector_metrics().unwrap();
    // Backoff 0.8, 1.6, 3.2, 6.4, 12.8, 25.6 s: six failed lists in the first minute.
    assert!(!m.listed.load(Ordering::Relaxed));
    assert!(m.errors.load(Ordering::Relaxed) >= 5, "{m:?}");
    // The blocking waits use the std clock.
    let t = std::time::Instant::now();
    assert!(
        inf.wait_for_cache_sync_blocking(Duration::from_millis(50))
            .is_err()
    );
    assert!(!reg.wait_for_sync_blocking(Duration::from_millis(50)));
    assert!(t.elapsed() >= Duration::from_millis(100));
    inf.shutdown();
    assert!(
        inf.wait_for_cache_sync(Duration::from_secs(5))
            .await
            .is_err()
    );
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(68),
        "after shutdown it returns at once"
    );
    inf2.shutdown();
}

/// Resync periods 2 s, 3 s, 0 (never), 100 ms (raised to 1 s) and the informer's default (5 s):
/// after each second every handler has had exactly the sync updates of its own due times
/// (client-go `shouldResync` / `determineNextResync`).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn resync_periods_go_to_due_handlers_only_minimum_one_second_zero_never() {
    const N: usize = 20;
    let sim = SimServer::new(flood_config("etcd", N, 5).bookmark_interval(None)).unwrap();
    let inf = Informer::new(
        sim.clone(),
        InformerConfig {
            default_resync: Duration::from_secs(5),
            ..InformerConfig::default()
        },
    );
    let views: Vec<Recorder> = (0..5).map(|_| Recorder::default()).collect();
    let periods = [
        Some(Duration::from_secs(2)),
        Some(Duration::from_secs(3)),
        Some(Duration::ZERO),
        Some(Duration::from_millis(100)), // raised to 1 s
        None,                             // the informer's default: 5 s
    ];
    let mut regs = Vec::new();
    for (v, p) in views.iter().zip(periods) {
        let mut o = HandlerOptions::new();
        if let Some(p) = p {
            o = o.resync(p);
        }
        regs.push(inf.add_event_handler(v.clone(), o).unwrap());
    }
    inf.start(&tokio::runtime::Handle::current());
    wait_frozen("all synced", || regs.iter().all(Registration::has_synced)).await;
    let t0 = tokio::time::Instant::now();
    // Expected syncs per handler after each whole second t = 1..=6.
    let expect = |t: usize| -> [usize; 5] { [t / 2 * N, t / 3 * N, 0, t * N, t / 5 * N] };
    for t in 1..=6usize {
        tokio::time::sleep_until(t0 + Duration::from_secs(t as u64) + Duration::from_millis(1))
            .await;
        let want = expect(t);
        wait_frozen("the syncs of handler 3", || {
            views[3].0.lock().unwrap().syncs == want[3]
        })
        .await;
        // Let the others catch up too.
        wait_frozen("the syncs of every handler", || {
            views
                .iter()
                .zip(want)
                .all(|(v, w)| v.0.lock().unwrap().syncs >= w)
        })
        .await;
        let got: Vec<usize> = views.iter().map(|v| v.0.lock().unwrap().syncs).collect();
        assert_eq!(got, want, "t = {t} s");
    }
    for v in &views {
        assert!(v.0.lock().unwrap().violations.is_empty());
    }
    inf.shutdown();
}

/// Regression: the processing thread waiting for room at an unpolled `Block` stream held
/// `shutdown` forever; and an informer that had not synced must not report synced after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_shutdown_while_the_publisher_waits_for_an_unpolled_block_stream() {
    let sim = SimServer::new(flood_config("etcd", 300, 5)).unwrap();
    let informer = Arc::new(Informer::new(
        sim.clone(),
        InformerConfig {
            batch_size: 10,
            ..InformerConfig::default()
        },
    ));
    let (reg, stream) = informer
        .add_stream(HandlerOptions::new().policy(OverflowPolicy::Block { capacity: 1 }))
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    // The processing thread fills the stream's one slot, then waits for it.
    assert!(
        informer
            .wait_for_cache_sync(Duration::from_millis(300))
            .await
            .is_err()
    );
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || within(5, "informer shutdown", move || inf.shutdown()))
        .await
        .unwrap();
    assert!(!reg.has_synced());
    drop(stream);
}

/// Async streams of every policy registered during a flood, some dropped after a few items:
/// readers end equal to the store, dropped ones neither stall the informer nor show lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_registered_and_dropped_during_a_flood() {
    let sim = SimServer::new(flood_config("etcd", 300, 5)).unwrap();
    let (informer, flood) = flooding(&sim, 40_000).await;
    let policies = [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 2 },
        OverflowPolicy::CoalesceByKey,
    ];
    let mut readers = Vec::new();
    let mut dropped_regs = Vec::new();
    for i in 0..30 {
        let (reg, mut stream) = informer
            .add_stream(HandlerOptions::new().policy(policies[i % 3]))
            .unwrap();
        if i % 3 == 1 && i % 2 == 0 {
            // Read a little, then drop the stream without removing the registration.
            for _ in 0..10 {
                let _ = stream.next().await;
            }
            drop(stream);
            dropped_regs.push(reg);
        } else {
            let v = Recorder::default();
            let vv = v.clone();
            let task = tokio::spawn(async move {
                while let Some(n) = stream.next().await {
                    vv.0.lock().unwrap().apply(&n);
                }
            });
            readers.push((reg, v, task));
        }
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }
    let rv = tokio::time::timeout(Duration::from_secs(60), flood)
        .await
        .expect("flood stalled")
        .unwrap();
    informer.store().wait_for(rv).await.unwrap();
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || within(30, "flush", move || inf.flush()))
        .await
        .unwrap();
    let store = store_view(&informer);
    for (n, (reg, v, _)) in readers.iter().enumerate() {
        assert!(reg.has_synced(), "reader {n}");
        let v = v.0.lock().unwrap();
        assert!(
            v.violations.is_empty(),
            "reader {n}: {:?}",
            &v.violations[..v.violations.len().min(3)]
        );
        assert_eq!(v.objects, store, "reader {n}");
    }
    for r in &dropped_regs {
        let st = r.listener().stats();
        assert_eq!(
            (st.delivered, st.pending),
            (10, 0),
            "dropped stream: {st:?}"
        );
    }
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || within(30, "shutdown", move || inf.shutdown()))
        .await
        .unwrap();
    for (_, _, t) in readers {
        tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .expect("stream did not end after shutdown")
            .unwrap();
    }
}

/// `start` and `shutdown` of a factory racing: every informer ends shut down (refuses
/// handlers, releases sync waiters), nothing hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_start_and_shutdown_race() {
    use informer::factory::{GroupVersionResource, SharedInformerFactory};
    for round in 0..20 {
        let sim = SimServer::new(flood_config("etcd", 50, 5)).unwrap();
        let factory = Arc::new(SharedInformerFactory::new(
            move |_gvr: &GroupVersionResource, _ns: Option<&str>| sim.clone(),
        ));
        let infs: Vec<_> = (0..4)
            .map(|i| factory.informer_for(&GroupVersionResource::new("", "v1", &format!("r{i}"))))
            .collect();
        let f1 = factory.clone();
        let h = tokio::runtime::Handle::current();
        let starter = std::thread::spawn(move || f1.start(&h));
        if round % 2 == 0 {
            tokio::task::yield_now().await;
        }
        let f2 = factory.clone();
        tokio::task::spawn_blocking(move || within(10, "factory shutdown", move || f2.shutdown()))
            .await
            .unwrap();
        starter.join().unwrap();
        for i in &infs {
            assert!(
                i.add_event_handler(Recorder::default(), informer::HandlerOptions::new())
                    .is_err(),
                "round {round}: informer still accepts handlers after shutdown"
            );
            // Shutdown releases sync waiters at once, with an error that says so.
            let waited = tokio::time::timeout(
                Duration::from_secs(5),
                i.wait_for_cache_sync(Duration::from_secs(3600)),
            )
            .await
            .expect("a sync waiter was not released by shutdown");
            if let Err(e) = waited {
                assert!(e.stopped(), "{e}");
                assert_eq!(e.not_synced(), [i.name()]);
            }
        }
    }
}

/// Regression: `start` after `shutdown` started a reflector that, against an unreachable
/// server, retried its list forever on the caller's runtime (and nothing would stop it).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn start_after_shutdown_starts_nothing() {
    let inf = Informer::new(Refused, InformerConfig::default());
    inf.shutdown();
    inf.start(&tokio::runtime::Handle::current());
    assert!(!inf.is_started());
    assert!(inf.reflector_metrics().is_none(), "a reflector was started");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        inf.wait_for_cache_sync(Duration::from_secs(1))
            .await
            .is_err()
    );
}

/// A full `Block` handler that shuts its own informer down (e.g. on a fatal condition) while
/// the processing thread waits for room at it: the wait gives up, the shutdown completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_handler_can_shut_its_informer_down() {
    let sim = SimServer::new(flood_config("etcd", 300, 5)).unwrap();
    let slot: Arc<OnceLock<Arc<Informer<SimServer>>>> = Arc::new(OnceLock::new());
    let inf = Arc::new(Informer::new(
        sim.clone(),
        InformerConfig {
            batch_size: 10,
            ..InformerConfig::default()
        },
    ));
    let _ = slot.set(inf.clone());
    let (done_tx, done_rx) = bounded::<()>(1);
    let s = slot.clone();
    let mut first = true;
    inf.add_event_handler(
        HandlerFns::new().with_add(move |_, _| {
            if std::mem::take(&mut first) {
                let inf = s.get().unwrap();
                // Batch 1 is being handled, batch 2 fills the channel, batch 3 is applied and
                // waits for room.
                while inf.metrics().batches.load(Ordering::SeqCst) < 3 {
                    std::thread::yield_now();
                }
                inf.shutdown();
                let _ = done_tx.send(());
            }
        }),
        HandlerOptions::new().policy(OverflowPolicy::Block { capacity: 1 }),
    )
    .unwrap();
    inf.start(&tokio::runtime::Handle::current());
    tokio::task::spawn_blocking(move || {
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("deadlock: the handler's shutdown did not return")
    })
    .await
    .unwrap();
    assert!(!inf.has_synced());
    assert!(
        inf.add_event_handler(Recorder::default(), informer::HandlerOptions::new())
            .is_err()
    );
}

/// Removing a handler waits until it has handled everything published to it before the
/// removal, and nothing after (client-go v0.37 `ShutDownEventHandler`; its older
/// `RemoveEventHandler` returns at once while queued calls still run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_handler_waits_until_it_has_drained() {
    let sim = SimServer::new(flood_config("etcd", 100, 3)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), InformerConfig::default()));
    let handled = Arc::new(AtomicUsize::new(0));
    let slow = |n: &AtomicUsize| {
        std::thread::sleep(Duration::from_micros(200));
        n.fetch_add(1, Ordering::SeqCst);
    };
    let (a, u, d) = (handled.clone(), handled.clone(), handled.clone());
    let reg = informer
        .add_event_handler(
            HandlerFns::new()
                .with_add(move |_, _| slow(&a))
                .with_update(move |_, _| slow(&u))
                .with_delete(move |_| slow(&d)),
            HandlerOptions::new().name("slow"),
        )
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let rv = sim.flood(2_000).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    let published = reg.listener().stats().published;
    assert!(
        handled.load(Ordering::SeqCst) < published as usize,
        "the slow handler is still behind when it is removed"
    );
    let (inf, r) = (informer.clone(), reg.clone());
    within(60, "remove_event_handler", move || {
        inf.remove_event_handler(&r)
    });
    let at_return = handled.load(Ordering::SeqCst);
    let stats = reg.listener().stats();
    assert_eq!(stats.pending, 0, "{stats:?}");
    assert_eq!(
        stats.delivered, stats.published,
        "everything published was handled before the removal returned"
    );
    assert!(at_return as u64 >= published, "{at_return} of {published}");
    let rv = sim.flood(500).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || inf.flush())
        .await
        .unwrap();
    assert_eq!(
        handled.load(Ordering::SeqCst),
        at_return,
        "nothing after removal"
    );
    let inf = informer.clone();
    tokio::task::spawn_blocking(move || inf.shutdown())
        .await
        .unwrap();
}

/// `shutdown_async` waits for handlers to finish their queues without blocking the runtime:
/// on a current-thread runtime another task keeps running meanwhile.
#[test]
fn shutdown_async_does_not_block_a_current_thread_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sim = SimServer::new(flood_config("etcd", 40, 5)).unwrap();
        let informer = Informer::new(sim.clone(), InformerConfig::default());
        let handled = Arc::new(AtomicUsize::new(0));
        let h = handled.clone();
        informer
            .add_event_handler(
                HandlerFns::new().with_add(move |_, _| {
                    std::thread::sleep(Duration::from_millis(10));
                    h.fetch_add(1, Ordering::SeqCst);
                }),
                HandlerOptions::new(),
            )
            .unwrap();
        informer.start(&tokio::runtime::Handle::current());
        informer
            .wait_for_cache_sync(Duration::from_secs(30))
            .await
            .unwrap();
        // Synced means the initial adds were handed over, not handled: the handler is busy.
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                t.fetch_add(1, Ordering::SeqCst);
            }
        });
        let before = handled.load(Ordering::SeqCst);
        informer.shutdown_async().await;
        assert_eq!(handled.load(Ordering::SeqCst), 40, "the queue was finished");
        if before < 30 {
            assert!(
                ticks.load(Ordering::SeqCst) > 0,
                "the runtime's other task ran during the shutdown"
            );
        }
        assert!(informer.is_stopped());
        ticker.abort();
        drop(informer); // does not block: already stopped
    });
}
