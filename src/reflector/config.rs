//! [`ReflectorConfig`]: how a reflector lists and watches. Defaults follow client-go
//! (`tools/cache/reflector.go`, `tools/pager/pager.go`).

use std::time::Duration;

use crate::object::DEFAULT_FRAME_LIMIT;

use super::backoff::BackoffConfig;

/// Reflector settings. Build with `ReflectorConfig::default()` and the `#[must_use]` setters or
/// struct update syntax; every field is documented with its default and where it comes from.
#[derive(Clone, Debug)]
pub struct ReflectorConfig {
    /// Items per list page (`limit`): 500, as client-go's pager. 0 = unpaginated lists.
    pub page_size: u32,
    /// Watch timeouts (`timeoutSeconds`, and the reflector's own read deadline) are drawn from
    /// `[min_watch_timeout, 2 × min_watch_timeout)`: 5 min (client-go `minWatchTimeout`).
    pub min_watch_timeout: Duration,
    /// Backoff between failed attempts: 800 ms doubling to 30 s, jitter 1.0, reset after 2 min.
    pub backoff: BackoffConfig,
    /// Start (and relist) with a streaming list (`sendInitialEvents=true`,
    /// `resourceVersionMatch=NotOlderThan`) instead of a paginated list: the initial state
    /// arrives as ADDED events on a watch, ended by the `k8s.io/initial-events-end` bookmark,
    /// and that watch goes on live. Falls back to list + watch when the server rejects it or the
    /// stream fails. Default off, as client-go (`WatchListClient` feature gate).
    pub use_watch_list: bool,
    /// `labelSelector` for lists and watches.
    pub label_selector: Option<String>,
    /// `fieldSelector` for lists and watches.
    pub field_selector: Option<String>,
    /// Largest accepted watch frame or JSON line, bytes: 16 MiB (client-go's protobuf frame
    /// reader limit). A larger one ends the watch with an error and a relist. Also the
    /// largest item (and list metadata) of a protobuf list page, which is decoded as it
    /// arrives ([`crate::object::ListStream`]): a larger one fails the list.
    pub frame_limit: usize,
    /// Decode large batches of watch events (32 or more read at once: a backlog, a streaming
    /// list, a flood) on helper threads too, one per further core (at most 7, shared by every
    /// reflector in the process), events still applied in stream order. Default on; a live
    /// watch at normal load reads one event at a time and decodes it on its own thread anyway.
    pub parallel_decode: bool,
    /// Seed for the backoff jitter and the watch-timeout draws (default `None`: random).
    /// Deterministic tests set it.
    pub seed: Option<u64>,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            page_size: 500,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            use_watch_list: false,
            label_selector: None,
            field_selector: None,
            frame_limit: DEFAULT_FRAME_LIMIT,
            parallel_decode: true,
            seed: None,
        }
    }
}

impl ReflectorConfig {
    /// Sets [`ReflectorConfig::page_size`].
    #[must_use]
    pub fn page_size(mut self, items: u32) -> Self {
        self.page_size = items;
        self
    }

    /// Sets [`ReflectorConfig::min_watch_timeout`] (at least 1 s: `timeoutSeconds` is whole
    /// seconds).
    #[must_use]
    pub fn min_watch_timeout(mut self, timeout: Duration) -> Self {
        self.min_watch_timeout = timeout.max(Duration::from_secs(1));
        self
    }

    /// Sets [`ReflectorConfig::backoff`].
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets [`ReflectorConfig::use_watch_list`].
    #[must_use]
    pub fn use_watch_list(mut self, on: bool) -> Self {
        self.use_watch_list = on;
        self
    }

    /// Sets [`ReflectorConfig::label_selector`].
    #[must_use]
    pub fn label_selector(mut self, selector: Option<String>) -> Self {
        self.label_selector = selector;
        self
    }

    /// Sets [`ReflectorConfig::field_selector`].
    #[must_use]
    pub fn field_selector(mut self, selector: Option<String>) -> Self {
        self.field_selector = selector;
        self
    }

    /// Sets [`ReflectorConfig::frame_limit`].
    #[must_use]
    pub fn frame_limit(mut self, bytes: usize) -> Self {
        self.frame_limit = bytes;
        self
    }

    /// Sets [`ReflectorConfig::parallel_decode`].
    #[must_use]
    pub fn parallel_decode(mut self, on: bool) -> Self {
        self.parallel_decode = on;
        self
    }

    /// Sets [`ReflectorConfig::seed`].
    #[must_use]
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }
}
