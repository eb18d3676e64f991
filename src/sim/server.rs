//! [`SimServer`]: the handle (objects, changes, flood driver, truth) and its list endpoint.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::SimError;
use super::codec::Codec;
use super::config::SimConfig;
use super::fault::{ErrorAnswer, Fault};
use super::request::{RequestKind, SimRequest};
use super::state::{Item, Rec, State};
use super::status;
use super::watch::SimWatch;
use crate::object::{
    Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta, WatchFormat, encode_list_json,
    encode_list_protobuf, parse_resource_version,
};
use crate::reflector::{ApiError, ListOptions, ListerWatcher, WatchOptions, WatchResponse};

/// Changes made per lock acquisition by [`SimServer::step`] and [`SimServer::flood`]: watchers
/// get the lock between batches, and are woken once per batch.
const BATCH: u64 = 256;

/// State shared by the server handle and its watch bodies.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: SimConfig,
    pub(crate) codec: Arc<Codec>,
    pub(crate) list_gvk: GroupVersionKind,
    pub(crate) state: Mutex<State>,
    /// The current resourceVersion, published after each batch of changes: watchers wait on
    /// it.
    pub(crate) rv_tx: watch::Sender<u64>,
    /// Woken when a watcher advances or closes, while a flood driver waits for it.
    pub(crate) progress: Notify,
    /// Flood drivers waiting on `progress`.
    pub(crate) producers_waiting: AtomicUsize,
    /// Total time flood drivers spent waiting for watchers, microseconds.
    pub(crate) flood_wait_us: AtomicU64,
    /// Time origin of `continue` tokens.
    pub(crate) epoch: Instant,
    /// Counter for per-watch random seeds (chunk cuts).
    pub(crate) watches_opened: AtomicU64,
    /// Stream faults waiting in `State::faults`: lets watches skip the lock when there are
    /// none. Incremented before the wake-up that [`SimServer::inject`] sends through `rv_tx`,
    /// so a watch woken by it sees the increment (the channel orders them); a watch that reads
    /// 0 just misses the fault until its next look.
    pub(crate) stream_faults: AtomicUsize,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes flood drivers waiting for watchers (cheap when none waits).
    pub(crate) fn watcher_progressed(&self) {
        if self.producers_waiting.load(Ordering::SeqCst) > 0 {
            self.progress.notify_waiters();
        }
    }

    pub(crate) fn watch_format(&self) -> WatchFormat {
        match self.cfg.templates.encoding() {
            Encoding::Protobuf => WatchFormat::Protobuf,
            Encoding::Json => WatchFormat::Json,
        }
    }
}

/// An in-process simulated Kubernetes API server for one resource: objects stamped from real
/// fixtures, one strictly increasing resourceVersion, list pages and watch streams in the real
/// wire format, and a generator of floods of changes. See the [module docs](super) for what
/// matches a real server.
///
/// A cheap-to-clone handle (`Send + Sync`); every clone is the same server.
///
/// # Examples
///
/// ```
/// use informer::reflector::{ListOptions, ListerWatcher};
/// use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let templates = Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap();
/// let sim = SimServer::new(SimConfig::new(templates).seed(7).target_objects(10)).unwrap();
/// sim.step(25).unwrap();
/// let page = sim.list(&ListOptions::default()).await.unwrap();
/// let list = informer::object::decode_list(page).unwrap();
/// assert_eq!(list.items.len(), sim.truth().objects.len());
/// assert_eq!(list.resource_version, sim.resource_version().to_string());
/// # });
/// ```
#[derive(Clone)]
pub struct SimServer {
    shared: Arc<Shared>,
}

/// The server's state at one resourceVersion, for verifying a client's view.
#[derive(Clone)]
pub struct Truth {
    /// The resourceVersion this state is at (of the last change).
    pub resource_version: u64,
    /// Every object, by key.
    pub objects: BTreeMap<ObjectKey, Arc<Object>>,
}

impl Truth {
    /// `key → (uid, resourceVersion)`: enough to compare with a cache.
    pub fn versions(&self) -> BTreeMap<ObjectKey, (String, String)> {
        self.objects
            .iter()
            .map(|(k, o)| {
                (
                    k.clone(),
                    (o.uid().to_owned(), o.resource_version().to_owned()),
                )
            })
            .collect()
    }

    /// Compares a client's view (`key → (uid, resourceVersion)`, e.g. a store or a handler's
    /// rebuilt state) with this truth. `None` when equal; otherwise a one-line description:
    /// counts of missing, extra and stale keys with one example of each.
    pub fn diff(&self, got: &BTreeMap<ObjectKey, (String, String)>) -> Option<String> {
        diff_views(&self.versions(), got, self.resource_version)
    }
}

/// Compares two views `key → (uid, resourceVersion)`: `None` when `got` equals `expected`;
/// otherwise a one-line description (sizes, `rv` the expected view reflects, counts of
/// missing, extra and stale keys with one example of each). [`Truth::diff`] uses it; so can
/// a client that computed its expected view another way (e.g. from a recorded trace).
pub fn diff_views(
    expected: &BTreeMap<ObjectKey, (String, String)>,
    got: &BTreeMap<ObjectKey, (String, String)>,
    rv: u64,
) -> Option<String> {
    if got == expected {
        return None;
    }
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(*k)).collect();
    let stale: Vec<_> = expected
        .iter()
        .filter_map(|(k, v)| got.get(k).filter(|g| *g != v).map(|g| (k, g, v)))
        .collect();
    Some(format!(
        "{} objects, expected {} at resourceVersion {rv}; {} missing (e.g. {:?}), {} extra \
         (e.g. {:?}), {} stale (e.g. {:?})",
        got.len(),
        expected.len(),
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first(),
        stale.len(),
        stale.first()
    ))
}

impl fmt::Debug for Truth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Truth")
            .field("resource_version", &self.resource_version)
            .field("objects", &self.objects.len())
            .finish()
    }
}

/// Counters of a running server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Current resourceVersion.
    pub resource_version: u64,
    /// Changes made (creates, updates, deletes).
    pub events: u64,
    /// Objects that exist.
    pub objects: usize,
    /// Events in the history window.
    pub history: usize,
    /// The oldest resourceVersion a watch can start from.
    pub oldest_resource_version: u64,
    /// Open watches.
    pub watchers: usize,
    /// Injected faults that have not fired yet.
    pub faults_pending: usize,
    /// Injected faults that fired.
    pub faults_fired: u64,
    /// Total time [`SimServer::flood`] waited for a lagging watcher (flow control), in
    /// microseconds.
    pub flood_wait_us: u64,
}

impl fmt::Debug for SimServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimServer")
            .field("gvk", &self.shared.cfg.templates.gvk().to_string())
            .field("stats", &self.stats())
            .finish()
    }
}

impl SimServer {
    /// Builds a server and creates [`SimConfig::initial_objects`] objects.
    ///
    /// # Errors
    /// [`SimError::Encode`] if an object cannot be encoded (not for templates built by
    /// [`super::Templates`]).
    pub fn new(config: SimConfig) -> Result<Self, SimError> {
        let gvk = config.templates.gvk();
        let list_gvk =
            GroupVersionKind::new(&gvk.group, &gvk.version, &format!("{}List", gvk.kind));
        let state = State::new(&config)?;
        let codec = state.codec.clone();
        let (rv_tx, _) = watch::channel(state.rv);
        // A server of Deployments cannot hold more than one per namespace and app.
        let initial = config.initial_objects.min(super::state::capacity(&config));
        let sim = SimServer {
            shared: Arc::new(Shared {
                cfg: config,
                codec,
                list_gvk,
                state: Mutex::new(state),
                rv_tx,
                progress: Notify::new(),
                producers_waiting: AtomicUsize::new(0),
                flood_wait_us: AtomicU64::new(0),
                epoch: Instant::now(),
                watches_opened: AtomicU64::new(0),
                stream_faults: AtomicUsize::new(0),
            }),
        };
        if initial > 0 {
            let mut st = sim.shared.lock();
            let cfg = &sim.shared.cfg;
            let mix = cfg.mix;
            let cfg_ramp = SimConfig {
                mix: super::FloodMix {
                    target_objects: initial,
                    ..mix
                },
                ..cfg.clone()
            };
            while st.objects.len() < initial {
                st.random_step(&cfg_ramp)?;
            }
            let rv = st.rv;
            drop(st);
            sim.shared.rv_tx.send_replace(rv);
        }
        Ok(sim)
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.shared.cfg
    }

    /// The kind served.
    pub fn gvk(&self) -> &Arc<GroupVersionKind> {
        self.shared.cfg.templates.gvk()
    }

    /// The encoding of lists and watch events (the templates' encoding).
    pub fn encoding(&self) -> Encoding {
        self.shared.cfg.templates.encoding()
    }

    /// The framing of watch streams.
    pub fn watch_format(&self) -> WatchFormat {
        self.shared.watch_format()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        let st = self.shared.lock();
        SimStats {
            resource_version: st.rv,
            events: st.events,
            objects: st.objects.len(),
            history: st.log.len(),
            oldest_resource_version: st.compacted,
            watchers: st.watcher_count(),
            faults_pending: st.faults.pending(),
            faults_fired: st.faults.fired,
            flood_wait_us: self.shared.flood_wait_us.load(Ordering::Relaxed),
        }
    }

    /// Arms a one-shot fault (see [`Fault`]): it fires on the next list, the next watch, or the
    /// next watch stream to send, and is counted in [`SimStats::faults_fired`]. Faults of one
    /// kind fire in the order injected. Open watches are woken, so a stream fault with
    /// `after_events: 0` fires without waiting for a change.
    pub fn inject(&self, fault: Fault) {
        self.shared.lock().faults.push(fault);
        if let Fault::Stream { .. } = fault {
            self.shared.stream_faults.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.rv_tx.send_modify(|_| {});
    }

    /// The request log, oldest first (the last [`SimConfig::request_log`] requests).
    pub fn requests(&self) -> Vec<SimRequest> {
        self.shared.lock().requests.iter().cloned().collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    fn since_start(&self) -> std::time::Duration {
        Instant::now().saturating_duration_since(self.shared.epoch)
    }

    /// The error an injected answer gives a request for `requested`.
    fn answer(&self, answer: ErrorAnswer, requested: &str) -> ApiError {
        let st = self.shared.lock();
        let requested = parse_resource_version(requested).unwrap_or(st.rv);
        answer.to_error(
            requested,
            st.rv,
            st.compacted + 1,
            self.shared.cfg.too_large_retry_after,
        )
    }

    fn log(&self, kind: RequestKind, at: std::time::Duration, answer: Result<u64, ApiError>) {
        let cfg = &self.shared.cfg;
        if cfg.request_log > 0 {
            self.shared
                .lock()
                .log_request(cfg, SimRequest { at, kind, answer });
        }
    }

    /// The current state and its resourceVersion (a copy of the key → `Arc` map; objects are
    /// shared, not copied).
    ///
    /// # Panics
    /// If a stored object does not decode (the simulator only stores what it encoded).
    pub fn truth(&self) -> Truth {
        let (rv, items) = {
            let st = self.shared.lock();
            (st.rv, st.current_items())
        };
        Truth {
            resource_version: rv,
            objects: items
                .iter()
                .map(|(k, r)| (k.clone(), object_of(r)))
                .collect(),
        }
    }

    /// The current object at `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        let rec = self.shared.lock().objects.get(key).cloned();
        rec.map(|r| object_of(&r))
    }

    fn change<T>(
        &self,
        f: impl FnOnce(&mut State, &SimConfig) -> Result<T, SimError>,
    ) -> Result<T, SimError> {
        let mut st = self.shared.lock();
        let r = f(&mut st, &self.shared.cfg);
        let rv = st.rv;
        drop(st);
        self.shared.rv_tx.send_replace(rv);
        r
    }

    /// Creates `namespace/name` (namespace ignored for cluster-scoped templates) from a
    /// random template, with generated labels; returns it as stored.
    ///
    /// # Errors
    /// [`SimError::AlreadyExists`].
    pub fn create(&self, namespace: &str, name: &str) -> Result<Arc<Object>, SimError> {
        self.change(|st, cfg| st.create(cfg, namespace, name))
            .map(|r| object_of(&r))
    }

    /// Updates `key` as the flood does (a new `version` label, `generation` + 1).
    ///
    /// # Errors
    /// [`SimError::NotFound`].
    pub fn update(&self, key: &ObjectKey) -> Result<Arc<Object>, SimError> {
        self.change(|st, cfg| st.relabel(cfg, key))
            .map(|r| object_of(&r))
    }

    /// Updates `key` with `change` applied to a copy of its metadata (name and namespace
    /// cannot change; `generation` + 1 and the resourceVersion are set after `change`).
    ///
    /// # Errors
    /// [`SimError::NotFound`].
    pub fn update_with(
        &self,
        key: &ObjectKey,
        change: impl FnOnce(&mut ObjectMeta),
    ) -> Result<Arc<Object>, SimError> {
        self.change(|st, cfg| st.update_meta(cfg, key, change))
            .map(|r| object_of(&r))
    }

    /// Deletes `key`; returns the last state as the DELETED event carries it (with the
    /// deletion's resourceVersion).
    ///
    /// # Errors
    /// [`SimError::NotFound`].
    pub fn delete(&self, key: &ObjectKey) -> Result<Arc<Object>, SimError> {
        self.change(|st, cfg| st.delete(cfg, key))
            .map(|r| object_of(&r))
    }

    /// Makes `n` generated changes (see [`super::FloodMix`]) and returns the resourceVersion
    /// after them. Never waits: with flow control on, history that watchers still need is
    /// kept (the window grows) instead; [`SimServer::flood`] is the driver that waits.
    ///
    /// # Errors
    /// [`SimError::Encode`] (not for templates built by [`super::Templates`]).
    pub fn step(&self, n: u64) -> Result<u64, SimError> {
        let mut left = n;
        let mut rv = 0;
        while left > 0 {
            let b = left.min(BATCH);
            rv = self.change(|st, cfg| {
                for _ in 0..b {
                    st.random_step(cfg)?;
                }
                Ok(st.rv)
            })?;
            left -= b;
        }
        if n == 0 {
            rv = self.resource_version();
        }
        Ok(rv)
    }

    /// Makes `n` generated changes, yielding to the runtime between batches so that watchers
    /// run, and returns the resourceVersion after them. With [`SimConfig::flow_control`], waits
    /// before each batch while the slowest open watcher (or a lingering list/closed watch) is
    /// more than [`SimConfig::history_window`] events behind: no watcher ever gets 410, at the
    /// cost of the flood running at the slowest watcher's pace.
    ///
    /// # Errors
    /// As [`SimServer::step`].
    ///
    /// # Cancel safety
    /// Cancel safe: changes are made in whole batches; a cancelled flood has made some of them.
    pub async fn flood(&self, n: u64) -> Result<u64, SimError> {
        let mut left = n;
        let mut rv = self.resource_version();
        while left > 0 {
            if self.shared.cfg.flow_control {
                self.wait_for_watchers().await;
            }
            let b = left.min(BATCH);
            rv = self.step(b)?;
            left -= b;
            tokio::task::yield_now().await;
        }
        Ok(rv)
    }

    /// Waits until the slowest watcher is within the history window.
    async fn wait_for_watchers(&self) {
        let shared = &self.shared;
        shared.producers_waiting.fetch_add(1, Ordering::SeqCst);
        let window = shared.cfg.history_window as u64;
        let start = Instant::now();
        loop {
            let notified = shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (lag, expiry) = shared.lock().lag(Instant::now());
            if lag <= window {
                break;
            }
            match expiry {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
        shared.producers_waiting.fetch_sub(1, Ordering::SeqCst);
        let waited = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        shared.flood_wait_us.fetch_add(waited, Ordering::Relaxed);
    }

    /// Serves one list page (see [`ListerWatcher::list`]) and the resourceVersion it is at.
    fn list_page(&self, opts: &ListOptions) -> Result<(Bytes, u64), ApiError> {
        let shared = &self.shared;
        let cfg = &shared.cfg;
        if let Some(s) = status::reject_selectors(
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        ) {
            return Err(ApiError::Status(s));
        }
        let limit = opts
            .limit
            .filter(|&l| l > 0)
            .map(|l| cfg.max_page_size.map_or(l, |m| l.min(m)) as usize);
        let rv_param = opts.resource_version.as_deref().unwrap_or("");
        let now = Instant::now();

        // Which snapshot, from which key on.
        let (rv, items, after) =
            if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
                if !rv_param.is_empty() && rv_param != "0" {
                    return Err(ApiError::Status(status::bad_request(
                        "specifying resource version is not allowed when using continue",
                    )));
                }
                let (rv, issued_ms, after) = parse_continue(token).ok_or_else(|| {
                    ApiError::Status(status::bad_request(format!(
                        "invalid continue token {token:?}"
                    )))
                })?;
                if let Some(ttl) = cfg.continue_ttl {
                    let issued = shared.epoch + std::time::Duration::from_millis(issued_ms);
                    if now.saturating_duration_since(issued) > ttl {
                        return Err(ApiError::Status(status::continue_expired()));
                    }
                }
                let mut st = shared.lock();
                if rv > st.rv {
                    return Err(ApiError::Status(status::bad_request(format!(
                        "invalid continue token {token:?}"
                    ))));
                }
                let items = st
                    .items_at(cfg, rv)
                    .ok_or_else(|| ApiError::Status(status::continue_expired()))?;
                (rv, items, Some(after))
            } else {
                let exact = opts.resource_version_match.as_deref() == Some("Exact");
                let requested =
                    match rv_param {
                        "" | "0" if !exact => None,
                        s => Some(parse_resource_version(s).filter(|&v| v > 0).ok_or_else(
                            || {
                                ApiError::Status(status::bad_request(format!(
                                    "invalid resource version {s:?}"
                                )))
                            },
                        )?),
                    };
                let mut st = shared.lock();
                match requested {
                    Some(r) if r > st.rv => {
                        return Err(ApiError::Status(status::too_large(
                            r,
                            st.rv,
                            cfg.too_large_retry_after,
                        )));
                    }
                    Some(r) if exact => {
                        let items = st.items_at(cfg, r).ok_or_else(|| {
                            ApiError::Status(status::too_old(r, st.compacted + 1))
                        })?;
                        (r, items, None)
                    }
                    _ if cfg.list_lag > 0 && !rv_param.is_empty() => {
                        // A lagging cache serves "0" and "N" from its older state, even when
                        // that is older than N (the fault); "" is a quorum read.
                        let rv = st.rv.saturating_sub(cfg.list_lag).max(st.compacted);
                        if cfg.flow_control {
                            st.hold(rv, now + cfg.linger);
                        }
                        let items = st.items_at(cfg, rv).ok_or_else(|| {
                            ApiError::Status(status::too_old(rv, st.compacted + 1))
                        })?;
                        (rv, items, None)
                    }
                    _ => {
                        let rv = st.rv;
                        if cfg.flow_control {
                            st.hold(rv, now + cfg.linger);
                        }
                        match limit {
                            Some(l) if st.objects.len() > l => {
                                let items = st.current_items();
                                st.cache_snapshot(cfg, rv, items.clone());
                                (rv, items, None)
                            }
                            _ => (rv, st.current_items(), None),
                        }
                    }
                }
            };

        // The page.
        let start = match &after {
            Some(k) => items.partition_point(|(key, _)| key.as_str() <= k.as_str()),
            None => 0,
        };
        let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
        let objects = items[start..end]
            .iter()
            .map(|(_, r)| r.object())
            .collect::<Result<Vec<_>, _>>()?;
        let page: Vec<&Object> = objects.iter().map(|o| &**o).collect();
        let remaining = items.len() - end;
        let (token, remaining) = if remaining > 0 {
            let issued_ms = match &after {
                // Later pages keep the first page's issue time.
                Some(_) => opts
                    .continue_token
                    .as_deref()
                    .and_then(parse_continue)
                    .map_or(0, |t| t.1),
                None => now.saturating_duration_since(shared.epoch).as_millis() as u64,
            };
            let last: &Item = &items[end - 1];
            (
                make_continue(rv, issued_ms, &last.0),
                Some(remaining as i64),
            )
        } else {
            (String::new(), None)
        };
        let rv_s = rv.to_string();
        let body = match cfg.templates.encoding() {
            Encoding::Protobuf => {
                encode_list_protobuf(&shared.list_gvk, &rv_s, &token, remaining, &page)
            }
            Encoding::Json => encode_list_json(&shared.list_gvk, &rv_s, &token, remaining, &page)?,
        };
        Ok((body, rv))
    }
}

/// The decoded object of a stored version. Stored wire forms were encoded by this server and
/// decode; a failure would be a bug in the simulator's encoder, so it panics.
fn object_of(rec: &Rec) -> Arc<Object> {
    rec.object()
        .unwrap_or_else(|e| panic!("simulator encoded an undecodable object: {e}"))
}

/// `continue` token: `<rv>.<issued ms>.<hex of the last key>` (opaque to clients, URL-safe).
fn make_continue(rv: u64, issued_ms: u64, last: &ObjectKey) -> String {
    let mut s = format!("{rv}.{issued_ms}.");
    for b in last.as_str().bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_continue(token: &str) -> Option<(u64, u64, ObjectKey)> {
    let mut parts = token.splitn(3, '.');
    let rv = parts.next()?.parse().ok()?;
    let issued = parts.next()?.parse().ok()?;
    let hex = parts.next()?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = hex
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect();
    let key = String::from_utf8(bytes?).ok()?;
    Some((rv, issued, ObjectKey::from_raw(&key)))
}

impl ListerWatcher for SimServer {
    type Body = SimWatch;

    /// One list page, with real list semantics: `resourceVersion` `""`/`"0"` (or unset) =
    /// current state; `N` = current state if `N` ≤ current (`NotOlderThan`), else 504
    /// `ResourceVersionTooLarge`; `resourceVersionMatch=Exact` = the state at `N` (410 Expired
    /// once `N` left the history window). `limit` + `continue` page through one consistent
    /// snapshot; an expired token answers 410 Expired.
    ///
    /// An injected [`Fault::List`] answers instead; [`SimConfig::list_lag`] serves older
    /// state. Every request goes to the request log.
    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let at = self.since_start();
        let fault = self.shared.lock().faults.take_list();
        let result = match fault {
            Some(answer) => {
                Err(self.answer(answer, opts.resource_version.as_deref().unwrap_or("")))
            }
            None => self.list_page(opts),
        };
        let logged = result.as_ref().map(|(_, rv)| *rv).map_err(Clone::clone);
        self.log(RequestKind::List(opts.clone()), at, logged);
        result.map(|(body, _)| body)
    }

    /// Opens a watch; see [`SimWatch`] for the stream. An injected [`Fault::Watch`] answers
    /// instead. Every request goes to the request log.
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        let at = self.since_start();
        let fault = self.shared.lock().faults.take_watch();
        let result = match fault {
            Some(answer) => Err(self.answer(answer, &opts.resource_version)),
            None => SimWatch::open(self.shared.clone(), opts),
        };
        let logged = result.as_ref().map(SimWatch::start).map_err(Clone::clone);
        self.log(RequestKind::Watch(opts.clone()), at, logged);
        Ok(WatchResponse {
            format: self.shared.watch_format(),
            body: result?,
        })
    }
}
