//! The reflector's list/watch state machine. Upstream: `client-go/tools/cache/reflector.go`
//! (`ListAndWatch`, `watchHandler`, `relistResourceVersion`) and `tools/pager/pager.go`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::object::{
    ApiStatus, DEFAULT_FRAME_LIMIT, DecodeError, Object, WatchDecoder, WatchEvent, decode_list,
    parse_resource_version,
};

use super::backoff::{Backoff, BackoffConfig};
use super::lister_watcher::{ApiError, Body, ListOptions, ListerWatcher, WatchOptions};

/// One change observed on a watch, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchChange {
    /// ADDED.
    Added(Arc<Object>),
    /// MODIFIED.
    Modified(Arc<Object>),
    /// DELETED (the object's last state).
    Deleted(Arc<Object>),
}

/// The store a reflector writes into (client-go's `Store` interface as the reflector uses it:
/// `Replace` after a list, `Add`/`Update`/`Delete` per watch event). The DeltaFIFO implements
/// it; so can anything else (a plain store, a test recorder).
pub trait ReflectorStore: Send + Sync {
    /// The complete state at `resource_version`, replacing everything (relist).
    ///
    /// # Errors
    /// [`StoreClosed`] when the consumer has gone: the reflector stops.
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed>;

    /// Watch changes, oldest first, as one batch (one decoded chunk of the stream).
    ///
    /// # Errors
    /// [`StoreClosed`] when the consumer has gone.
    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed>;

    /// A bookmark: nothing changed up to `resource_version`. Default: ignored.
    fn bookmark(&self, resource_version: &str) {
        let _ = resource_version;
    }
}

/// The store a reflector writes into was closed; the reflector stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the reflector's store is closed")]
pub struct StoreClosed;

/// Reflector errors, named by the phase they happened in (each is also reported to the watch
/// error handler before the reflector recovers from it).
#[derive(Debug, thiserror::Error)]
pub enum ReflectorError {
    /// A list request failed (the reflector backs off and lists again).
    #[error("list with resourceVersion={resource_version:?} failed")]
    ListFailed {
        /// The resourceVersion the list asked for.
        resource_version: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// Opening a watch failed.
    #[error("starting a watch from resourceVersion {resource_version} failed")]
    WatchStartFailed {
        /// The resourceVersion the watch started from.
        resource_version: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// The server sent an ERROR event (e.g. 410 Gone: the resourceVersion is too old).
    #[error("watch ended with an error event: {} {} ({})", .0.code, .0.reason, .0.message)]
    WatchErrorEvent(ApiStatus),
    /// The server closed a watch within a second of opening it, with no event: the reflector
    /// backs off before watching again (client-go "very short watch").
    #[error(
        "very short watch from resourceVersion {resource_version}: closed within a second with no event"
    )]
    VeryShortWatch {
        /// The resourceVersion the watch started from.
        resource_version: String,
    },
    /// The watch stream broke or held bytes that do not decode (the reflector relists).
    #[error("watch stream failed")]
    WatchStreamFailed(#[source] ApiError),
}

impl From<DecodeError> for ReflectorError {
    fn from(e: DecodeError) -> Self {
        ReflectorError::WatchStreamFailed(ApiError::Decode(e))
    }
}

/// Reflector settings. Defaults follow client-go.
#[derive(Clone, Debug)]
pub struct ReflectorConfig {
    /// Items per list page (`limit`): 500, as client-go's pager.
    pub page_size: u32,
    /// Watch timeouts are drawn from `[min_watch_timeout, 2 × min_watch_timeout)`: 5 min.
    pub min_watch_timeout: Duration,
    /// Backoff between failed attempts.
    pub backoff: BackoffConfig,
    /// `labelSelector` for lists and watches.
    pub label_selector: Option<String>,
    /// `fieldSelector` for lists and watches.
    pub field_selector: Option<String>,
    /// Largest accepted watch frame or JSON line, bytes: 16 MiB.
    pub frame_limit: usize,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            page_size: 500,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            label_selector: None,
            field_selector: None,
            frame_limit: DEFAULT_FRAME_LIMIT,
        }
    }
}

/// Counters a reflector keeps (all monotonically increasing except the gauges).
#[derive(Debug, Default)]
pub struct ReflectorMetrics {
    /// Complete lists (all pages) delivered to the store.
    pub lists: AtomicU64,
    /// List pages fetched.
    pub list_pages: AtomicU64,
    /// Lists after the first one.
    pub relists: AtomicU64,
    /// Watches opened.
    pub watches: AtomicU64,
    /// Watch events received (ADDED/MODIFIED/DELETED/BOOKMARK).
    pub events: AtomicU64,
    /// Bookmarks received.
    pub bookmarks: AtomicU64,
    /// Bytes of watch stream received.
    pub watch_bytes: AtomicU64,
    /// Errors reported to the error handler.
    pub errors: AtomicU64,
    /// Last resourceVersion synced (numeric; 0 when not numeric or none yet). Gauge.
    pub last_resource_version: AtomicU64,
    /// Current pre-jitter backoff delay in milliseconds. Gauge.
    pub backoff_ms: AtomicU64,
    /// True once the first list has been delivered.
    pub listed: AtomicBool,
}

/// A hook told of every error the reflector recovers from (client-go `WatchErrorHandler`).
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// What the state machine does next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// List everything at this resourceVersion, then watch.
    List { resource_version: String },
    /// Watch from this resourceVersion.
    Watch { resource_version: String },
    /// Wait, then go on with the inner state.
    Backoff { delay: Duration, then: Box<State> },
}

/// Lists then watches one resource through a [`ListerWatcher`], writing into a
/// [`ReflectorStore`], recovering from every failure the way client-go does:
///
/// - first list at `resourceVersion=0` (API server cache), paginated with `limit`/`continue`;
///   a `continue` token that expired (410 on a later page) falls back to one full list;
/// - watch from the list's resourceVersion with bookmarks and a random timeout; bookmarks only
///   advance the resourceVersion; a clean close re-watches from the last resourceVersion;
/// - watch 410 Gone/Expired → relist at the last synced resourceVersion; only if that list
///   answers Expired or "Too large resource version" is `resourceVersion=""` used;
/// - connection failures and 429 (honouring `retryAfterSeconds`) when opening a watch: back
///   off and watch again without relisting; other failures (5xx, bad bytes) back off and
///   relist; a watch closed within a second with no event is a "very short watch": back off
///   and watch again;
/// - every retry waits for the backoff (800 ms doubling to 30 s with jitter, restarting after
///   2 min without failure), so no server answer can make it spin;
/// - the resourceVersion it reports never moves backwards.
pub struct Reflector<L: ListerWatcher> {
    lw: Arc<L>,
    store: Arc<dyn ReflectorStore>,
    config: ReflectorConfig,
    metrics: Arc<ReflectorMetrics>,
    error_handler: Option<WatchErrorHandler>,
    backoff: Backoff,
    /// Last resourceVersion synced with the store ("" before the first list).
    last_rv: String,
    /// Set when a list at `last_rv` answered Expired/TooLarge: the next list uses "".
    last_rv_unavailable: bool,
    rng: fastrand::Rng,
}

impl<L: ListerWatcher> std::fmt::Debug for Reflector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("last_resource_version", &self.last_rv)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher> Reflector<L> {
    /// A reflector feeding `store` from `lw`.
    pub fn new(lw: Arc<L>, store: Arc<dyn ReflectorStore>, config: ReflectorConfig) -> Self {
        Reflector {
            lw,
            store,
            backoff: Backoff::new(config.backoff.clone()),
            config,
            metrics: Arc::default(),
            error_handler: None,
            last_rv: String::new(),
            last_rv_unavailable: false,
            rng: fastrand::Rng::new(),
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

    /// The last resourceVersion synced with the store.
    pub fn last_sync_resource_version(&self) -> &str {
        &self.last_rv
    }

    /// Runs until the store closes. Cancel the future (or drop it) to stop earlier; it is
    /// cancel safe: the store only ever sees whole batches.
    ///
    /// # Errors
    /// Only [`StoreClosed`]: every other failure is reported to the error handler and
    /// recovered from.
    pub async fn run(mut self) -> Result<(), StoreClosed> {
        let mut state = State::List {
            resource_version: "0".to_owned(),
        };
        loop {
            state = self.step(state).await?;
        }
    }

    fn report(&self, err: &ReflectorError) {
        self.metrics.errors.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = &self.error_handler {
            h(err);
        }
    }

    /// The resourceVersion to relist at (client-go `relistResourceVersion`).
    fn relist_resource_version(&self) -> String {
        if self.last_rv_unavailable {
            String::new()
        } else if self.last_rv.is_empty() {
            "0".to_owned()
        } else {
            self.last_rv.clone()
        }
    }

    /// Records `rv` as synced unless it would move the resourceVersion backwards.
    fn advance(&mut self, rv: &str) {
        match (
            parse_resource_version(rv),
            parse_resource_version(&self.last_rv),
        ) {
            (Some(new), Some(old)) if new < old => {}
            _ if rv.is_empty() => {}
            (new, _) => {
                self.last_rv = rv.to_owned();
                self.metrics
                    .last_resource_version
                    .store(new.unwrap_or(0), Ordering::Relaxed);
            }
        }
    }

    fn backoff_then(&mut self, then: State, at_least: Option<Duration>) -> State {
        let mut delay = self.backoff.failure();
        if let Some(min) = at_least {
            delay = delay.max(min);
        }
        self.metrics
            .backoff_ms
            .store(self.backoff.current().as_millis() as u64, Ordering::Relaxed);
        State::Backoff {
            delay,
            then: Box::new(then),
        }
    }

    /// One transition of the state machine.
    async fn step(&mut self, state: State) -> Result<State, StoreClosed> {
        match state {
            State::Backoff { delay, then } => {
                tokio::time::sleep(delay).await;
                Ok(*then)
            }
            State::List { resource_version } => Ok(self.list(resource_version).await?),
            State::Watch { resource_version } => Ok(self.watch(resource_version).await?),
        }
    }

    /// Options of the first page. As client-go's reflector: paginated for `"0"` and `""`; a
    /// relist at a specific resourceVersion is not paginated, so the API server can serve it
    /// from its watch cache instead of etcd (no thundering herd after an upgrade).
    fn list_options(&self, rv: &str) -> ListOptions {
        let specific = !rv.is_empty() && rv != "0";
        ListOptions {
            resource_version: Some(rv.to_owned()),
            resource_version_match: None,
            limit: (!specific).then_some(self.config.page_size),
            continue_token: None,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    /// Fetches every page; on an expired continue token, one full unpaginated list.
    async fn list_all(&self, rv: &str) -> Result<(Vec<Arc<Object>>, String), ApiError> {
        let mut opts = self.list_options(rv);
        let mut items = Vec::new();
        let mut page = 0u32;
        loop {
            let body = match self.lw.list(&opts).await {
                Ok(b) => b,
                Err(ApiError::Status(s)) if page > 0 && s.code == 410 => {
                    // The continue token expired: fall back to one full list (pager.go).
                    let full = ListOptions {
                        limit: None,
                        continue_token: None,
                        ..self.list_options(rv)
                    };
                    items.clear();
                    let body = self.lw.list(&full).await?;
                    self.metrics.list_pages.fetch_add(1, Ordering::Relaxed);
                    let list = decode_list(body)?;
                    items.extend(list.items.into_iter().map(Arc::new));
                    return Ok((items, list.resource_version));
                }
                Err(e) => return Err(e),
            };
            self.metrics.list_pages.fetch_add(1, Ordering::Relaxed);
            let list = decode_list(body)?;
            if items.is_empty() {
                items.reserve(
                    list.items.len()
                        + list.remaining_item_count.unwrap_or(0).clamp(0, 1 << 20) as usize,
                );
            }
            items.extend(list.items.into_iter().map(Arc::new));
            page += 1;
            if list.continue_token.is_empty() {
                return Ok((items, list.resource_version));
            }
            opts.continue_token = Some(list.continue_token);
            // Later pages are served at the first page's version, named by the token.
            opts.resource_version = None;
            opts.resource_version_match = None;
        }
    }

    async fn list(&mut self, rv: String) -> Result<State, StoreClosed> {
        match self.list_all(&rv).await {
            Ok((items, list_rv)) => {
                self.store.replace(items, &list_rv)?;
                if self.metrics.listed.swap(true, Ordering::Relaxed) {
                    self.metrics.relists.fetch_add(1, Ordering::Relaxed);
                }
                self.metrics.lists.fetch_add(1, Ordering::Relaxed);
                self.last_rv_unavailable = false;
                // A list is the truth at its version, even if older than a bookmark seen.
                self.last_rv = String::new();
                self.advance(&list_rv);
                Ok(State::Watch {
                    resource_version: self.last_rv.clone(),
                })
            }
            Err(source) => {
                if let ApiError::Status(s) = &source
                    && (is_expired(s) || is_too_large_resource_version(s))
                {
                    self.last_rv_unavailable = true;
                }
                self.report(&ReflectorError::ListFailed {
                    resource_version: rv,
                    source,
                });
                let next = State::List {
                    resource_version: self.relist_resource_version(),
                };
                Ok(self.backoff_then(next, None))
            }
        }
    }

    fn watch_options(&mut self, rv: &str) -> WatchOptions {
        // `timeoutSeconds` is whole seconds, drawn from [min, 2 × min), at least 1.
        let min = self.config.min_watch_timeout.as_secs_f64();
        let secs = (min * (1.0 + self.rng.f64())) as u64;
        WatchOptions {
            resource_version: rv.to_owned(),
            allow_watch_bookmarks: true,
            timeout: Some(Duration::from_secs(secs.max(1))),
            send_initial_events: false,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    async fn watch(&mut self, rv: String) -> Result<State, StoreClosed> {
        let opts = self.watch_options(&rv);
        let resp = match self.lw.watch(&opts).await {
            Ok(r) => r,
            Err(source) => {
                let next = match &source {
                    ApiError::Status(s) if is_expired(s) => State::List {
                        resource_version: self.relist_resource_version(),
                    },
                    ApiError::Status(s) if s.code == 429 => {
                        let wait = s
                            .retry_after_seconds
                            .map(|r| Duration::from_secs(r.max(0) as u64));
                        let next = State::Watch {
                            resource_version: rv.clone(),
                        };
                        self.report(&ReflectorError::WatchStartFailed {
                            resource_version: rv,
                            source,
                        });
                        return Ok(self.backoff_then(next, wait));
                    }
                    ApiError::Transport(_) => State::Watch {
                        resource_version: rv.clone(),
                    },
                    _ => State::List {
                        resource_version: self.relist_resource_version(),
                    },
                };
                self.report(&ReflectorError::WatchStartFailed {
                    resource_version: rv,
                    source,
                });
                return Ok(self.backoff_then(next, None));
            }
        };
        self.metrics.watches.fetch_add(1, Ordering::Relaxed);
        let mut body = resp.body;
        let mut decoder = WatchDecoder::new(resp.format, self.config.frame_limit);
        let mut healthy = false;
        let opened = tokio::time::Instant::now();
        loop {
            let chunk = match body.next_chunk().await {
                Some(Ok(c)) => c,
                Some(Err(e)) => {
                    self.report(&ReflectorError::WatchStreamFailed(e));
                    // A broken connection: watch again from where we are (client-go retries
                    // the watch unless the error says the version is gone).
                    let next = State::Watch {
                        resource_version: self.last_rv.clone(),
                    };
                    // client-go backs off before every retry; the backoff itself restarts from
                    // 800 ms after 2 min without a failure.
                    return Ok(self.backoff_then(next, None));
                }
                None => {
                    match decoder.finish() {
                        Ok(last) => {
                            if let Some(status) = self.handle_events(last.into_iter().collect())? {
                                return Ok(self.after_error_event(status));
                            }
                        }
                        Err(e) => {
                            self.report(&e.into());
                            return Ok(self.relist_after_bad_stream());
                        }
                    }
                    // Clean close (timeout or EOF): watch again, no relist.
                    let next = State::Watch {
                        resource_version: self.last_rv.clone(),
                    };
                    // A watch that ends within a second with nothing in it would otherwise be
                    // reopened in a hot loop: client-go reports it as a "very short watch"
                    // and backs off.
                    if !healthy && opened.elapsed() < Duration::from_secs(1) {
                        self.report(&ReflectorError::VeryShortWatch {
                            resource_version: self.last_rv.clone(),
                        });
                        return Ok(self.backoff_then(next, None));
                    }
                    return Ok(next);
                }
            };
            self.metrics
                .watch_bytes
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            decoder.push(chunk);
            let mut events = Vec::new();
            let decode_error = loop {
                match decoder.next_event() {
                    Ok(Some(ev)) => events.push(ev),
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            if !events.is_empty() {
                healthy = true;
                if let Some(status) = self.handle_events(events)? {
                    return Ok(self.after_error_event(status));
                }
            }
            if let Some(e) = decode_error {
                self.report(&e.into());
                return Ok(self.relist_after_bad_stream());
            }
        }
    }

    /// An ERROR event ends the watch: relist at the last synced version (never `""` first),
    /// after the backoff.
    fn after_error_event(&mut self, status: ApiStatus) -> State {
        self.report(&ReflectorError::WatchErrorEvent(status));
        let next = State::List {
            resource_version: self.relist_resource_version(),
        };
        // Always through the backoff, as client-go's BackoffUntil around ListAndWatch: a
        // server answering every watch with 410 must not be relisted in a tight loop.
        self.backoff_then(next, None)
    }

    /// Bytes that do not decode leave the stream unusable and the cache possibly behind:
    /// relist (after a backoff, so a server sending garbage is not hammered).
    fn relist_after_bad_stream(&mut self) -> State {
        let next = State::List {
            resource_version: self.relist_resource_version(),
        };
        self.backoff_then(next, None)
    }

    /// Applies decoded events to the store as one batch; returns the first ERROR's status
    /// (events after it are dropped: the server closes the stream after an ERROR).
    fn handle_events(&mut self, events: Vec<WatchEvent>) -> Result<Option<ApiStatus>, StoreClosed> {
        let mut changes = Vec::with_capacity(events.len());
        let mut error = None;
        let mut newest: Option<String> = None;
        let mut bookmark = None;
        for ev in events {
            self.metrics.events.fetch_add(1, Ordering::Relaxed);
            let change = match ev {
                WatchEvent::Added(o) => WatchChange::Added(Arc::new(o)),
                WatchEvent::Modified(o) => WatchChange::Modified(Arc::new(o)),
                WatchEvent::Deleted(o) => WatchChange::Deleted(Arc::new(o)),
                WatchEvent::Bookmark(o) => {
                    self.metrics.bookmarks.fetch_add(1, Ordering::Relaxed);
                    newest = Some(o.resource_version().to_owned());
                    bookmark = newest.clone();
                    continue;
                }
                WatchEvent::Error(s) => {
                    error = Some(s);
                    break;
                }
            };
            let o = match &change {
                WatchChange::Added(o) | WatchChange::Modified(o) | WatchChange::Deleted(o) => o,
            };
            newest = Some(o.resource_version().to_owned());
            changes.push(change);
        }
        if !changes.is_empty() {
            self.store.apply(changes)?;
        }
        if let Some(rv) = newest {
            self.advance(&rv);
        }
        if let Some(rv) = bookmark {
            self.store.bookmark(&rv);
        }
        Ok(error)
    }
}

/// 410 Gone / Expired: the requested resourceVersion is no longer available
/// (`apierrors.IsResourceExpired` / `IsGone`).
pub fn is_expired(s: &ApiStatus) -> bool {
    s.code == 410 || s.reason == "Expired" || s.reason == "Gone"
}

/// "Too large resource version": the `ResourceVersionTooLarge` cause, or on old servers a
/// Timeout status whose message says so (client-go `isTooLargeResourceVersionError`).
pub fn is_too_large_resource_version(s: &ApiStatus) -> bool {
    s.cause_reasons
        .iter()
        .any(|c| c == "ResourceVersionTooLarge")
        || (s.reason == "Timeout" && s.message.contains("Too large resource version"))
}
