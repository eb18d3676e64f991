//! [`SimServer`]: the handle (objects, changes, flood driver, counters, request log) and its
//! [`ListerWatcher`] implementation.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::SimError;
use super::config::SimConfig;
use super::fault::{ErrorAnswer, Fault};
use super::list::list_page;
use super::request::{RequestKind, SimRequest};
use super::shared::Shared;
use super::state::{Rec, State};
use super::truth::Truth;
use super::watch::SimWatch;
use crate::object::{
    Encoding, GroupVersionKind, Object, ObjectKey, ObjectMetaFields, WatchFormat,
    parse_resource_version,
};
use crate::reflector::{ApiError, ListOptions, ListerWatcher, WatchOptions, WatchResponse};

/// Changes made per lock acquisition by [`SimServer::step`] and [`SimServer::flood`]: watchers
/// get the lock between batches, and are woken once per batch.
const BATCH: u64 = 256;

/// An in-process simulated Kubernetes API server for one resource: objects stamped from real
/// fixtures, one strictly increasing resourceVersion, list pages and watch streams in the real
/// wire format, and a generator of floods of changes (see below for what matches a real
/// server).
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
///
/// # What matches a real API server
///
/// - One resourceVersion counter, strictly increasing across the resource; every create,
///   update and delete takes the next one and stamps it into the object. A DELETED event
///   carries the object's last state with the deletion's resourceVersion.
/// - New objects are real fixtures re-encoded with fresh metadata (name, namespace, uid,
///   labels, resourceVersion, generation, creationTimestamp); every other field keeps the
///   fixture's bytes (or one of a few typed variants of it: [`Templates::pod_states`],
///   [`Templates::deployments`]).
/// - Ownership as in a real cluster, where a Deployment `D` owns a ReplicaSet
///   `D-<pod-template-hash>` that owns the Pods labelled with that hash: Pods (templates with
///   owner references) are labelled `app: app-N` and `pod-template-hash: <hash of N>` and
///   owned by the ReplicaSet `app-N-<hash>` of their namespace; a server of Deployments names
///   its objects `app-N`, at most one per namespace and app, without owners. Two servers with
///   the same seed, `namespaces` and `apps`, one of Pods and one of Deployments, make a
///   consistent cluster (the ReplicaSets in between are not served; a Pod whose Deployment
///   does not exist is an orphan, as after a `kubectl delete --cascade=orphan`).
/// - Lists: `resourceVersion` unset/`""`/`"0"` serve the current state; `N` with
///   `NotOlderThan` (or no match) serves the current state when `N` is not newer, else 504
///   Timeout with cause `ResourceVersionTooLarge`; `Exact` serves the state at `N`, 410
///   Expired once `N` left the history window. `limit`/`continue` page through one
///   consistent snapshot in key order, with `remainingItemCount`; `continue` with a
///   `resourceVersion` other than `""`/`"0"` is a 400; an expired token is a 410 Expired with
///   the upstream message.
/// - Watches: from `N`, every change after `N` in order; `N` older than the history window →
///   an ERROR event 410 Expired `too old resource version: N (oldest)` and the end; `N` newer
///   than the server → 504 `ResourceVersionTooLarge`; `""`/`"0"` → the current state as ADDED
///   events first; `sendInitialEvents` (needs `allowWatchBookmarks`, as upstream validates) →
///   the current state as ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`,
///   then live events; `timeoutSeconds` → a clean end. Bookmarks carry only a resourceVersion.
/// - Error texts and codes are upstream's.
///
/// # What does not
///
/// - No HTTP here ([`crate::server`] serves a simulator over HTTP): requests are method calls,
///   bodies are `Bytes` chunks. Clients' writes ([`SimServer::create_object`],
///   [`SimServer::replace_object`], [`SimServer::delete_object`]) follow a real server's rules
///   but run no admission, honour no grace period or finalizer (deletes are immediate) and
///   keep the `managedFields` they are given.
/// - Label and field selectors are rejected with 400 rather than evaluated ([`crate::server`]
///   evaluates them over HTTP).
/// - Servers are independent: deleting a Deployment does not delete its Pods, and a flood
///   update changes a label and `generation` (with [`SimConfig::update_template`], also the
///   template: a Pod's readiness, a Deployment's replicas), never a Deployment's Pods.
/// - resourceVersions are consecutive (a real etcd revision is shared by every resource, so
///   it jumps); bookmarks come every [`SimConfig::bookmark_every`] resourceVersions and every
///   [`SimConfig::bookmark_interval`], not about once a minute.
/// - `continue` tokens stay valid while their resourceVersion is in the history window (or
///   until [`SimConfig::continue_ttl`]), not until an etcd compaction; an expired token does
///   not come with a fresh inconsistent-continue token.
/// - The watch cache window counts events, not time; a lagging watcher gets an ERROR 410 event
///   (a real server closes it and its next watch gets the 410). With
///   [`SimConfig::flow_control`] history is never dropped under a watcher, which no real
///   server does: it is for floods that must not relist.
/// - Streaming lists are answered from the current state only (no `NotOlderThan` wait).
///
/// # Misbehaving on demand
///
/// Every situation the reflector's recovery rules are about can be produced, deterministically
/// (same seed, same calls, same bytes):
///
/// - one-shot [`Fault`]s armed with [`SimServer::inject`]: the next list or watch answered with
///   410, 429 with `retryAfterSeconds`, 500, "too large resource version" in the current form
///   (the `ResourceVersionTooLarge` cause) or the legacy one (a Timeout message), or a refused
///   connection ([`ErrorAnswer`]); the next watch stream, after N more events, closing, sending
///   an ERROR 410 event, a corrupt frame, an oversized frame, stalling (no byte, no end: only
///   the client's own deadline breaks it) or breaking with a reset ([`StreamFault`]). Faults
///   have a text form (`watch:429:3`, `stream:stall@100`) for command lines and control
///   endpoints, and [`Fault::catalogue`] lists one of each;
/// - standing switches in [`SimConfig`]: every watch closing after N events
///   ([`SimConfig::watch_close_after`]), a list cache lagging behind
///   ([`SimConfig::list_lag`]: serves older state than asked for unless asked for `""`),
///   `continue` tokens expiring ([`SimConfig::continue_ttl`]), a small watch window
///   ([`SimConfig::history_window`]), bookmarks every N events or T seconds, watch-list support
///   off ([`SimConfig::watch_list`]);
/// - the request log ([`SimServer::requests`]) shows what a client asked for and when, on
///   tokio's clock (exact under paused time): which resourceVersion a relist used, how long a
///   retry waited.
///
/// [`Templates::pod_states`]: super::Templates::pod_states
/// [`Templates::deployments`]: super::Templates::deployments
/// [`ErrorAnswer`]: super::ErrorAnswer
/// [`StreamFault`]: super::StreamFault
#[derive(Clone)]
pub struct SimServer {
    pub(super) shared: Arc<Shared>,
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
                drive: watch::channel(super::drive_state::DriveState::default()).0,
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

    /// The objects as they were at `rv`; `None` when `rv` is outside the history window.
    #[cfg(feature = "server")]
    pub(crate) fn objects_at(&self, rv: u64) -> Option<Vec<Arc<Object>>> {
        let items = self.shared.lock().items_at(&self.shared.cfg, rv)?;
        Some(items.iter().map(|(_, r)| object_of(r)).collect())
    }

    pub(super) fn change<T>(
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
        change: impl FnOnce(&mut ObjectMetaFields),
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
}

/// The decoded object of a stored version. Stored wire forms were encoded by this server and
/// decode; a failure would be a bug in the simulator's encoder, so it panics.
fn object_of(rec: &Rec) -> Arc<Object> {
    rec.object()
        .unwrap_or_else(|e| panic!("simulator encoded an undecodable object: {e}"))
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
        let fault = self.shared.lock().faults.take_list(opts);
        let result = match fault {
            Some(answer) => {
                Err(self.answer(answer, opts.resource_version.as_deref().unwrap_or("")))
            }
            None => list_page(&self.shared, opts),
        };
        let logged = result.as_ref().map(|(_, rv)| *rv).map_err(Clone::clone);
        self.log(RequestKind::List(opts.clone()), at, logged);
        result.map(|(body, _)| body)
    }

    /// Opens a watch; see [`SimWatch`] for the stream. An injected [`Fault::Watch`] answers
    /// instead. Every request goes to the request log.
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        let at = self.since_start();
        let fault = self.shared.lock().faults.take_watch(opts);
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
