//! The reflector's list/watch state machine: one [`State`] enum and one `step` function.
//! Upstream: `client-go/tools/cache/reflector.go` (`ListAndWatch`, `list`, `watchList`,
//! `watch`, `handleAnyWatch`, `relistResourceVersion`, `rewatchResourceVersion`) and
//! `tools/pager/pager.go`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::object::{
    ApiStatus, Object, ObjectKey, WatchEvent, decode_list, parse_resource_version,
};

use super::backoff::Backoff;
use super::config::ReflectorConfig;
use super::error::{
    ReflectorError, StoreClosed, is_expired, is_too_many_requests, is_version_unavailable,
    is_watch_retriable, retry_after,
};
use super::lister_watcher::{ApiError, ListOptions, ListerWatcher, WatchOptions};
use super::metrics::ReflectorMetrics;
use super::store::{ReflectorStore, WatchChange};
use super::stream::{End, OpenWatch, Received};

/// The annotation on the bookmark that ends a streaming initial list
/// (`metav1.InitialEventsAnnotationKey`).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A hook told of every error the reflector recovers from (client-go `WatchErrorHandler`).
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// What the state machine does next.
enum State<B> {
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
    lw: Arc<L>,
    store: Arc<dyn ReflectorStore>,
    config: ReflectorConfig,
    metrics: Arc<ReflectorMetrics>,
    error_handler: Option<WatchErrorHandler>,
    backoff: Backoff,
    /// Last resourceVersion delivered to the store ("" before the first list).
    last_rv: String,
    /// A list or streaming list at `last_rv` answered Expired/TooLarge/stale: the next one asks
    /// for "" (client-go `isLastSyncResourceVersionUnavailable`).
    last_rv_unavailable: bool,
    /// The first list (at "0") came back paginated: the server has no watch cache, so relists
    /// stay paginated (client-go `paginatedResult`).
    paginated_result: bool,
    rng: fastrand::Rng,
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
        }
    }

    /// Sets the hook told of every recovered error (client-go `SetWatchErrorHandler`).
    #[must_use]
    pub fn with_error_handler(mut self, handler: WatchErrorHandler) -> Self {
        self.error_handler = Some(handler);
        self
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
            State::Watch { resource_version } => Ok(self.watch(resource_version).await),
            State::Stream(open) => self.stream(open).await,
        }
    }

    // ----- resourceVersions --------------------------------------------------------------

    /// Where a (re)list starts: a streaming list or a list, at the right resourceVersion
    /// (client-go: the start of `ListAndWatch`).
    fn relist(&self) -> State<L::Body> {
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
    fn relist_resource_version(&self) -> String {
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
    fn goes_back(&self, requested: &str, served: &str) -> bool {
        let Some(served) = parse_resource_version(served) else {
            return false;
        };
        let older_than = |rv: &str| parse_resource_version(rv).is_some_and(|r| served < r);
        older_than(requested) || older_than(&self.last_rv)
    }

    /// Records `rv` as delivered after a list: the caller checked it does not go back.
    fn set_listed(&mut self, rv: &str) {
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
    fn is_behind(&self, rv: &str) -> bool {
        matches!(
            (parse_resource_version(rv), parse_resource_version(&self.last_rv)),
            (Some(new), Some(old)) if new < old
        )
    }

    /// Records `rv` (from a watch event) unless it would move the resourceVersion backwards.
    fn advance(&mut self, rv: &str) {
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

    fn report(&self, err: &ReflectorError) {
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
    fn backoff_then(&mut self, then: State<L::Body>, at_least: Option<Duration>) -> State<L::Body> {
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

    // ----- list --------------------------------------------------------------------------

    /// Options of the first page (client-go `list`): paginated for `"0"` and `""`; a relist at
    /// a specific resourceVersion is not paginated, so the API server can serve it from its
    /// watch cache instead of etcd, unless the first list showed there is no watch cache.
    fn list_options(&self, rv: &str) -> ListOptions {
        let specific = !rv.is_empty() && rv != "0";
        let paginate = self.config.page_size > 0 && (!specific || self.paginated_result);
        ListOptions {
            resource_version: Some(rv.to_owned()),
            resource_version_match: None,
            limit: paginate.then_some(self.config.page_size),
            continue_token: None,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    /// Fetches every page (client-go `pager.List`); on an expired continue token, one
    /// unpaginated list at the same resourceVersion. Returns the items, the list's
    /// resourceVersion and whether it came in more than one page.
    async fn list_all(&self, rv: &str) -> Result<(Vec<Arc<Object>>, String, bool), ApiError> {
        let mut opts = self.list_options(rv);
        let mut items = Vec::new();
        let mut pages = 0u32;
        loop {
            let body = match self.lw.list(&opts).await {
                Ok(b) => b,
                Err(ApiError::Status(s)) if pages > 0 && s.reason == "Expired" => {
                    // The continue token expired: fall back to one full list (pager.go).
                    let full = ListOptions {
                        limit: None,
                        continue_token: None,
                        ..self.list_options(rv)
                    };
                    let body = self.lw.list(&full).await?;
                    ReflectorMetrics::inc(&self.metrics.list_pages);
                    let list = decode_list(body)?;
                    let items = list.items.into_iter().map(Arc::new).collect();
                    return Ok((items, list.resource_version, true));
                }
                Err(e) => return Err(e),
            };
            ReflectorMetrics::inc(&self.metrics.list_pages);
            let list = decode_list(body)?;
            if items.is_empty() {
                // `remainingItemCount` is the server's word, not a length we allocate from
                // unchecked: capped.
                items.reserve(
                    list.items.len()
                        + list.remaining_item_count.unwrap_or(0).clamp(0, 1 << 16) as usize,
                );
            }
            items.extend(list.items.into_iter().map(Arc::new));
            pages += 1;
            if list.continue_token.is_empty() {
                return Ok((items, list.resource_version, pages > 1));
            }
            opts.continue_token = Some(list.continue_token);
            // Later pages are served at the first page's version, named by the token.
            opts.resource_version = None;
            opts.resource_version_match = None;
        }
    }

    async fn list(&mut self, rv: String) -> Result<State<L::Body>, StoreClosed> {
        let mut rv = rv;
        loop {
            // An Expired/TooLarge/stale answer for a specific version is retried at once with
            // "" (client-go retries immediately); on "" it waits for the backoff.
            let retry_now = !rv.is_empty();
            match self.list_all(&rv).await {
                Ok((items, served, paginated)) => {
                    if self.goes_back(&rv, &served) {
                        ReflectorMetrics::inc(&self.metrics.stale_lists);
                        self.report(&ReflectorError::StaleList {
                            requested: rv.clone(),
                            served,
                            synced: self.last_rv.clone(),
                        });
                        self.last_rv_unavailable = true;
                        if retry_now {
                            rv = String::new();
                            continue;
                        }
                        let next = self.relist();
                        return Ok(self.backoff_then(next, None));
                    }
                    if rv == "0" && paginated {
                        self.paginated_result = true;
                    }
                    // Counted before the store publishes, so that whoever sees the informer
                    // synced also sees the list in the metrics.
                    self.set_listed(&served);
                    self.store.replace(items, &served)?;
                    return Ok(State::Watch {
                        resource_version: self.last_rv.clone(),
                    });
                }
                Err(source) => {
                    let unavailable = is_version_unavailable(&source);
                    let wait = retry_after(&source);
                    self.report(&ReflectorError::ListFailed {
                        resource_version: rv.clone(),
                        source,
                    });
                    if unavailable {
                        self.last_rv_unavailable = true;
                        if retry_now {
                            rv = String::new();
                            continue;
                        }
                    }
                    let next = self.relist();
                    return Ok(self.backoff_then(next, wait));
                }
            }
        }
    }

    // ----- streaming list ----------------------------------------------------------------

    /// `timeoutSeconds` for a watch: whole seconds drawn from `[min, 2 × min)`, at least 1.
    fn watch_timeout(&mut self) -> Duration {
        let min = self.config.min_watch_timeout.as_secs_f64();
        let secs = (min * (1.0 + self.rng.f64())) as u64;
        Duration::from_secs(secs.max(1))
    }

    fn watch_options(&mut self, rv: &str, send_initial_events: bool) -> WatchOptions {
        WatchOptions {
            resource_version: rv.to_owned(),
            allow_watch_bookmarks: true,
            timeout: Some(self.watch_timeout()),
            send_initial_events,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    /// Recovery from a failed streaming list (client-go `isErrorRetriableWithSideEffectsFn`):
    /// refused/429 → backoff and stream again; Expired/TooLarge → stream again at once from
    /// `""`; anything else → list + watch at once.
    fn after_watch_list_failure(&mut self, rv: String, source: ApiError) -> State<L::Body> {
        let retriable = is_watch_retriable(&source);
        let unavailable = is_version_unavailable(&source);
        let wait = retry_after(&source);
        self.report(&ReflectorError::WatchListFailed {
            resource_version: rv.clone(),
            source,
        });
        if retriable {
            let next = State::WatchList {
                resource_version: rv,
            };
            return self.backoff_then(next, wait);
        }
        if unavailable && !rv.is_empty() {
            self.last_rv_unavailable = true;
            return State::WatchList {
                resource_version: String::new(),
            };
        }
        self.fall_back_to_list()
    }

    fn fall_back_to_list(&mut self) -> State<L::Body> {
        ReflectorMetrics::inc(&self.metrics.watch_list_fallbacks);
        State::List {
            resource_version: self.relist_resource_version(),
        }
    }

    async fn watch_list(&mut self, rv: String) -> Result<State<L::Body>, StoreClosed> {
        let opts = self.watch_options(&rv, true);
        let timeout = opts.timeout.unwrap_or(self.config.min_watch_timeout);
        let resp = match self.lw.watch(&opts).await {
            Ok(r) => r,
            Err(source) => return Ok(self.after_watch_list_failure(rv, source)),
        };
        ReflectorMetrics::inc(&self.metrics.watches);
        let mut open = Box::new(OpenWatch::new(
            resp,
            rv.clone(),
            timeout,
            self.config.frame_limit,
        ));
        let mut state: BTreeMap<ObjectKey, Arc<Object>> = BTreeMap::new();
        loop {
            let events = match open.next(&self.metrics).await {
                Received::Events(events) => events,
                Received::Ended(end) => {
                    if let End::TimedOut = end {
                        ReflectorMetrics::inc(&self.metrics.watch_timeouts);
                    }
                    let events = open.events;
                    return Ok(match end {
                        End::Failed(source) | End::Cut(source) => {
                            self.after_watch_list_failure(rv, source)
                        }
                        End::Closed | End::TimedOut => {
                            self.report(&if open.was_very_short() {
                                ReflectorError::VeryShortWatch {
                                    resource_version: rv,
                                }
                            } else {
                                ReflectorError::WatchListIncomplete {
                                    resource_version: rv,
                                    events,
                                }
                            });
                            self.fall_back_to_list()
                        }
                    });
                }
            };
            let mut events = events.into_iter();
            let mut end_rv = None;
            for ev in events.by_ref() {
                match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        state.insert(o.key(), Arc::new(o));
                    }
                    WatchEvent::Deleted(o) => {
                        state.remove(&o.key());
                    }
                    WatchEvent::Bookmark(o) => {
                        ReflectorMetrics::inc(&self.metrics.bookmarks);
                        if o.meta()
                            .annotations
                            .get(INITIAL_EVENTS_END)
                            .is_some_and(|v| v == "true")
                        {
                            end_rv = Some(o.resource_version().to_owned());
                            break;
                        }
                    }
                    WatchEvent::Error(status) => {
                        return Ok(self.after_watch_list_failure(rv, ApiError::Status(status)));
                    }
                }
            }
            let Some(served) = end_rv else { continue };
            if self.goes_back(&rv, &served) {
                ReflectorMetrics::inc(&self.metrics.stale_lists);
                self.report(&ReflectorError::StaleList {
                    requested: rv.clone(),
                    served,
                    synced: self.last_rv.clone(),
                });
                self.last_rv_unavailable = true;
                return Ok(if rv.is_empty() {
                    let next = self.relist();
                    self.backoff_then(next, None)
                } else {
                    State::WatchList {
                        resource_version: String::new(),
                    }
                });
            }
            // Counted before the store publishes (see `list`).
            self.set_listed(&served);
            ReflectorMetrics::inc(&self.metrics.watch_lists);
            self.store.replace(state.into_values().collect(), &served)?;
            // The same watch goes on live: events that came after the bookmark in this chunk
            // first.
            let rest: Vec<WatchEvent> = events.collect();
            if !rest.is_empty()
                && let Some(status) = self.handle_events(rest)?
            {
                return Ok(self.after_error_event(status));
            }
            return Ok(State::Stream(open));
        }
    }

    // ----- watch -------------------------------------------------------------------------

    async fn watch(&mut self, rv: String) -> State<L::Body> {
        let opts = self.watch_options(&rv, false);
        let timeout = opts.timeout.unwrap_or(self.config.min_watch_timeout);
        match self.lw.watch(&opts).await {
            Ok(resp) => {
                ReflectorMetrics::inc(&self.metrics.watches);
                State::Stream(Box::new(OpenWatch::new(
                    resp,
                    rv,
                    timeout,
                    self.config.frame_limit,
                )))
            }
            Err(source) => {
                let retriable = is_watch_retriable(&source);
                let wait = retry_after(&source);
                self.report(&ReflectorError::WatchStartFailed {
                    resource_version: rv.clone(),
                    source,
                });
                let next = if retriable {
                    State::Watch {
                        resource_version: rv,
                    }
                } else {
                    self.relist()
                };
                self.backoff_then(next, wait)
            }
        }
    }

    async fn stream(
        &mut self,
        mut open: Box<OpenWatch<L::Body>>,
    ) -> Result<State<L::Body>, StoreClosed> {
        loop {
            match open.next(&self.metrics).await {
                Received::Events(events) => {
                    if let Some(status) = self.handle_events(events)? {
                        return Ok(self.after_error_event(status));
                    }
                }
                Received::Ended(end) => return Ok(self.after_end(end, &open)),
            }
        }
    }

    /// A watch stream ended without an ERROR event.
    fn after_end(&mut self, end: End, open: &OpenWatch<L::Body>) -> State<L::Body> {
        match end {
            End::Closed | End::TimedOut | End::Cut(_) => {
                if let End::TimedOut = end {
                    ReflectorMetrics::inc(&self.metrics.watch_timeouts);
                }
                if let End::Cut(e) = end {
                    self.report(&ReflectorError::WatchStreamFailed(e));
                }
                if open.was_very_short() {
                    // Reopened at once, such a watch would spin: client-go reports it, backs
                    // off and relists.
                    self.report(&ReflectorError::VeryShortWatch {
                        resource_version: open.resource_version.clone(),
                    });
                    let next = self.relist();
                    return self.backoff_then(next, None);
                }
                State::Watch {
                    resource_version: self.last_rv.clone(),
                }
            }
            End::Failed(e) => {
                // Bytes that do not decode leave the cache possibly behind: relist, after the
                // backoff so a server sending garbage is not hammered.
                self.report(&ReflectorError::WatchStreamFailed(e));
                let next = self.relist();
                self.backoff_then(next, None)
            }
        }
    }

    /// An ERROR event ends the watch: 429 → watch again after the backoff; anything else →
    /// relist at the last resourceVersion (never `""` first) after the backoff, as client-go's
    /// `BackoffUntil` around `ListAndWatch`: a server answering every watch with 410 is not
    /// relisted in a tight loop.
    fn after_error_event(&mut self, status: ApiStatus) -> State<L::Body> {
        let too_many = is_too_many_requests(&status);
        let wait = status
            .retry_after_seconds
            .map(|r| Duration::from_secs(r.max(0) as u64));
        self.report(&ReflectorError::WatchErrorEvent(status));
        let next = if too_many {
            State::Watch {
                resource_version: self.last_rv.clone(),
            }
        } else {
            self.relist()
        };
        self.backoff_then(next, wait)
    }

    /// Applies decoded events to the store as one batch; returns the first ERROR's status
    /// (events after it are dropped: the server closes the stream after an ERROR).
    fn handle_events(&mut self, events: Vec<WatchEvent>) -> Result<Option<ApiStatus>, StoreClosed> {
        let mut changes = Vec::with_capacity(events.len());
        let mut error = None;
        let mut newest: Option<String> = None;
        let mut bookmark = None;
        for ev in events {
            let change = match ev {
                WatchEvent::Added(o) => WatchChange::Added(Arc::new(o)),
                WatchEvent::Modified(o) => WatchChange::Modified(Arc::new(o)),
                WatchEvent::Deleted(o) => WatchChange::Deleted(Arc::new(o)),
                WatchEvent::Bookmark(o) => {
                    ReflectorMetrics::inc(&self.metrics.bookmarks);
                    newest = Some(o.resource_version().to_owned());
                    bookmark.clone_from(&newest);
                    continue;
                }
                WatchEvent::Error(s) => {
                    error = Some(s);
                    break;
                }
            };
            newest = Some(change.object().resource_version().to_owned());
            changes.push(change);
        }
        if !changes.is_empty() {
            self.store.apply(changes)?;
        }
        if let Some(rv) = newest {
            self.advance(&rv);
        }
        // A bookmark older than what was delivered (a server going back) is not passed on:
        // the store's resourceVersion never moves backwards (the `ReflectorStore` contract).
        if let Some(rv) = bookmark
            && !self.is_behind(&rv)
        {
            self.store.bookmark(&rv);
        }
        Ok(error)
    }
}
