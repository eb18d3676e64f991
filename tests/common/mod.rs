//! The paused-time harness of the reflector and informer tests: run, drive and wait on them.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use informer::distributor::OverflowPolicy;
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::reflector::{
    ApiError, BackoffConfig, ListOptions, ListerWatcher, Reflector, ReflectorConfig,
    ReflectorError, ReflectorMetrics, ReflectorStore, StoreClosed, WatchChange, WatchOptions,
    WatchResponse,
};
use informer::sim::{Fault, SimServer, SimWatch};
use informer::{HandlerOptions, Informer, InformerConfig};

use crate::views::{Recorder, ViewMap, items_view, store_view, version};

/// One call the reflector made on its store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Replace { rv: String, items: usize },
    Apply { changes: usize },
    Bookmark { rv: String },
}

#[derive(Debug, Default)]
pub struct MirrorState {
    pub objects: ViewMap,
    pub calls: Vec<Call>,
}

/// A [`ReflectorStore`] that applies what it is given to a map (the reflector's view of the
/// server) and records every call.
#[derive(Debug, Default)]
pub struct Mirror(pub Mutex<MirrorState>);

impl Mirror {
    pub fn view(&self) -> ViewMap {
        self.0.lock().unwrap().objects.clone()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().calls.clone()
    }

    pub fn replaces(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Replace { rv, .. } => Some(rv),
                _ => None,
            })
            .collect()
    }

    /// The resourceVersions of replaces and bookmarks (what the store's version follows)
    /// never decrease.
    pub fn assert_never_back_in_time(&self) {
        let st = self.0.lock().unwrap();
        let mut last = 0;
        for c in &st.calls {
            let rv = match c {
                Call::Replace { rv, .. } | Call::Bookmark { rv } => {
                    parse_resource_version(rv).unwrap()
                }
                Call::Apply { .. } => continue,
            };
            assert!(
                rv >= last,
                "store went back from {last} to {rv}: {:?}",
                st.calls
            );
            last = rv;
        }
    }
}

impl ReflectorStore for Mirror {
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed> {
        let mut st = self.0.lock().unwrap();
        st.objects = items_view(&items);
        st.calls.push(Call::Replace {
            rv: resource_version.to_owned(),
            items: items.len(),
        });
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        let mut st = self.0.lock().unwrap();
        st.calls.push(Call::Apply {
            changes: changes.len(),
        });
        for c in changes {
            match &c {
                WatchChange::Added(o) | WatchChange::Modified(o) => {
                    st.objects.insert(o.key(), version(o));
                }
                WatchChange::Deleted(o) => {
                    st.objects.remove(&o.key());
                }
            }
        }
        Ok(())
    }

    fn bookmark(&self, resource_version: &str) {
        let mut st = self.0.lock().unwrap();
        st.calls.push(Call::Bookmark {
            rv: resource_version.to_owned(),
        });
    }
}

/// A reflector running on the current runtime into a [`Mirror`], with its errors recorded as
/// text.
pub struct Running {
    pub mirror: Arc<Mirror>,
    pub metrics: Arc<ReflectorMetrics>,
    pub errors: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<Result<(), StoreClosed>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

/// Describes a reflector error with its variant and source, for assertions.
pub fn describe(e: &ReflectorError) -> String {
    let mut s = format!("{e:?}");
    if let Some(src) = std::error::Error::source(e) {
        s.push_str(&format!(" <- {src}"));
    }
    s
}

pub fn run_reflector<L: ListerWatcher>(lw: L, config: ReflectorConfig) -> Running {
    let mirror = Arc::new(Mirror::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let reflector = Reflector::new(Arc::new(lw), mirror.clone(), config)
        .with_error_handler(Arc::new(move |e| seen.lock().unwrap().push(describe(e))));
    let metrics = reflector.metrics();
    let task = tokio::spawn(reflector.run());
    Running {
        mirror,
        metrics,
        errors,
        task,
    }
}

/// Poll steps: 1 ms for the first 200 polls (so a condition is seen within a millisecond of
/// tokio time), then doubling to 250 ms (so waiting through minutes of paused time, a watch
/// timeout say, takes a few hundred polls).
#[derive(Default)]
struct Poll(u32);

impl Poll {
    async fn tick(&mut self) {
        self.0 += 1;
        let ms = if self.0 <= 200 {
            1
        } else {
            1u64 << (self.0 - 200).min(8)
        };
        tokio::time::sleep(Duration::from_millis(ms.min(250))).await;
    }
}

/// Polls `cond` until it holds. On paused time each poll lets the runtime advance the clock
/// when nothing else is ready, so timers (backoffs, watch timeouts) pass as needed; the
/// wall-clock limit only guards against a hang.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let wall = std::time::Instant::now();
    let mut poll = Poll::default();
    while !cond() {
        assert!(
            wall.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        poll.tick().await;
    }
}

/// Polls `cond` until it holds without letting paused time advance: other tasks run (each poll
/// yields), threads get a moment (50 µs), the clock stays. For waits on the informer's
/// processing thread, so that how long it takes in wall time does not change what the
/// reflector does on tokio time.
pub async fn wait_frozen(what: &str, mut cond: impl FnMut() -> bool) {
    let wall = std::time::Instant::now();
    let t0 = tokio::time::Instant::now();
    while !cond() {
        assert!(
            wall.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_micros(50));
    }
    assert_eq!(t0, tokio::time::Instant::now(), "time stood still");
}

/// Waits until the mirror equals the server's current state.
pub async fn wait_mirror_converged(sim: &SimServer, running: &Running) {
    let wall = std::time::Instant::now();
    let mut poll = Poll::default();
    loop {
        let truth = sim.truth();
        let view = running.mirror.view();
        if truth.diff(&view).is_none() {
            return;
        }
        if wall.elapsed() > Duration::from_secs(60) {
            panic!(
                "reflector never converged: {}; metrics {:?}; errors {:?}",
                truth.diff(&view).unwrap(),
                running.metrics.snapshot(),
                running.errors()
            );
        }
        poll.tick().await;
    }
}

/// An informer over `lw` with `handlers` recorders (named `h0`, `h1`, …; unbounded), started
/// on the current runtime.
pub fn start_informer<L: ListerWatcher>(
    lw: L,
    reflector: ReflectorConfig,
    handlers: usize,
) -> (Informer<L>, Vec<Recorder>) {
    start_informer_with(
        lw,
        InformerConfig {
            reflector,
            ..Default::default()
        },
        handlers,
    )
}

/// As [`start_informer`], with the whole informer config.
pub fn start_informer_with<L: ListerWatcher>(
    lw: L,
    config: InformerConfig,
    handlers: usize,
) -> (Informer<L>, Vec<Recorder>) {
    let informer = Informer::new(lw, config);
    let views: Vec<Recorder> = (0..handlers).map(|_| Recorder::default()).collect();
    for (i, v) in views.iter().enumerate() {
        informer
            .add_event_handler(
                v.clone(),
                HandlerOptions::new()
                    .name(format!("h{i}"))
                    .policy(OverflowPolicy::Unbounded),
            )
            .unwrap();
    }
    informer.start(&tokio::runtime::Handle::current());
    (informer, views)
}

/// `true` when the informer's store and every handler's view equal the server's current
/// state (handlers flushed first).
///
/// # Panics
/// When a handler saw a contract violation or a stale tombstone ([`Recorder::assert_exact`]).
pub fn converged<L: ListerWatcher>(
    sim: &SimServer,
    informer: &Informer<L>,
    views: &[Recorder],
) -> bool {
    let truth = sim.truth();
    let store_ok = informer.store().resource_version() >= truth.resource_version
        && truth.diff(&store_view(informer)).is_none();
    if !store_ok {
        return false;
    }
    informer.flush();
    for (i, v) in views.iter().enumerate() {
        v.assert_exact(&format!("handler {i}"));
    }
    views.iter().all(|v| truth.diff(&v.objects()).is_none())
}

/// As [`wait_converged`], without letting tokio time pass (see [`wait_frozen`]): for when the
/// reflector has nothing to wait for (no backoff, no stalled watch), only the processing
/// thread has work left.
pub async fn wait_converged_frozen<L: ListerWatcher>(
    sim: &SimServer,
    informer: &Informer<L>,
    views: &[Recorder],
) {
    wait_frozen("convergence", || converged(sim, informer, views)).await;
}

/// Waits (paused-time friendly) until the informer's store and every handler's view equal
/// the server's current state; tokio time advances while it waits (for backoffs, timeouts).
pub async fn wait_converged<L: ListerWatcher>(
    sim: &SimServer,
    informer: &Informer<L>,
    views: &[Recorder],
) {
    let wall = std::time::Instant::now();
    let mut poll = Poll::default();
    loop {
        if converged(sim, informer, views) {
            return;
        }
        let truth = sim.truth();
        if wall.elapsed() > Duration::from_secs(60) {
            let m = informer.reflector_metrics().map(|m| m.snapshot());
            let handler = views
                .iter()
                .find_map(|v| truth.diff(&v.objects()))
                .unwrap_or_default();
            panic!(
                "informer never converged: store {:?}; a handler: {handler}; store rv {}; \
                 reflector {m:?}; server {:?}",
                truth.diff(&store_view(informer)),
                informer.store().resource_version(),
                sim.stats()
            );
        }
        poll.tick().await;
    }
}

/// `config` for a run of [`churn`]: short watch timeouts (2 s) so a stalled watch is broken
/// within the run, and a short backoff (50–400 ms) so the reflector is back between two
/// disconnects (client-go's grows past the gap between them, and faults would wait for a
/// watch instead of breaking one).
pub fn churn_reflector(config: ReflectorConfig) -> ReflectorConfig {
    config
        .min_watch_timeout(Duration::from_secs(2))
        .backoff(BackoffConfig {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
            ..Default::default()
        })
}

/// `events` random creates, deletes and updates on 100 names in namespace `churn` (a deleted
/// name comes back with a new uid; a live one is deleted with probability `delete_tenths`/10,
/// else updated), with `fault(event, rng)` injected when it gives one and 250 ms of tokio time
/// every 50 events. Returns the keys live at the end.
pub async fn churn(
    sim: &SimServer,
    rng: &mut fastrand::Rng,
    events: u64,
    delete_tenths: u8,
    mut fault: impl FnMut(u64, &mut fastrand::Rng) -> Option<Fault>,
) -> BTreeSet<ObjectKey> {
    let names: Vec<String> = (0..100).map(|i| format!("key-{i:02}")).collect();
    let mut live: Vec<Option<ObjectKey>> = vec![None; 100];
    for event in 1..=events {
        let i = rng.usize(0..100);
        match &live[i] {
            None => live[i] = Some(sim.create("churn", &names[i]).unwrap().key()),
            Some(k) if rng.u8(0..10) < delete_tenths => {
                sim.delete(k).unwrap();
                live[i] = None;
            }
            Some(k) => {
                sim.update(k).unwrap();
            }
        }
        if let Some(f) = fault(event, rng) {
            sim.inject(f);
        }
        if event % 50 == 0 {
            // Let the informer run for a while.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    live.into_iter().flatten().collect()
}

/// The simulator behind a slow link for list pages: every page that continues a list comes
/// `delay` after the previous one, so a `continue` token can expire in between.
pub struct SlowPages {
    pub sim: SimServer,
    pub delay: Duration,
}

impl ListerWatcher for SlowPages {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        if opts.continue_token.is_some() {
            tokio::time::sleep(self.delay).await;
        }
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.sim.watch(opts).await
    }
}
