//! Shared by the reflector, fault and pipeline tests: fixture templates, a recording
//! [`ReflectorStore`] that mirrors what a reflector delivers, a recording event handler, and
//! waits that work on paused tokio time.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::reflector::{
    ApiError, ListOptions, ListerWatcher, Reflector, ReflectorConfig, ReflectorError,
    ReflectorMetrics, ReflectorStore, StoreClosed, WatchChange, WatchOptions, WatchResponse,
};
use informer::sim::{SimServer, SimWatch, Templates, default_fixtures_dir};
use informer::{HandlerOptions, Informer, InformerConfig};

/// `key → (uid, resourceVersion)`: what a view of the objects is compared on.
pub type ViewMap = BTreeMap<ObjectKey, (String, String)>;

pub fn version(o: &Object) -> (String, String) {
    (o.uid().to_owned(), o.resource_version().to_owned())
}

pub fn templates(name: &str) -> Templates {
    let dir = default_fixtures_dir().unwrap();
    match name {
        "head" => Templates::head_pod(&dir),
        "etcd" => Templates::etcd_pod(&dir),
        "json" => Templates::openshift_json(&dir),
        _ => Templates::protobuf_pods(&dir),
    }
    .unwrap()
}

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
    /// Every numeric resourceVersion handed over, in order (replace, each change, bookmark).
    pub rvs: Vec<u64>,
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
        st.objects = items.iter().map(|o| (o.key(), version(o))).collect();
        st.calls.push(Call::Replace {
            rv: resource_version.to_owned(),
            items: items.len(),
        });
        st.rvs.extend(parse_resource_version(resource_version));
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        let mut st = self.0.lock().unwrap();
        st.calls.push(Call::Apply {
            changes: changes.len(),
        });
        for c in changes {
            let o = c.object();
            st.rvs.extend(parse_resource_version(o.resource_version()));
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
        st.rvs.extend(parse_resource_version(resource_version));
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
pub struct Poll(u32);

impl Poll {
    pub async fn tick(&mut self) {
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

// ----- informer-level helpers -------------------------------------------------------------

/// One notification as a handler saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    Add {
        key: ObjectKey,
        rv: String,
        initial: bool,
    },
    Update {
        key: ObjectKey,
        old_rv: String,
        new_rv: String,
    },
    Delete {
        key: ObjectKey,
        tombstone: bool,
    },
}

/// What a handler learned: its rebuilt view and every notification, in order.
#[derive(Default)]
pub struct View {
    pub objects: ViewMap,
    pub seen: Vec<Seen>,
}

/// A handler that rebuilds the objects from its notifications and checks each one against what
/// it had: an add never hits a key it has, an update's old state is what it had, a delete
/// removes a key it has.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<View>>);

impl Recorder {
    pub fn objects(&self) -> ViewMap {
        self.0.lock().unwrap().objects.clone()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().seen.clone()
    }

    pub fn clear_seen(&self) {
        self.0.lock().unwrap().seen.clear();
    }
}

impl EventHandler for Recorder {
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool) {
        let mut v = self.0.lock().unwrap();
        let prev = v.objects.insert(obj.key(), version(obj));
        assert!(prev.is_none(), "add of {} which the handler had", obj.key());
        v.seen.push(Seen::Add {
            key: obj.key(),
            rv: obj.resource_version().to_owned(),
            initial: is_in_initial_list,
        });
    }

    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        let mut v = self.0.lock().unwrap();
        assert_eq!(old.key(), new.key());
        let prev = v.objects.insert(new.key(), version(new));
        assert_eq!(
            prev,
            Some(version(old)),
            "update's old state is what the handler had"
        );
        v.seen.push(Seen::Update {
            key: new.key(),
            old_rv: old.resource_version().to_owned(),
            new_rv: new.resource_version().to_owned(),
        });
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        let mut v = self.0.lock().unwrap();
        let had = v.objects.remove(&obj.key());
        assert!(had.is_some(), "delete of unknown {}", obj.key());
        // A tombstone (a deletion found by a relist) carries the last state the handler was
        // given for that key (client-go `DeletedFinalStateUnknown.Obj`); a watch DELETED event
        // carries the object's final state, which is newer.
        if obj.is_tombstone() {
            assert_eq!(
                had,
                Some(version(obj.object())),
                "tombstone of {} carries the last known object",
                obj.key()
            );
        }
        v.seen.push(Seen::Delete {
            key: obj.key(),
            tombstone: obj.is_tombstone(),
        });
    }
}

/// An informer over `lw` with `handlers` recorders, started on the current runtime.
pub fn start_informer<L: ListerWatcher>(
    lw: L,
    reflector: ReflectorConfig,
    handlers: usize,
) -> (Informer<L>, Vec<Recorder>) {
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector,
            ..Default::default()
        },
    );
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

pub fn store_view<L: ListerWatcher>(informer: &Informer<L>) -> ViewMap {
    informer
        .store()
        .snapshot()
        .iter()
        .map(|(k, o)| (k.clone(), version(o)))
        .collect()
}

/// `true` when the informer's store and every handler's view equal the server's current
/// state (handlers flushed first).
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

/// A counter shared with a closure.
pub fn counter() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
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
