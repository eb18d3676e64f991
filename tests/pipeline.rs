//! The whole pipeline, end to end: simulated API server → Reflector → DeltaFIFO → Store →
//! distributor → handlers, on real fixture bytes, in both encodings, through relists and bad
//! bytes. Every test ends by comparing the store and each handler's view with the server's truth.

mod common;
mod support;
mod views;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::start_informer;
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::object::Object;
use informer::reflector::{
    ApiError, BackoffConfig, Body, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions,
    WatchResponse,
};
use informer::sim::{SimServer, SimWatch};
use informer::{HandlerOptions, Informer, InformerConfig};
use support::flood_config;
use views::{Recorder, store_view};

fn sim(template: &str, objects: usize, window: usize, flow_control: bool) -> SimServer {
    SimServer::new(
        flood_config(template, objects, 7)
            .history_window(window)
            .flow_control(flow_control),
    )
    .unwrap()
}

/// Waits until the store reflects the server's last change and every handler has handled
/// everything published, then checks the store and each view against the truth.
async fn assert_converged<L: ListerWatcher>(
    sim: &SimServer,
    informer: &Informer<L>,
    views: &[Recorder],
) {
    let truth = sim.truth();
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        informer.store().wait_for(truth.resource_version),
    )
    .await;
    if waited.is_err() {
        let m = informer.reflector_metrics().unwrap();
        panic!(
            "store stuck at {} (server at {}); reflector: {m:?}; fifo synced {}",
            informer.store().resource_version(),
            truth.resource_version,
            informer.has_synced()
        );
    }
    informer.flush();
    if let Some(d) = truth.diff(&store_view(informer)) {
        panic!("store != truth: {d}");
    }
    for (i, v) in views.iter().enumerate() {
        v.assert_exact(&format!("handler {i}"));
        if let Some(d) = truth.diff(&v.objects()) {
            panic!("handler {i} != truth: {d}");
        }
    }
}

fn start<L: ListerWatcher>(lw: L, handlers: usize) -> (Informer<L>, Vec<Recorder>) {
    start_informer(lw, ReflectorConfig::default(), handlers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_converges_in_every_encoding() {
    for template in ["head", "etcd", "both", "json"] {
        let sim = sim(template, 300, 5_000, true);
        let (informer, views) = start(sim.clone(), 3);
        informer
            .wait_for_cache_sync(Duration::from_secs(30))
            .await
            .unwrap();
        informer.flush();
        {
            let v = views[0].0.lock().unwrap();
            assert_eq!(
                v.initial_adds, 300,
                "{template}: initial list as initial adds"
            );
        }
        sim.flood(5_000).await.unwrap();
        assert_converged(&sim, &informer, &views).await;
        let v = views[1].0.lock().unwrap();
        assert!(
            v.updates > 2_000 && v.deletes > 500,
            "{template}: {} updates {} deletes",
            v.updates,
            v.deletes
        );
        drop(v);
        let m = informer.reflector_metrics().unwrap();
        assert_eq!(
            m.relists.load(Ordering::Relaxed),
            0,
            "{template}: flow control means no relist"
        );
        informer.shutdown();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn watch_410_relists_and_reports_missed_deletions_as_tombstones() {
    tokio::time::timeout(Duration::from_secs(100), watch_410_inner())
        .await
        .unwrap();
}

async fn watch_410_inner() {
    // A small window and no flow control: while `step` runs (synchronously, on the only
    // runtime thread) the watch falls out of the window and gets 410 Gone.
    let sim = sim("etcd", 200, 100, false);
    let (informer, views) = start(sim.clone(), 2);
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    informer
        .store()
        .wait_for(sim.resource_version())
        .await
        .unwrap();
    sim.step(3_000).unwrap();
    assert_converged(&sim, &informer, &views).await;
    let m = informer.reflector_metrics().unwrap();
    assert!(
        m.relists.load(Ordering::Relaxed) >= 1,
        "expected a relist after 410"
    );
    let v = views[0].0.lock().unwrap();
    assert!(
        v.tombstones > 0,
        "deletions during the gap arrive as tombstones"
    );
    informer.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handler_gets_the_cache_then_live_events() {
    let sim = sim("etcd", 1_000, 10_000, true);
    let (informer, views) = start(sim.clone(), 1);
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    sim.flood(2_000).await.unwrap();
    // Let the informer catch up: the cache then holds exactly the server's objects.
    informer
        .store()
        .wait_for(sim.resource_version())
        .await
        .unwrap();
    let cached = informer.store().len();
    let late = Recorder::default();
    let reg = informer
        .add_event_handler(late.clone(), informer::HandlerOptions::new())
        .unwrap();
    sim.flood(2_000).await.unwrap();
    let mut all = views.clone();
    all.push(late.clone());
    assert_converged(&sim, &informer, &all).await;
    assert!(reg.has_synced());
    let v = late.0.lock().unwrap();
    // Every object cached at registration came as an initial add; nothing was doubled
    // (assert_converged checks that no add hit a key the handler had).
    assert_eq!(v.initial_adds, cached);
    drop(v);
    informer.shutdown();
}

/// Wraps the simulator and corrupts the first watch: a valid start, then bytes that are not a
/// watch frame. The reflector must report it, relist, and converge.
struct Corrupting {
    sim: SimServer,
    corrupt: AtomicBool,
    watches: AtomicUsize,
}

enum MaybeCorrupt {
    Real(Box<SimWatch>),
    Garbage(Option<Bytes>),
}

impl Body for MaybeCorrupt {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        match self {
            MaybeCorrupt::Real(w) => w.next_chunk().await,
            MaybeCorrupt::Garbage(g) => g.take().map(Ok),
        }
    }
}

impl ListerWatcher for Corrupting {
    type Body = MaybeCorrupt;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<MaybeCorrupt>, ApiError> {
        self.watches.fetch_add(1, Ordering::Relaxed);
        let resp = self.sim.watch(opts).await?;
        if self.corrupt.swap(false, Ordering::Relaxed) {
            // A frame header promising 3 bytes, then bytes that are no WatchEvent.
            let garbage = Bytes::from_static(b"\x00\x00\x00\x03\xff\xff\xff");
            return Ok(WatchResponse {
                format: resp.format,
                body: MaybeCorrupt::Garbage(Some(garbage)),
            });
        }
        Ok(WatchResponse {
            format: resp.format,
            body: MaybeCorrupt::Real(Box::new(resp.body)),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_watch_is_an_error_then_a_relist_and_no_cached_data_is_lost() {
    let sim = sim("head", 100, 10_000, true);
    let lw = Corrupting {
        sim: sim.clone(),
        corrupt: AtomicBool::new(true),
        watches: AtomicUsize::new(0),
    };
    let informer = Informer::new(
        lw,
        InformerConfig {
            // Real time here (the processing thread is not tokio's): keep the backoff short.
            reflector: ReflectorConfig {
                backoff: BackoffConfig {
                    initial: Duration::from_millis(1),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let view = Recorder::default();
    informer
        .add_event_handler(view.clone(), informer::HandlerOptions::new())
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    // The cache from the first list stays while the bad stream is handled.
    assert_eq!(informer.store().len(), 100);
    sim.flood(500).await.unwrap();
    assert_converged(&sim, &informer, &[view]).await;
    let m = informer.reflector_metrics().unwrap();
    assert!(
        m.errors.load(Ordering::Relaxed) >= 1,
        "the bad frame is reported"
    );
    assert!(
        m.relists.load(Ordering::Relaxed) >= 1,
        "and recovered from by a relist"
    );
    informer.shutdown();
}

/// A Block(1) handler that registers another handler from inside its own callback, while the
/// processing thread is waiting for room in that handler's channel: must not deadlock.
struct Registering {
    informer: Arc<std::sync::OnceLock<Arc<Informer<SimServer>>>>,
    nested: Recorder,
    done: Arc<AtomicBool>,
    inner: Recorder,
}

impl EventHandler for Registering {
    fn on_add(&mut self, obj: &Arc<Object>, initial: bool) {
        if !self.done.swap(true, Ordering::SeqCst) {
            let informer = self.informer.get().expect("set before start");
            informer
                .add_event_handler(self.nested.clone(), informer::HandlerOptions::new())
                .unwrap();
        }
        self.inner.on_add(obj, initial);
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        self.inner.on_update(old, new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.inner.on_delete(obj);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_handler_can_register_another_handler() {
    let sim = sim("etcd", 200, 10_000, true);
    let informer = Arc::new(Informer::new(
        sim.clone(),
        InformerConfig {
            batch_size: 1,
            ..Default::default()
        },
    ));
    let cell = Arc::new(std::sync::OnceLock::new());
    let _ = cell.set(informer.clone());
    let (outer, nested) = (Recorder::default(), Recorder::default());
    let done = Arc::new(AtomicBool::new(false));
    informer
        .add_event_handler(
            Registering {
                informer: cell.clone(),
                nested: nested.clone(),
                done: done.clone(),
                inner: outer.clone(),
            },
            HandlerOptions::new()
                .name("registering")
                .policy(OverflowPolicy::Block { capacity: 1 }),
        )
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    let synced = tokio::time::timeout(
        Duration::from_secs(30),
        informer.wait_for_cache_sync(Duration::from_secs(30)),
    )
    .await;
    assert!(matches!(synced, Ok(Ok(()))), "deadlocked or never synced");
    sim.flood(1_000).await.unwrap();
    assert_converged(&sim, &informer, &[outer, nested]).await;
    assert!(done.load(Ordering::SeqCst));
    informer.shutdown();
}
