//! A relist read page by page reaches the cache as its pages arrive (the informer's DeltaFIFO
//! queues each page's objects at once and the deletions at the end), and ends where a relist
//! queued whole ends: the server's truth, every handler's view exact. A stale list passes
//! nothing on, and the first list, a RealFIFO's relist and a streaming list go in whole.

mod common;
mod support;
mod views;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use common::{start_informer, start_informer_with, wait_converged, wait_until};
use informer::fifo::FifoKind;
use informer::reflector::{
    ApiError, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions, WatchResponse,
};
use informer::sim::{Fault, FloodMix, SimConfig, SimServer, SimWatch, StreamFault};
use informer::{Informer, InformerConfig};
use support::templates;
use views::Seen;

/// 600 etcd Pods whose floods create, update and delete.
fn sim() -> SimServer {
    SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(5)
            .initial_objects(600)
            .mix(FloodMix {
                target_objects: 600,
                create: 20,
                update: 60,
                delete: 20,
            }),
    )
    .unwrap()
}

fn reflector() -> ReflectorConfig {
    ReflectorConfig {
        page_size: 200,
        ..ReflectorConfig::default().seed(Some(3))
    }
}

const RELIST: Fault = Fault::Stream {
    after_events: 0,
    action: StreamFault::Expired,
};

/// The simulator, except that while `hold` is set the pages after a list's first wait for
/// `release`.
#[derive(Clone)]
struct HeldPages {
    sim: SimServer,
    hold: Arc<AtomicBool>,
    waiting: Arc<AtomicBool>,
    release: Arc<tokio::sync::Notify>,
}

impl ListerWatcher for HeldPages {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        if opts.continue_token.is_some() && self.hold.load(Ordering::SeqCst) {
            self.waiting.store(true, Ordering::SeqCst);
            self.release.notified().await;
            self.waiting.store(false, Ordering::SeqCst);
        }
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}

fn deltas<L: ListerWatcher>(informer: &Informer<L>) -> u64 {
    informer.metrics().deltas.load(Ordering::SeqCst)
}

fn lists<L: ListerWatcher>(informer: &Informer<L>) -> u64 {
    informer.reflector_metrics().unwrap().snapshot().lists
}

/// Runs a relist whose second page is held: returns how many deltas the informer applied
/// by then (when `streams`, once the first page's 200 are), and whether the list had ended.
async fn deltas_applied_while_the_relist_is_held(
    config: InformerConfig,
    streams: bool,
) -> (u64, bool) {
    let sim = sim();
    let held = HeldPages {
        sim: sim.clone(),
        hold: Arc::new(AtomicBool::new(false)),
        waiting: Arc::new(AtomicBool::new(false)),
        release: Arc::new(tokio::sync::Notify::new()),
    };
    let (informer, views) = start_informer_with(held.clone(), config, 1);
    wait_converged(&sim, &informer, &views).await;
    sim.flood(300).await.unwrap();
    wait_converged(&sim, &informer, &views).await;

    let (before, listed) = (deltas(&informer), lists(&informer));
    held.hold.store(true, Ordering::SeqCst);
    sim.inject(RELIST);
    sim.flood(1).await.unwrap();
    wait_until("the relist's second page is asked for", || {
        held.waiting.load(Ordering::SeqCst)
    })
    .await;
    // The reflector handed the first page over before asking for the second: queued by
    // now if it streams, so the processing thread applies it (it needs no tokio time).
    if streams {
        wait_until("the first page applied", || {
            deltas(&informer) >= before + 200
        })
        .await;
    }
    let applied = deltas(&informer) - before;
    let ended = lists(&informer) > listed;
    held.hold.store(false, Ordering::SeqCst);
    held.release.notify_one();
    sim.flood(300).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    views[0].assert_exact("after the relist");
    informer.shutdown();
    (applied, ended)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relists_pages_are_applied_while_its_next_page_is_awaited() {
    let config = InformerConfig {
        reflector: reflector(),
        ..Default::default()
    };
    let (applied, ended) = deltas_applied_while_the_relist_is_held(config, true).await;
    assert!(!ended, "the relist ended while its second page was held");
    assert!(
        applied >= 200,
        "{applied} deltas applied from the first page"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_fifo_relist_still_goes_in_whole() {
    let config = InformerConfig {
        reflector: reflector(),
        fifo: FifoKind::RealFifo,
        ..Default::default()
    };
    let (applied, ended) = deltas_applied_while_the_relist_is_held(config, false).await;
    assert!(!ended);
    // Nothing of the first page was queued before the second was asked for (at most the
    // watch's own event, the change made to fire the fault).
    assert!(
        applied <= 1,
        "{applied} deltas applied before the list ended"
    );
}

#[tokio::test(start_paused = true)]
async fn relists_with_changes_and_deletions_end_at_the_truth() {
    let sim = sim();
    let (informer, views) = start_informer(sim.clone(), reflector(), 2);
    wait_converged(&sim, &informer, &views).await;
    for round in 0..4 {
        // The watch ends with 410; the flood's changes (deletions among them) made before the
        // reflector lists again are found by the relist.
        sim.inject(RELIST);
        sim.flood(400).await.unwrap();
        wait_converged(&sim, &informer, &views).await;
        for v in &views {
            v.assert_exact(&format!("round {round}"));
        }
    }
    let m = informer.reflector_metrics().unwrap().snapshot();
    assert!(m.relists >= 4, "{m:?}");
    let tombstones: usize = views.iter().map(|v| v.0.lock().unwrap().tombstones).sum();
    assert!(tombstones > 0, "no relist found a deletion");
    informer.shutdown();
}

/// 600 objects of `template` whose lists are served from a cache 1 000 changes behind.
fn lagging(template: &str) -> SimServer {
    SimServer::new(
        SimConfig::new(templates(template))
            .seed(9)
            .initial_objects(600)
            .list_lag(1_000)
            .mix(FloodMix {
                target_objects: 600,
                create: 20,
                update: 60,
                delete: 20,
            }),
    )
    .unwrap()
}

/// Runs a relist at the last version that `sim` (served through `lw`) answers from its lagging
/// cache: refused, then listed again from the most recent state. Nothing of the stale list
/// may reach the handlers: every update they see goes forward.
async fn stale_relist_moves_nothing_back<L: ListerWatcher>(
    sim: &SimServer,
    lw: L,
    config: ReflectorConfig,
    what: &str,
) {
    let (informer, views) = start_informer(lw, config, 1);
    wait_converged(sim, &informer, &views).await;
    sim.flood(1_500).await.unwrap();
    wait_converged(sim, &informer, &views).await;
    sim.inject(RELIST);
    sim.flood(300).await.unwrap();
    wait_converged(sim, &informer, &views).await;
    let m = informer.reflector_metrics().unwrap().snapshot();
    assert_eq!(m.stale_lists, 1, "{what}");
    views[0].assert_exact(what);
    let rv = |s: &str| s.parse::<u64>().unwrap();
    for seen in views[0].seen() {
        if let Seen::Update {
            key,
            old_rv,
            new_rv,
        } = seen
        {
            assert!(
                rv(&new_rv) >= rv(&old_rv),
                "{what}: {key} went from {old_rv} to {new_rv}"
            );
        }
    }
    informer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn a_stale_relist_moves_no_object_back_in_time() {
    let sim = lagging("etcd");
    stale_relist_moves_nothing_back(&sim, sim.clone(), reflector(), "etcd Pods").await;
}

/// The simulator, except that its JSON lists come with their members sorted by name
/// (`apiVersion`, `items`, `kind`, `metadata`), as the API server writes a custom resource's
/// list: the version is known only once the items are read.
#[derive(Clone)]
struct SortedJson(SimServer);

impl ListerWatcher for SortedJson {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let body = self.0.list(opts).await?;
        let list = informer::object::decode_list(body).unwrap();
        let mut meta = serde_json::json!({ "resourceVersion": list.resource_version });
        if !list.continue_token.is_empty() {
            meta["continue"] = list.continue_token.clone().into();
        }
        let mut out = format!(
            r#"{{"apiVersion":"{}","items":["#,
            list.list_gvk.api_version()
        );
        for (i, item) in list.items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(std::str::from_utf8(&item.raw().unwrap()).unwrap());
        }
        out.push_str(&format!(
            r#"],"kind":"{}","metadata":{meta}}}"#,
            list.list_gvk.kind
        ));
        Ok(Bytes::from(out))
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.0.watch(opts).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_json_list_that_names_its_version_last_is_checked_before_it_is_queued() {
    // As the stale relist above, with custom-resource JSON lists in one response and in
    // pages: the items are read (and compacted) before the list's version is known, and
    // reach the queue only once it is checked.
    for page_size in [0, 200] {
        let sim = lagging("json");
        let config = ReflectorConfig {
            page_size,
            ..reflector()
        };
        let what = format!("page size {page_size}");
        stale_relist_moves_nothing_back(&sim, SortedJson(sim.clone()), config, &what).await;
    }
}
