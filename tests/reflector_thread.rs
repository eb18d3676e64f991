//! `InformerConfig::reflector_thread`: the reflector on a thread of its own. The cache and every
//! handler view still equal the simulator's truth through a flood with relists; the thread
//! runs while the informer does and is gone once `shutdown` returns, also when a lister-watcher
//! shuts its informer down from inside its own request (which runs on that thread), and two
//! informers whose requests shut each other down do not wait for each other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use informer::distributor::OverflowPolicy;
use informer::reflector::{ApiError, ListOptions, ListerWatcher, WatchOptions, WatchResponse};
use informer::sim::{SimServer, SimWatch};
use informer::{HandlerOptions, Informer, InformerConfig};

mod support;
mod views;

use support::{flood_config, runtime};
use views::{Recorder, flood_rounds_match_truth};

const THREAD: &str = "informer-watch";

/// Taken by each test, so that each one's count of reflector threads is its own.
static SERIAL: Mutex<()> = Mutex::new(());

/// Threads of this process named `name` (Linux: `/proc/self/task/*/comm`; elsewhere `None`).
fn threads_named(name: &str) -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        dir.flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .count(),
    )
}

/// Waits up to 10 s for `f`.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn config() -> InformerConfig {
    InformerConfig {
        reflector_thread: true,
        ..Default::default()
    }
}

#[test]
fn on_its_own_thread_the_reflector_keeps_the_cache_equal_to_the_truth_through_relists() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    runtime().block_on(flood_with_relists());
}

async fn flood_with_relists() {
    let before = threads_named(THREAD);
    // A small history window: the flood outruns it and the watch relists (410 Gone).
    let sim = SimServer::new(flood_config("etcd", 200, 5).history_window(100)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), config()));
    let views: Vec<Recorder> = [OverflowPolicy::Unbounded, OverflowPolicy::CoalesceByKey]
        .into_iter()
        .map(|p| {
            let v = Recorder::default();
            informer
                .add_event_handler(v.clone(), HandlerOptions::new().policy(p))
                .unwrap();
            v
        })
        .collect();
    informer.start(&tokio::runtime::Handle::current());
    if let Some(before) = before {
        // The new thread names itself once it runs.
        eventually("the reflector's thread", || {
            threads_named(THREAD) == Some(before + 1)
        });
    }
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    flood_rounds_match_truth(&sim, &informer, &views, 3, 1_500).await;
    let m = informer.reflector_metrics().unwrap();
    assert!(m.relists.load(Ordering::Relaxed) >= 1, "expected a relist");
    let i = informer.clone();
    tokio::task::spawn_blocking(move || i.shutdown())
        .await
        .unwrap();
    assert!(informer.is_stopped());
    if let Some(before) = before {
        // Joined by the shutdown; the kernel drops its `/proc` entry a moment after.
        eventually("the reflector's thread to be gone", || {
            threads_named(THREAD) == Some(before)
        });
    }
}

/// Shuts its own informer down from inside its second list request.
struct StopsItsInformer {
    sim: SimServer,
    informer: Arc<OnceLock<Weak<Informer<StopsItsInformer>>>>,
    lists: Arc<AtomicUsize>,
    stopped_inside: Arc<AtomicBool>,
}

impl ListerWatcher for StopsItsInformer {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        if self.lists.fetch_add(1, Ordering::SeqCst) == 1
            && let Some(informer) = self.informer.get().and_then(Weak::upgrade)
        {
            // On the reflector's own thread: this must neither wait for the poll it runs in
            // nor join its own thread.
            informer.shutdown();
            self.stopped_inside.store(true, Ordering::SeqCst);
        }
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}

#[test]
fn a_shutdown_from_inside_the_reflectors_own_request_ends_its_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = threads_named(THREAD);
    let runtime = runtime();
    let sim = SimServer::new(flood_config("etcd", 20, 9).history_window(10)).unwrap();
    let stopped_inside = Arc::new(AtomicBool::new(false));
    let cell = Arc::new(OnceLock::new());
    let lists = Arc::new(AtomicUsize::new(0));
    let informer = Arc::new(Informer::new(
        StopsItsInformer {
            sim: sim.clone(),
            informer: cell.clone(),
            lists: lists.clone(),
            stopped_inside: stopped_inside.clone(),
        },
        config(),
    ));
    let _ = cell.set(Arc::downgrade(&informer));
    informer.start(runtime.handle());
    // Outrun the history window until the watch relists: the second list stops the informer.
    eventually("the shutdown from inside the list", || {
        if !stopped_inside.load(Ordering::SeqCst) {
            sim.step(50).unwrap();
        }
        stopped_inside.load(Ordering::SeqCst)
    });
    assert!(informer.is_stopped());
    // That shutdown did not join the thread it ran on: the thread ends on its own once the
    // poll returns, taking its runtime (and so any further request) with it.
    if let Some(before) = before {
        eventually("the reflector's thread to end", || {
            threads_named(THREAD) == Some(before)
        });
    }
    assert_eq!(
        lists.load(Ordering::SeqCst),
        2,
        "no request after the shutdown"
    );
    // The informer's own shutdown (on drop) finds everything stopped.
    drop(informer);
    drop(runtime);
}

/// Both informers' first lists, once both have begun, shut the other informer down.
struct StopsTheOther {
    sim: SimServer,
    other: Arc<OnceLock<Weak<Informer<StopsTheOther>>>>,
    both_listing: Arc<Barrier>,
    lists: AtomicUsize,
    done: Arc<AtomicUsize>,
}

impl ListerWatcher for StopsTheOther {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        if self.lists.fetch_add(1, Ordering::SeqCst) == 0 {
            self.both_listing.wait();
            if let Some(other) = self.other.get().and_then(Weak::upgrade) {
                // Joining the other's thread here would wait for this very call.
                other.shutdown();
            }
            self.done.fetch_add(1, Ordering::SeqCst);
        }
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}

#[test]
fn two_informers_shutting_each_other_down_from_their_requests_do_not_wait_for_each_other() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = threads_named(THREAD);
    let runtime = runtime();
    let sim = SimServer::new(flood_config("etcd", 5, 4)).unwrap();
    let both_listing = Arc::new(Barrier::new(2));
    let done = Arc::new(AtomicUsize::new(0));
    let cells = [Arc::new(OnceLock::new()), Arc::new(OnceLock::new())];
    let informers: Vec<_> = (0..2)
        .map(|me| {
            Arc::new(Informer::new(
                StopsTheOther {
                    sim: sim.clone(),
                    other: cells[1 - me].clone(),
                    both_listing: both_listing.clone(),
                    lists: AtomicUsize::new(0),
                    done: done.clone(),
                },
                config(),
            ))
        })
        .collect();
    for (cell, informer) in cells.iter().zip(&informers) {
        let _ = cell.set(Arc::downgrade(informer));
    }
    for informer in &informers {
        informer.start(runtime.handle());
    }
    eventually("both shutdowns to return", || {
        done.load(Ordering::SeqCst) == 2
    });
    assert!(informers.iter().all(|i| i.is_stopped()));
    drop(informers);
    if let Some(before) = before {
        eventually("both reflector threads to end", || {
            threads_named(THREAD) == Some(before)
        });
    }
}
