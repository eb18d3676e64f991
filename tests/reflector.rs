//! Reflector recovery rules on paused tokio time, against the simulator (its faults and its
//! request log) and small hand-written ListerWatchers. Each test checks what the reflector
//! asked for (resourceVersions, timing) and that what it delivered equals the server's state.

mod common;
mod support;
mod views;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{Call, SlowPages, run_reflector, wait_mirror_converged, wait_until};
use informer::object::{GroupVersionKind, WatchFormat, encode_list_protobuf};
use informer::reflector::{
    ApiError, BackoffConfig, Body, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions,
    WatchResponse,
};
use informer::sim::{ErrorAnswer, Fault, SimConfig, SimRequest, SimServer, StreamFault};
use support::{list_requests, templates};

/// A server of `objects` etcd Pods whose resourceVersion is `rv` once they exist.
fn sim_at(rv: u64, objects: usize) -> SimServer {
    SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(11)
            .start_resource_version(rv - objects as u64)
            .initial_objects(objects)
            .target_objects(objects),
    )
    .unwrap()
}

fn config() -> ReflectorConfig {
    ReflectorConfig::default().seed(Some(3))
}

fn no_jitter() -> ReflectorConfig {
    config().backoff(BackoffConfig {
        jitter: 0.0,
        ..Default::default()
    })
}

/// First pages of lists: (resourceVersion asked, code answered).
fn lists(sim: &SimServer) -> Vec<(String, i32)> {
    sim.requests()
        .iter()
        .filter(|r| r.is_first_page())
        .map(|r| (r.resource_version().to_owned(), r.code()))
        .collect()
}

fn watches(sim: &SimServer) -> Vec<SimRequest> {
    sim.requests()
        .into_iter()
        .filter(|r| r.watch().is_some())
        .collect()
}

fn stream(action: StreamFault) -> Fault {
    Fault::Stream {
        after_events: 0,
        action,
    }
}

fn s(rv: &str, code: i32) -> (String, i32) {
    (rv.to_owned(), code)
}

/// Starts a reflector on `sim` and waits until it watches (and past the first second, so a
/// later close is not a "very short watch").
async fn synced(sim: &SimServer, config: ReflectorConfig) -> common::Running {
    let r = run_reflector(sim.clone(), config);
    wait_until("first watch", || sim.stats().watchers == 1).await;
    wait_mirror_converged(sim, &r).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    r
}

// ----- resourceVersion rules ---------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn watch_410_at_500_relists_at_500_and_only_a_410_answer_leads_to_empty() {
    let sim = sim_at(500, 100);
    let r = synced(&sim, config()).await;
    assert_eq!(lists(&sim), [s("0", 200)]);
    assert_eq!(watches(&sim)[0].resource_version(), "500");

    // ERROR 410 on the watch at resourceVersion 500: the relist asks for 500, not "".
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    assert_eq!(lists(&sim), [s("0", 200), s("500", 200)]);
    // That list was served: no "" list follows, however long we wait.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(lists(&sim), [s("0", 200), s("500", 200)]);
    assert!(
        r.errors()
            .iter()
            .any(|e| e.starts_with("WatchErrorEvent") && e.contains("code: 410")),
        "{:?}",
        r.errors()
    );

    // Now the relist at the last version itself answers 410: only then "" follows, at once.
    sim.step(10).unwrap();
    wait_mirror_converged(&sim, &r).await;
    sim.inject(Fault::List(ErrorAnswer::Expired));
    sim.inject(stream(StreamFault::Expired));
    wait_until("second relist", || r.metrics.snapshot().relists == 2).await;
    assert_eq!(
        lists(&sim),
        [s("0", 200), s("500", 200), s("510", 410), s("", 200)]
    );
    let reqs = sim.requests();
    let at: Vec<Duration> = reqs
        .iter()
        .filter(|q| q.is_first_page())
        .map(|q| q.at)
        .collect();
    assert_eq!(at[3], at[2], "the \"\" list follows the 410 at once");
    // Then it watches from the "" list's version, and the "" mode is over.
    sim.step(5).unwrap();
    wait_mirror_converged(&sim, &r).await;
    sim.inject(stream(StreamFault::Expired));
    wait_until("third relist", || r.metrics.snapshot().relists == 3).await;
    assert_eq!(lists(&sim).last(), Some(&s("515", 200)));
    r.mirror.assert_never_back_in_time();
}

#[tokio::test(start_paused = true)]
async fn too_large_in_both_forms_lists_again_at_once_with_empty() {
    for answer in [ErrorAnswer::TooLarge, ErrorAnswer::TooLargeLegacy] {
        let sim = sim_at(300, 20);
        let r = synced(&sim, config()).await;
        sim.inject(Fault::List(answer));
        sim.inject(stream(StreamFault::Expired));
        wait_until("relist", || r.metrics.snapshot().relists == 1).await;
        assert_eq!(
            lists(&sim),
            [s("0", 200), s("300", 504), s("", 200)],
            "{answer}"
        );
        let errors = r.errors();
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("ListFailed") && e.contains("Too large resource version")),
            "{answer}: {errors:?}"
        );
        wait_mirror_converged(&sim, &r).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_lagging_list_cache_never_moves_the_store_back() {
    // The cache is 40 versions behind: "0" and "N" lists are served from it.
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(4)
            .start_resource_version(100)
            .initial_objects(100)
            .target_objects(100)
            .list_lag(40),
    )
    .unwrap();
    let r = synced(&sim, config()).await;
    // The first list at "0" may be old (that is what "0" means): served at 160, then the watch
    // from 160 catches up to 200.
    assert_eq!(r.mirror.replaces(), ["160"]);
    assert_eq!(sim.truth().diff(&r.mirror.view()), None);

    // A relist at 200 is served at 160 by the lagging cache: rejected, then "" at once.
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    assert_eq!(lists(&sim), [s("0", 200), s("200", 200), s("", 200)]);
    assert_eq!(r.mirror.replaces(), ["160", "200"]);
    assert_eq!(r.metrics.snapshot().stale_lists, 1);
    assert!(
        r.errors().iter().any(|e| e.starts_with("StaleList")),
        "{:?}",
        r.errors()
    );
    sim.step(30).unwrap();
    wait_mirror_converged(&sim, &r).await;
    r.mirror.assert_never_back_in_time();
}

#[tokio::test(start_paused = true)]
async fn relists_at_a_version_are_unpaginated_unless_the_first_list_came_in_pages() {
    for (objects, paginated) in [(300, false), (1_200, true)] {
        let sim = sim_at(5_000, objects);
        let r = synced(&sim, config()).await;
        sim.inject(stream(StreamFault::Expired));
        wait_until("relist", || r.metrics.snapshot().relists == 1).await;
        let firsts: Vec<Option<u32>> = sim
            .requests()
            .iter()
            .filter(|q| q.is_first_page())
            .map(|q| q.list().unwrap().limit)
            .collect();
        let relist_limit = if paginated { Some(500) } else { None };
        assert_eq!(firsts, [Some(500), relist_limit], "{objects} objects");
        wait_mirror_converged(&sim, &r).await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_falls_back_to_one_full_list() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(2)
            .initial_objects(1_200)
            .target_objects(1_200)
            .continue_ttl(Some(Duration::from_secs(5))),
    )
    .unwrap();
    let slow = SlowPages {
        sim: sim.clone(),
        delay: Duration::from_secs(10),
    };
    let r = run_reflector(slow, config());
    wait_mirror_converged(&sim, &r).await;
    let pages = list_requests(&sim);
    // Page 1, page 2 with an expired token (410), then one unpaginated list at "0".
    assert_eq!(
        pages,
        [
            (Some(500), false, 200),
            (Some(500), true, 410),
            (None, false, 200)
        ]
    );
    assert_eq!(
        r.mirror.calls()[0],
        Call::Replace {
            rv: sim.resource_version().to_string(),
            items: 1_200
        }
    );
    assert_eq!(r.metrics.snapshot().lists, 1);
}

// ----- backoff ------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn retry_after_3s_is_respected_on_lists_and_watches() {
    let sim = sim_at(100, 10);
    sim.inject(Fault::List(ErrorAnswer::TooManyRequests {
        retry_after_seconds: 3,
    }));
    let r = synced(&sim, config()).await;
    let reqs = sim.requests();
    assert_eq!(lists(&sim), [s("0", 429), s("0", 200)]);
    // The first backoff is 0.8–1.6 s; Retry-After asks for 3 s: the retry is exactly 3 s later.
    assert_eq!(reqs[1].at - reqs[0].at, Duration::from_secs(3));

    // A watch answered 429: watched again (no relist) not before 3 s.
    sim.inject(Fault::Watch(ErrorAnswer::TooManyRequests {
        retry_after_seconds: 3,
    }));
    sim.inject(stream(StreamFault::Close));
    wait_until("rewatch after 429", || watches(&sim).len() == 3).await;
    let w = watches(&sim);
    assert_eq!(w[1].code(), 429);
    assert_eq!(w[2].code(), 200);
    // The backoff has grown (1.6–3.2 s now); the wait is the larger of it and Retry-After.
    let waited = w[2].at - w[1].at;
    assert!(waited >= Duration::from_secs(3), "{waited:?}");
    assert_eq!(
        waited,
        Duration::from_millis(r.metrics.snapshot().last_backoff_ms)
    );
    assert_eq!(w[1].resource_version(), w[2].resource_version());
    assert_eq!(r.metrics.snapshot().relists, 0);
}

#[tokio::test(start_paused = true)]
async fn repeated_500s_back_off_exponentially_capped_at_30s() {
    // Without jitter the delays are exact.
    let sim = sim_at(100, 10);
    for _ in 0..10 {
        sim.inject(Fault::List(ErrorAnswer::InternalError));
    }
    let r = run_reflector(sim.clone(), no_jitter());
    wait_mirror_converged(&sim, &r).await;
    let at: Vec<Duration> = sim.requests().iter().map(|q| q.at).collect();
    let gaps: Vec<u128> = at[..11]
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    assert_eq!(
        gaps,
        [
            800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000, 30000
        ]
    );
    assert_eq!(lists(&sim).len(), 11);
    assert!(lists(&sim)[..10].iter().all(|l| *l == s("0", 500)));
    let m = r.metrics.snapshot();
    assert_eq!((m.backoffs, m.errors, m.backoff_ms), (10, 10, 30_000));
    assert!(!m.backing_off);

    // With client-go's jitter (1.0): each delay in [d, 2d), d doubling to the 30 s cap.
    let sim = sim_at(100, 10);
    for _ in 0..10 {
        sim.inject(Fault::List(ErrorAnswer::InternalError));
    }
    let r = run_reflector(sim.clone(), config());
    wait_mirror_converged(&sim, &r).await;
    let at: Vec<Duration> = sim.requests().iter().map(|q| q.at).collect();
    let mut base = 800u128;
    for w in at[..11].windows(2) {
        let gap = (w[1] - w[0]).as_millis();
        assert!(gap >= base && gap < 2 * base, "{gap} ms for base {base} ms");
        base = (base * 2).min(30_000);
    }
}

#[tokio::test(start_paused = true)]
async fn the_backoff_starts_again_after_two_minutes_of_health() {
    let sim = sim_at(100, 10);
    for _ in 0..3 {
        sim.inject(Fault::List(ErrorAnswer::InternalError));
    }
    let r = run_reflector(sim.clone(), no_jitter());
    wait_mirror_converged(&sim, &r).await;
    // Right after 3 failures the next delay would be 6.4 s…
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    assert_eq!(r.metrics.snapshot().last_backoff_ms, 6_400);
    // …but after more than 2 min without a failure it is 800 ms again.
    tokio::time::sleep(Duration::from_secs(150)).await;
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 2).await;
    assert_eq!(r.metrics.snapshot().last_backoff_ms, 800);
}

// ----- watch recovery -----------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn refused_or_429_watches_are_retried_without_a_relist_and_other_failures_relist() {
    let sim = sim_at(100, 10);
    let r = synced(&sim, config()).await;
    sim.inject(Fault::Watch(ErrorAnswer::ConnectionRefused));
    sim.inject(stream(StreamFault::Close));
    wait_until("rewatch", || watches(&sim).len() == 3).await;
    let w = watches(&sim);
    assert_eq!((w[1].code(), w[2].code()), (0, 200));
    assert!(w[2].at > w[1].at, "after a backoff");
    assert_eq!(w[2].resource_version(), "100");
    assert_eq!(lists(&sim).len(), 1, "no relist");

    tokio::time::sleep(Duration::from_secs(2)).await;
    sim.inject(Fault::Watch(ErrorAnswer::InternalError));
    sim.inject(stream(StreamFault::Close));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    assert_eq!(lists(&sim), [s("0", 200), s("100", 200)]);
    assert!(
        r.errors()
            .iter()
            .any(|e| e.starts_with("WatchStartFailed") && e.contains("500")),
        "{:?}",
        r.errors()
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_or_reset_watch_is_reopened_at_once_from_the_last_version() {
    for action in [StreamFault::Close, StreamFault::Reset] {
        let sim = sim_at(100, 10);
        let r = synced(&sim, config()).await;
        sim.step(5).unwrap();
        wait_mirror_converged(&sim, &r).await;
        sim.inject(stream(action));
        sim.step(5).unwrap();
        wait_mirror_converged(&sim, &r).await;
        let w = watches(&sim);
        assert_eq!(w.len(), 2, "{action}");
        assert_eq!(w[1].resource_version(), "105", "{action}");
        assert_eq!(lists(&sim).len(), 1, "{action}: no relist");
        assert_eq!(r.metrics.snapshot().backoffs, 0, "{action}: no backoff");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_watch_is_dropped_at_its_timeout_and_reopened() {
    let sim = sim_at(100, 10);
    let r = synced(&sim, config()).await;
    sim.inject(stream(StreamFault::Stall));
    sim.step(5).unwrap();
    wait_mirror_converged(&sim, &r).await;
    let w = watches(&sim);
    assert_eq!(w.len(), 2);
    let timeout = w[0].watch().unwrap().timeout.unwrap();
    assert!(timeout >= Duration::from_secs(300) && timeout < Duration::from_secs(600));
    // The stalled watch held the 5 events until the reflector's own deadline.
    assert_eq!(w[1].at - w[0].at, timeout);
    assert_eq!(w[1].resource_version(), "100");
    let m = r.metrics.snapshot();
    assert_eq!((m.watch_timeouts, m.relists), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn corrupt_and_oversized_frames_relist_after_a_backoff() {
    for template in ["etcd", "json"] {
        for action in [
            StreamFault::Corrupt,
            StreamFault::Oversized { bytes: 70_000 },
        ] {
            let sim = SimServer::new(
                SimConfig::new(templates(template))
                    .seed(9)
                    .initial_objects(10)
                    .target_objects(10),
            )
            .unwrap();
            let r = synced(&sim, config().frame_limit(64 * 1024)).await;
            sim.inject(stream(action));
            sim.step(5).unwrap();
            wait_until("relist", || r.metrics.snapshot().relists == 1).await;
            wait_mirror_converged(&sim, &r).await;
            let m = r.metrics.snapshot();
            assert_eq!(m.backoffs, 1, "{template} {action}");
            assert!(
                r.errors()
                    .iter()
                    .any(|e| e.starts_with("WatchStreamFailed")),
                "{template} {action}: {:?}",
                r.errors()
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_oversized_frame_within_the_limit_is_just_a_bookmark() {
    let sim = sim_at(100, 10);
    let r = synced(&sim, config()).await;
    sim.inject(stream(StreamFault::Oversized { bytes: 200_000 }));
    sim.step(5).unwrap();
    wait_mirror_converged(&sim, &r).await;
    let m = r.metrics.snapshot();
    assert_eq!((m.relists, m.errors), (0, 0));
    assert!(m.watch_bytes > 200_000);
}

// ----- streaming lists ------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_streaming_list_replaces_at_its_end_bookmark_then_goes_on_live() {
    let sim = sim_at(500, 100);
    let r = run_reflector(sim.clone(), config().use_watch_list(true));
    wait_mirror_converged(&sim, &r).await;
    sim.step(20).unwrap();
    wait_mirror_converged(&sim, &r).await;
    let reqs = sim.requests();
    assert_eq!(reqs.len(), 1, "one request: no list, one watch: {reqs:?}");
    let w = reqs[0].watch().unwrap();
    assert!(w.send_initial_events && w.allow_watch_bookmarks);
    assert_eq!(w.resource_version, "");
    assert_eq!(
        r.mirror.calls()[0],
        Call::Replace {
            rv: "500".into(),
            items: 100
        }
    );
    let m = r.metrics.snapshot();
    assert_eq!((m.lists, m.watch_lists, m.watches), (1, 1, 1));

    // A 410 relists by streaming again, from the last version (never "" first).
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    let w = watches(&sim);
    assert!(w[1].watch().unwrap().send_initial_events);
    assert_eq!(w[1].resource_version(), "520");
    wait_mirror_converged(&sim, &r).await;
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_falls_back_to_list_and_watch() {
    // A server without the WatchList feature answers 422.
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(5)
            .initial_objects(30)
            .target_objects(30)
            .watch_list(false),
    )
    .unwrap();
    let r = run_reflector(sim.clone(), config().use_watch_list(true));
    wait_mirror_converged(&sim, &r).await;
    let reqs = sim.requests();
    assert_eq!(reqs[0].code(), 422);
    assert_eq!((reqs[1].resource_version(), reqs[1].code()), ("0", 200));
    assert!(!reqs[2].watch().unwrap().send_initial_events);
    assert_eq!(r.metrics.snapshot().watch_list_fallbacks, 1);
    assert!(r.errors()[0].starts_with("WatchListFailed"));

    // A stream that ends before its end bookmark (here: every watch closes after 10 events).
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(5)
            .initial_objects(30)
            .target_objects(30)
            .watch_close_after(Some(10)),
    )
    .unwrap();
    let r = run_reflector(sim.clone(), config().use_watch_list(true));
    wait_mirror_converged(&sim, &r).await;
    assert!(
        r.errors()[0].starts_with("WatchListIncomplete"),
        "{:?}",
        r.errors()
    );
    assert_eq!(lists(&sim), [s("0", 200)]);
    sim.step(35).unwrap();
    wait_mirror_converged(&sim, &r).await;
    assert_eq!(r.metrics.snapshot().relists, 0);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_at_an_expired_version_streams_again_from_empty() {
    let sim = sim_at(500, 100);
    let r = synced(&sim, config().use_watch_list(true)).await;
    sim.inject(Fault::Watch(ErrorAnswer::Expired));
    sim.inject(stream(StreamFault::Expired));
    wait_until("relist", || r.metrics.snapshot().relists == 1).await;
    let w: Vec<(String, i32)> = watches(&sim)
        .iter()
        .map(|q| (q.resource_version().to_owned(), q.code()))
        .collect();
    assert_eq!(w, [s("", 200), s("500", 410), s("", 200)]);
    wait_mirror_converged(&sim, &r).await;
}

// ----- hand-written servers --------------------------------------------------------------------

/// A body the server closes at once, with nothing in it.
struct Closed;

impl Body for Closed {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        None
    }
}

/// Lists one empty page at resourceVersion 5; every watch closes at once.
#[derive(Default)]
struct ClosingServer {
    lists: Mutex<Vec<String>>,
    watches: AtomicU64,
}

impl ListerWatcher for ClosingServer {
    type Body = Closed;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.lists
            .lock()
            .unwrap()
            .push(opts.resource_version.clone().unwrap_or_default());
        Ok(encode_list_protobuf(
            &GroupVersionKind::new("", "v1", "PodList"),
            "5",
            "",
            None,
            &[],
        )
        .unwrap())
    }

    async fn watch(&self, _opts: &WatchOptions) -> Result<WatchResponse<Closed>, ApiError> {
        self.watches.fetch_add(1, Ordering::Relaxed);
        Ok(WatchResponse {
            format: WatchFormat::Protobuf,
            body: Closed,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn very_short_watches_back_off_and_relist_at_the_last_version() {
    let server = Arc::new(ClosingServer::default());
    let seen = Arc::new(AtomicU64::new(0));
    let count = seen.clone();
    let reflector = informer::reflector::Reflector::new(
        server.clone(),
        Arc::new(common::Mirror::default()),
        config(),
    )
    .with_error_handler(Arc::new(move |e| {
        assert!(
            matches!(
                e,
                informer::reflector::ReflectorError::VeryShortWatch { .. }
            ),
            "{e}"
        );
        count.fetch_add(1, Ordering::Relaxed);
    }));
    // One minute of (paused, auto-advancing) time.
    let _ = tokio::time::timeout(Duration::from_secs(60), reflector.run()).await;
    let watches = server.watches.load(Ordering::Relaxed);
    // Backoff 0.8 s, 1.6 s, 3.2 s, … (+ up to 100 % jitter): a handful of watches a minute.
    assert!((3..=10).contains(&watches), "{watches} watches in a minute");
    assert_eq!(seen.load(Ordering::Relaxed), watches);
    // client-go relists after a very short watch, at the last version (never "0" or "").
    let lists = server.lists.lock().unwrap().clone();
    assert_eq!(lists[0], "0");
    assert!(lists[1..].iter().all(|rv| rv == "5"), "{lists:?}");
    assert!(lists.len() as u64 >= watches);
}
