//! [`Reflector`]: the list/watch state machine, one [`State`] enum and one `step` function,
//! with the resourceVersion bookkeeping and the backoff every phase shares. The phases are in
//! `list.rs`, `watch_list.rs` and `watch.rs`. Upstream: `client-go/tools/cache/reflector.go`
//! (`ListAndWatch`, `relistResourceVersion`, `rewatchResourceVersion`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::object::parse_resource_version;

use super::backoff::Backoff;
use super::config::ReflectorConfig;
use super::error::{ReflectorError, StoreClosed, is_expired};
use super::lister_watcher::ListerWatcher;
use super::metrics::ReflectorMetrics;
use super::store::ReflectorStore;
use super::stream::OpenWatch;

/// A hook told of every error the reflector recovers from (client-go `WatchErrorHandler`).
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// What the state machine does next.
pub(super) enum State<B> {
    /// List everything at this resourceVersion (paginated for `"0"`/`""`), then watch.
    List { resource_version: String },
    /// Stream the state at this resourceVersion or newer (`""`: the most recent) as a
    /// watch with `sendInitialEvents`, then go on with that watch.
    WatchList { resource_version: String },
    /// Open a watch from this resourceVersion.
    Watch { resource_version: String },
    /// Read an open watch until it ends.
    Stream(Box<OpenWatch<B>>),
    /// Wait, then go on with the inner state.
    Backoff {
        delay: Duration,
        then: Box<State<B>>,
    },
}

/// Lists then watches one resource through a [`ListerWatcher`], writing into a
/// [`ReflectorStore`], and recovers from every failure the way client-go does.
///
/// # Phases
/// - **List** (`ListAndWatch` → `list`): the first list asks for `resourceVersion=0` (served
///   from the API server's cache), paginated with `limit`/`continue` (500 a page); a `continue`
///   token that expired (410 on a later page) falls back to one unpaginated list at the same
///   resourceVersion. A relist asks for the last resourceVersion delivered, unpaginated so the
///   API server can serve it from its watch cache (paginated again if the first list came back
///   paginated: that server has no watch cache).
/// - **Streaming list** (`watchList`, when [`ReflectorConfig::use_watch_list`]): a watch with
///   `sendInitialEvents=true&resourceVersionMatch=NotOlderThan` from the last resourceVersion
///   (`""` at first); its ADDED events build the state, which is delivered with `replace` at the
///   bookmark annotated `k8s.io/initial-events-end: "true"`; the same watch then goes on live.
///   A server that rejects it (422 without the WatchList feature) or a stream that fails or ends
///   before that bookmark → list + watch.
/// - **Watch** (`watch`): from the last resourceVersion, `allowWatchBookmarks=true`, a timeout
///   drawn from `[min, 2·min)` (5–10 min), which is also the reflector's own read deadline: a
///   stalled connection is dropped at it. Bookmarks only advance the resourceVersion.
///
/// # Recovery
/// | what happened | next |
/// |---|---|
/// | watch closed by the server, cut (reset), or timed out | watch again from the last resourceVersion, at once |
/// | watch closed within 1 s with no event ("very short watch") | backoff, relist |
/// | ERROR event 410 Expired | backoff, relist at the last resourceVersion (never `""` first) |
/// | ERROR event 429 | backoff (at least `retryAfterSeconds`), watch again |
/// | ERROR event, anything else; bytes that do not decode; frame over the limit | backoff, relist |
/// | opening a watch: connection refused or 429 | backoff (at least `retryAfterSeconds`), watch again |
/// | opening a watch: anything else | backoff, relist |
/// | list: Expired or "too large resource version" (cause or old Timeout message) | list again at once with `""` |
/// | list served older than asked for (a lagging cache) | not applied; list again at once with `""` |
/// | list: anything else | backoff (at least `retryAfterSeconds`), list again |
/// | relist requested ([`with_relist_requests`](Self::with_relist_requests), e.g. `Informer::refilter`) | drop the watch, relist at once |
///
/// A relist request that arrives while the reflector lists, waits for a backoff or opens a
/// watch is kept (the [`Notify`](tokio::sync::Notify) stores it): the reflector relists
/// again before it watches, since what it was listing may predate the request.
///
/// The backoff is client-go's: 800 ms doubling to 30 s, each delay plus up to 100 % jitter,
/// back to 800 ms after 2 min without a failure. Every retry that is not "at once" above waits
/// for it, so no answer of a server can make the reflector spin.
///
/// # Consistency
/// The resourceVersions the reflector passes to its store never go backwards: a list or
/// streaming list served at an older version than the one asked for, or than the last one
/// delivered, is reported ([`ReflectorError::StaleList`]) and not applied; watch events older
/// than the last delivered version do not move it back.
///
/// Differences from client-go, each to make progress where client-go could loop: a streaming
/// list that ends before its end bookmark falls back to list + watch (client-go streams again);
/// a stale list is rejected (client-go applies it).
pub struct Reflector<L: ListerWatcher> {
    pub(super) lw: Arc<L>,
    pub(super) store: Arc<dyn ReflectorStore>,
    pub(super) config: ReflectorConfig,
    pub(super) metrics: Arc<ReflectorMetrics>,
    pub(super) error_handler: Option<WatchErrorHandler>,
    pub(super) backoff: Backoff,
    /// Last resourceVersion delivered to the store ("" before the first list).
    pub(super) last_rv: String,
    /// A list or streaming list at `last_rv` answered Expired/TooLarge/stale: the next one asks
    /// for "" (client-go `isLastSyncResourceVersionUnavailable`).
    pub(super) last_rv_unavailable: bool,
    /// The first list (at "0") came back paginated: the server has no watch cache, so relists
    /// stay paginated (client-go `paginatedResult`).
    pub(super) paginated_result: bool,
    pub(super) rng: fastrand::Rng,
    /// Relist requests (see [`Reflector::with_relist_requests`]).
    pub(super) relist_requests: Option<Arc<tokio::sync::Notify>>,
}

impl<L: ListerWatcher> std::fmt::Debug for Reflector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("last_resource_version", &self.last_rv)
            .field(
                "last_resource_version_unavailable",
                &self.last_rv_unavailable,
            )
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher> Reflector<L> {
    /// A reflector feeding `store` from `lw`. Nothing happens until [`Reflector::run`].
    pub fn new(lw: Arc<L>, store: Arc<dyn ReflectorStore>, config: ReflectorConfig) -> Self {
        let (backoff, rng) = match config.seed {
            Some(seed) => (
                Backoff::with_seed(config.backoff.clone(), seed),
                fastrand::Rng::with_seed(seed.rotate_left(17) ^ 0x5eed),
            ),
            None => (Backoff::new(config.backoff.clone()), fastrand::Rng::new()),
        };
        Reflector {
            lw,
            store,
            backoff,
            config,
            metrics: Arc::default(),
            error_handler: None,
            last_rv: String::new(),
            last_rv_unavailable: false,
            paginated_result: false,
            rng,
            relist_requests: None,
        }
    }

    /// Sets the hook told of every recovered error (client-go `SetWatchErrorHandler`).
    #[must_use]
    pub fn with_error_handler(mut self, handler: WatchErrorHandler) -> Self {
        self.error_handler = Some(handler);
        self
    }

    /// Relists on request: each `notify_one` on `requests` makes the reflector drop its watch
    /// and relist at once, without a backoff (an informer's filter changed its answer and
    /// objects it now keeps must be fetched; client-go has no equivalent). A request made
    /// while no watch is open is kept and honoured before the next watch opens. Counted in
    /// [`ReflectorMetrics::requested_relists`].
    #[must_use]
    pub fn with_relist_requests(mut self, requests: Arc<tokio::sync::Notify>) -> Self {
        self.relist_requests = Some(requests);
        self
    }

    /// Takes a pending relist request, if there is one (never waits).
    pub(super) fn take_relist_request(&self) -> bool {
        use futures_util::FutureExt;
        self.relist_requests
            .as_ref()
            .is_some_and(|r| r.notified().now_or_never().is_some())
    }

    /// Waits for a relist request (forever without [`Reflector::with_relist_requests`]).
    pub(super) async fn relist_requested(requests: Option<&tokio::sync::Notify>) {
        match requests {
            Some(r) => r.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Counts a relist request acted upon and returns where the relist starts.
    pub(super) fn relist_on_request(&self) -> State<L::Body> {
        ReflectorMetrics::inc(&self.metrics.requested_relists);
        tracing::debug!("relist requested");
        self.relist()
    }

    /// The reflector's counters (shared; readable while it runs).
    pub fn metrics(&self) -> Arc<ReflectorMetrics> {
        self.metrics.clone()
    }

    /// The last resourceVersion delivered to the store (client-go `LastSyncResourceVersion`).
    pub fn last_sync_resource_version(&self) -> &str {
        &self.last_rv
    }

    /// Runs until the store closes. Drop the future to stop earlier.
    ///
    /// # Errors
    /// Only [`StoreClosed`]: every other failure is reported to the error handler and
    /// recovered from.
    ///
    /// # Cancel safety
    /// Cancel safe: the store only ever sees whole batches.
    pub async fn run(mut self) -> Result<(), StoreClosed> {
        let mut state = self.relist();
        loop {
            state = self.step(state).await?;
        }
    }

    /// One transition of the state machine.
    async fn step(&mut self, state: State<L::Body>) -> Result<State<L::Body>, StoreClosed> {
        match state {
            State::Backoff { delay, then } => {
                self.metrics.backing_off.store(true, Ordering::Relaxed);
                tokio::time::sleep(delay).await;
                self.metrics.backing_off.store(false, Ordering::Relaxed);
                Ok(*then)
            }
            State::List { resource_version } => self.list(resource_version).await,
            State::WatchList { resource_version } => self.watch_list(resource_version).await,
            // A relist requested meanwhile (during the list, a backoff): what was listed may
            // predate it, so relist before watching.
            State::Watch { .. } if self.take_relist_request() => Ok(self.relist_on_request()),
            State::Watch { resource_version } => Ok(self.watch(resource_version).await),
            State::Stream(open) => self.stream(open).await,
        }
    }

    // ----- resourceVersions --------------------------------------------------------------

    /// Where a (re)list starts: a streaming list or a list, at the right resourceVersion
    /// (client-go: the start of `ListAndWatch`).
    pub(super) fn relist(&self) -> State<L::Body> {
        if self.config.use_watch_list {
            State::WatchList {
                resource_version: self.rewatch_resource_version(),
            }
        } else {
            State::List {
                resource_version: self.relist_resource_version(),
            }
        }
    }

    /// The resourceVersion to list at (client-go `relistResourceVersion`): `""` after the last
    /// one was unavailable, `"0"` before anything was delivered, else the last one.
    pub(super) fn relist_resource_version(&self) -> String {
        if self.last_rv_unavailable {
            String::new()
        } else if self.last_rv.is_empty() {
            "0".to_owned()
        } else {
            self.last_rv.clone()
        }
    }

    /// The resourceVersion to stream a list from (client-go `rewatchResourceVersion`): `""`
    /// (most recent, consistent) at first or after the last one was unavailable.
    fn rewatch_resource_version(&self) -> String {
        if self.last_rv_unavailable {
            String::new()
        } else {
            self.last_rv.clone()
        }
    }

    /// `Some(reason)` when `served` is older than `requested` (a specific version) or than the
    /// last delivered version: delivering it would move the store back in time. Versions that
    /// are not numbers cannot be ordered and pass.
    pub(super) fn goes_back(&self, requested: &str, served: &str) -> bool {
        let Some(served) = parse_resource_version(served) else {
            return false;
        };
        let older_than = |rv: &str| parse_resource_version(rv).is_some_and(|r| served < r);
        older_than(requested) || older_than(&self.last_rv)
    }

    /// Records `rv` as delivered after a list: the caller checked it does not go back.
    pub(super) fn set_listed(&mut self, rv: &str) {
        self.last_rv = rv.to_owned();
        self.last_rv_unavailable = false;
        self.metrics
            .last_resource_version
            .store(parse_resource_version(rv).unwrap_or(0), Ordering::Relaxed);
        if self.metrics.listed.swap(true, Ordering::Relaxed) {
            ReflectorMetrics::inc(&self.metrics.relists);
        }
        ReflectorMetrics::inc(&self.metrics.lists);
    }

    /// `true` when `rv` is older than the last delivered version (both numbers).
    pub(super) fn is_behind(&self, rv: &str) -> bool {
        matches!(
            (parse_resource_version(rv), parse_resource_version(&self.last_rv)),
            (Some(new), Some(old)) if new < old
        )
    }

    /// Records `rv` (from a watch event) unless it would move the resourceVersion backwards.
    pub(super) fn advance(&mut self, rv: &str) {
        if rv.is_empty() || self.is_behind(rv) {
            return;
        }
        let new = parse_resource_version(rv);
        self.last_rv = rv.to_owned();
        self.metrics
            .last_resource_version
            .store(new.unwrap_or(0), Ordering::Relaxed);
    }

    // ----- errors and backoff ------------------------------------------------------------

    pub(super) fn report(&self, err: &ReflectorError) {
        ReflectorMetrics::inc(&self.metrics.errors);
        if err.status().is_some_and(is_expired) {
            ReflectorMetrics::inc(&self.metrics.expired);
            // Routine: a watch or list older than the server keeps (client-go logs it at info).
            tracing::info!(error = %err, "resourceVersion expired; relisting");
        } else {
            tracing::warn!(error = %err, "list/watch failed; retrying after a backoff");
        }
        if let Some(h) = &self.error_handler {
            h(err);
        }
    }

    /// Waits for the backoff (at least `at_least`), then goes on with `then`.
    pub(super) fn backoff_then(
        &mut self,
        then: State<L::Body>,
        at_least: Option<Duration>,
    ) -> State<L::Body> {
        let backoff = self.backoff.failure();
        let delay = at_least.map_or(backoff, |min| backoff.max(min));
        ReflectorMetrics::inc(&self.metrics.backoffs);
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.metrics
            .backoff_wait_us
            .fetch_add(us(delay), Ordering::Relaxed);
        self.metrics
            .retry_after_extra_us
            .fetch_add(us(delay - backoff), Ordering::Relaxed);
        self.metrics
            .backoff_ms
            .store(self.backoff.current().as_millis() as u64, Ordering::Relaxed);
        self.metrics
            .last_backoff_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
        State::Backoff {
            delay,
            then: Box::new(then),
        }
    }
}
