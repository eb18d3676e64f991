//! Every fault switch of the simulator, one test each, against the whole informer (reflector,
//! DeltaFIFO, store, handlers) on paused tokio time: the fault fires, the reflector recovers the
//! way client-go does (checked on the simulator's request log and the reflector's metrics), and
//! the store and every handler's view end equal to the server's state, through a flood before
//! and after the fault.

mod common;
mod support;
mod views;

use std::time::Duration;

use common::{SlowPages, start_informer, wait_converged, wait_converged_frozen, wait_until};
use informer::reflector::{ReflectorConfig, ReflectorStats};
use informer::sim::{
    ErrorAnswer, Fault, FloodMix, OVERSIZED_DEFAULT, SimConfig, SimRequest, SimServer, StreamFault,
};
use support::{list_requests, templates};

fn base(template: &str) -> SimConfig {
    SimConfig::new(templates(template))
        .seed(21)
        .initial_objects(100)
        .mix(FloodMix {
            target_objects: 100,
            create: 20,
            update: 60,
            delete: 20,
        })
}

fn reflector() -> ReflectorConfig {
    ReflectorConfig::default().seed(Some(8))
}

/// What a case saw: the reflector's counters and the server's request log.
struct Outcome {
    stats: ReflectorStats,
    requests: Vec<SimRequest>,
}

impl Outcome {
    /// First list pages: (resourceVersion asked, code answered).
    fn lists(&self) -> Vec<(String, i32)> {
        self.requests
            .iter()
            .filter(|r| r.is_first_page())
            .map(|r| (r.resource_version().to_owned(), r.code()))
            .collect()
    }

    fn watches(&self) -> Vec<(String, i32)> {
        self.requests
            .iter()
            .filter(|r| r.watch().is_some())
            .map(|r| (r.resource_version().to_owned(), r.code()))
            .collect()
    }
}

/// Starts an informer on `sim`, syncs, floods, injects `faults` (then `trigger`, which makes the
/// reflector list or watch again so that list and watch faults meet a request), floods again
/// and checks convergence after each step.
async fn run(
    sim: SimServer,
    config: ReflectorConfig,
    faults: &[Fault],
    trigger: Option<Fault>,
) -> Outcome {
    let (informer, views) = start_informer(sim.clone(), config, 2);
    // Until the faults, nothing needs tokio time to pass: waiting without it keeps what the
    // reflector does independent of how fast the processing thread is.
    wait_converged_frozen(&sim, &informer, &views).await;
    sim.flood(300).await.unwrap();
    wait_converged_frozen(&sim, &informer, &views).await;
    // Past the first second of the current watch: closing it is not a "very short watch".
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fired = sim.stats().faults_fired;
    for f in faults {
        sim.inject(*f);
    }
    if let Some(t) = trigger {
        sim.inject(t);
    }
    sim.flood(300).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    let expected = fired + faults.len() as u64 + u64::from(trigger.is_some());
    wait_until("every fault fired", || sim.stats().faults_fired == expected).await;
    sim.flood(300).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    let stats = informer.reflector_metrics().unwrap().snapshot();
    informer.shutdown();
    Outcome {
        stats,
        requests: sim.requests(),
    }
}

const RELIST: Option<Fault> = Some(Fault::Stream {
    after_events: 0,
    action: StreamFault::Expired,
});

const REWATCH: Option<Fault> = Some(Fault::Stream {
    after_events: 0,
    action: StreamFault::Close,
});

fn stream(action: StreamFault) -> Fault {
    Fault::Stream {
        after_events: 5,
        action,
    }
}

// ----- list answers -------------------------------------------------------------------------

async fn list_fault(answer: ErrorAnswer) -> Outcome {
    let sim = SimServer::new(base("etcd")).unwrap();
    let out = run(sim, reflector(), &[Fault::List(answer)], RELIST).await;
    // The first list, the relist that gets the fault, the retry.
    let lists = out.lists();
    assert_eq!(lists.len(), 3, "{answer}: {lists:?}");
    assert_eq!(lists[0].0, "0");
    assert_ne!(lists[1].0, "");
    assert_eq!(out.stats.relists, 1);
    out
}

#[tokio::test(start_paused = true)]
async fn list_410_relists_at_once_with_empty() {
    let out = list_fault(ErrorAnswer::Expired).await;
    assert_eq!((out.lists()[1].1, out.lists()[2].0.as_str()), (410, ""));
}

#[tokio::test(start_paused = true)]
async fn list_429_waits_for_retry_after_then_lists_the_same_version() {
    let out = list_fault(ErrorAnswer::TooManyRequests {
        retry_after_seconds: 4,
    })
    .await;
    let l = out.lists();
    assert_eq!(l[1].1, 429);
    assert_eq!(l[2].0, l[1].0);
    let firsts: Vec<&SimRequest> = out.requests.iter().filter(|r| r.is_first_page()).collect();
    assert!(firsts[2].at - firsts[1].at >= Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn list_500_backs_off_then_lists_the_same_version() {
    let out = list_fault(ErrorAnswer::InternalError).await;
    let l = out.lists();
    assert_eq!(l[1].1, 500);
    assert_eq!(l[2].0, l[1].0);
    assert!(out.stats.backoffs >= 2);
}

#[tokio::test(start_paused = true)]
async fn list_too_large_relists_at_once_with_empty() {
    let out = list_fault(ErrorAnswer::TooLarge).await;
    assert_eq!((out.lists()[1].1, out.lists()[2].0.as_str()), (504, ""));
}

#[tokio::test(start_paused = true)]
async fn list_too_large_legacy_relists_at_once_with_empty() {
    let out = list_fault(ErrorAnswer::TooLargeLegacy).await;
    assert_eq!((out.lists()[1].1, out.lists()[2].0.as_str()), (504, ""));
}

#[tokio::test(start_paused = true)]
async fn list_refused_backs_off_then_lists_the_same_version() {
    let out = list_fault(ErrorAnswer::ConnectionRefused).await;
    let l = out.lists();
    assert_eq!(l[1].1, 0);
    assert_eq!(l[2].0, l[1].0);
}

// ----- watch answers ------------------------------------------------------------------------

async fn watch_fault(answer: ErrorAnswer) -> Outcome {
    let sim = SimServer::new(base("etcd")).unwrap();
    let out = run(sim, reflector(), &[Fault::Watch(answer)], REWATCH).await;
    let w = out.watches();
    assert!(w.len() >= 3, "{answer}: {w:?}");
    assert_ne!(w[1].1, 200, "{answer}: the second watch got the fault");
    out
}

#[tokio::test(start_paused = true)]
async fn watch_410_relists_at_the_last_version() {
    let out = watch_fault(ErrorAnswer::Expired).await;
    assert_eq!(out.stats.relists, 1);
    assert_eq!(out.lists()[1].0, out.watches()[1].0);
}

#[tokio::test(start_paused = true)]
async fn watch_429_watches_again_without_a_relist() {
    let out = watch_fault(ErrorAnswer::TooManyRequests {
        retry_after_seconds: 2,
    })
    .await;
    assert_eq!(out.stats.relists, 0);
    assert_eq!(out.watches()[2].0, out.watches()[1].0);
}

#[tokio::test(start_paused = true)]
async fn watch_500_relists() {
    let out = watch_fault(ErrorAnswer::InternalError).await;
    assert_eq!(out.stats.relists, 1);
}

#[tokio::test(start_paused = true)]
async fn watch_too_large_relists() {
    let out = watch_fault(ErrorAnswer::TooLarge).await;
    assert_eq!(out.stats.relists, 1);
}

#[tokio::test(start_paused = true)]
async fn watch_too_large_legacy_relists() {
    let out = watch_fault(ErrorAnswer::TooLargeLegacy).await;
    assert_eq!(out.stats.relists, 1);
}

#[tokio::test(start_paused = true)]
async fn watch_refused_watches_again_without_a_relist() {
    let out = watch_fault(ErrorAnswer::ConnectionRefused).await;
    assert_eq!(out.stats.relists, 0);
    assert_eq!(out.watches()[2].0, out.watches()[1].0);
}

// ----- stream faults ------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn stream_close_after_n_events_rewatches_without_a_relist() {
    let sim = SimServer::new(base("etcd")).unwrap();
    let out = run(sim, reflector(), &[stream(StreamFault::Close)], None).await;
    assert_eq!((out.stats.relists, out.stats.errors), (0, 0));
    assert!(out.watches().len() >= 2);
}

#[tokio::test(start_paused = true)]
async fn stream_error_410_relists_at_the_last_version() {
    let sim = SimServer::new(base("json")).unwrap();
    let out = run(sim, reflector(), &[stream(StreamFault::Expired)], None).await;
    assert_eq!(out.stats.relists, 1);
    let lists = out.lists();
    assert_eq!(lists.len(), 2);
    assert_ne!(lists[1].0, "");
}

#[tokio::test(start_paused = true)]
async fn stream_corrupt_frame_relists() {
    for template in ["head", "json"] {
        let sim = SimServer::new(base(template)).unwrap();
        let out = run(sim, reflector(), &[stream(StreamFault::Corrupt)], None).await;
        assert_eq!(out.stats.relists, 1, "{template}");
    }
}

#[tokio::test(start_paused = true)]
async fn stream_oversized_frame_relists() {
    // Protobuf at the real default limit (16 MiB): rejected from its length prefix.
    let sim = SimServer::new(base("etcd")).unwrap();
    let oversized = StreamFault::Oversized {
        bytes: OVERSIZED_DEFAULT,
    };
    let out = run(sim, reflector(), &[stream(oversized)], None).await;
    assert_eq!(out.stats.relists, 1);
    assert!(
        out.stats.watch_bytes < 8 << 20,
        "dropped before the padding arrived"
    );
    // JSON with a 256 KiB limit: rejected once that much of the line is buffered.
    let sim = SimServer::new(base("json")).unwrap();
    let oversized = StreamFault::Oversized { bytes: 1 << 20 };
    let out = run(
        sim,
        reflector().frame_limit(256 << 10),
        &[stream(oversized)],
        None,
    )
    .await;
    assert_eq!(out.stats.relists, 1);
}

#[tokio::test(start_paused = true)]
async fn stream_stall_is_broken_by_the_watch_timeout() {
    let sim = SimServer::new(base("etcd")).unwrap();
    let out = run(sim, reflector(), &[stream(StreamFault::Stall)], None).await;
    assert_eq!(out.stats.relists, 0);
    assert!(out.stats.watch_timeouts >= 1);
}

#[tokio::test(start_paused = true)]
async fn stream_reset_rewatches_without_a_relist() {
    let sim = SimServer::new(base("both")).unwrap();
    let out = run(sim, reflector(), &[stream(StreamFault::Reset)], None).await;
    assert_eq!(out.stats.relists, 0);
    assert_eq!(out.stats.errors, 1);
}

// ----- standing switches --------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn every_watch_closing_after_n_events_never_relists() {
    let sim = SimServer::new(base("etcd").watch_close_after(Some(37))).unwrap();
    let out = run(sim, reflector(), &[], None).await;
    assert_eq!(out.stats.relists, 0);
    assert!(out.watches().len() >= 900 / 37, "{}", out.watches().len());
}

#[tokio::test(start_paused = true)]
async fn a_lagging_list_cache_is_caught_and_relisted_from_empty() {
    // Further behind than the 300 changes made while the reflector waits to relist: the relist
    // at the last version is served older than that version.
    let sim = SimServer::new(base("etcd").list_lag(1_000)).unwrap();
    let out = run(sim, reflector(), &[], RELIST).await;
    assert_eq!(out.stats.stale_lists, 1);
    let lists = out.lists();
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert_eq!(lists[2].0, "");
}

#[tokio::test(start_paused = true)]
async fn a_small_watch_window_relists_lagging_watches() {
    // Without flow control and with a window of 50 events, floods of 300 outrun the watch.
    let sim = SimServer::new(base("etcd").history_window(50)).unwrap();
    let (informer, views) = start_informer(sim.clone(), reflector(), 1);
    wait_converged(&sim, &informer, &views).await;
    for _ in 0..5 {
        sim.step(300).unwrap();
        wait_converged(&sim, &informer, &views).await;
    }
    assert!(informer.reflector_metrics().unwrap().snapshot().relists >= 1);
    informer.shutdown();
}

#[tokio::test(start_paused = true)]
async fn continue_tokens_expiring_fall_back_to_a_full_list() {
    // Pages of at most 40 items; each page after the first comes 2 s later over a link that
    // slow, and tokens live 1 s: every paginated list falls back to one full list.
    let sim = SimServer::new(
        base("etcd")
            .max_page_size(Some(40))
            .continue_ttl(Some(Duration::from_secs(1))),
    )
    .unwrap();
    let slow = SlowPages {
        sim: sim.clone(),
        delay: Duration::from_secs(2),
    };
    let (informer, views) = start_informer(slow, reflector(), 2);
    wait_converged(&sim, &informer, &views).await;
    sim.flood(300).await.unwrap();
    sim.inject(RELIST.unwrap());
    sim.flood(300).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    let m = informer.reflector_metrics().unwrap().snapshot();
    informer.shutdown();
    // Both lists (the first at "0", the relist at a version: paginated again, because the
    // first came in pages) had their second page expire and were fetched whole.
    let pages = list_requests(&sim);
    let expired = (Some(500), true, 410);
    let full = (None, false, 200);
    assert_eq!(
        pages,
        [
            (Some(500), false, 200),
            expired,
            full,
            (Some(500), false, 200),
            expired,
            full
        ]
    );
    assert_eq!((m.lists, m.relists), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn bookmarks_every_n_events_and_every_t_seconds_advance_the_relist_version() {
    let sim = SimServer::new(
        base("etcd")
            .bookmark_every(50)
            .bookmark_interval(Some(Duration::from_secs(3))),
    )
    .unwrap();
    let out = run(sim, reflector(), &[], RELIST).await;
    // One every 50 resourceVersions the watch saw: the 300 changes made while the reflector
    // waited to relist came through the list, not the watch.
    assert!(out.stats.bookmarks >= 600 / 50, "{}", out.stats.bookmarks);
    assert_eq!(out.stats.relists, 1);
}

#[tokio::test(start_paused = true)]
async fn watch_list_on_streams_the_initial_state() {
    let sim = SimServer::new(base("json")).unwrap();
    let out = run(sim, reflector().use_watch_list(true), &[], RELIST).await;
    assert_eq!(out.stats.watch_lists, 2, "start and relist both stream");
    assert!(out.lists().is_empty());
}

#[tokio::test(start_paused = true)]
async fn watch_list_off_on_the_server_falls_back_to_list_and_watch() {
    let sim = SimServer::new(base("etcd").watch_list(false)).unwrap();
    let out = run(sim, reflector().use_watch_list(true), &[], RELIST).await;
    assert_eq!(out.stats.watch_lists, 0);
    assert_eq!(out.stats.watch_list_fallbacks, 2);
    assert_eq!(out.lists().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn every_fault_in_the_catalogue_in_one_run() {
    let sim = SimServer::new(base("etcd").history_window(200)).unwrap();
    let (informer, views) = start_informer(sim.clone(), reflector(), 2);
    wait_converged(&sim, &informer, &views).await;
    for fault in Fault::catalogue() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        sim.inject(fault);
        // List and watch faults need a request: end the current watch so one comes.
        let trigger = match fault {
            Fault::List(_) => RELIST,
            Fault::Watch(_) => REWATCH,
            Fault::Stream { .. } => None,
        };
        if let Some(t) = trigger {
            sim.inject(t);
        }
        sim.flood(100).await.unwrap();
        wait_converged(&sim, &informer, &views).await;
        wait_until("fault fired", || sim.stats().faults_pending == 0).await;
    }
    assert!(sim.stats().faults_fired >= Fault::catalogue().len() as u64);
    informer.shutdown();
}
