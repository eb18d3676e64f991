//! [`ReflectorMetrics`]: what a running reflector has done, readable from any thread while it
//! runs, and [`ReflectorStats`], a plain copy of them. client-go exposes a similar set through
//! `tools/cache/reflector_metrics.go` (lists, watches, items, last resourceVersion).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters and gauges of one reflector. Counters only grow; gauges say so. Every field is
/// written with `Relaxed` stores: each is an independent statistic, and a reader gets a value
/// that was current at some point, not a consistent set (use [`ReflectorMetrics::snapshot`]
/// for a copy of all of them, still not taken atomically as a whole).
#[derive(Debug, Default)]
pub struct ReflectorMetrics {
    /// Complete lists delivered to the store: paginated lists and streaming lists.
    pub lists: AtomicU64,
    /// List pages fetched (successful list requests).
    pub list_pages: AtomicU64,
    /// Complete lists after the first one (relists).
    pub relists: AtomicU64,
    /// Relists started on request
    /// ([`Reflector::with_relist_requests`](super::Reflector::with_relist_requests)), each
    /// also counted in `relists` once delivered.
    pub requested_relists: AtomicU64,
    /// Streaming initial lists (`sendInitialEvents`) completed (counted in `lists` too).
    pub watch_lists: AtomicU64,
    /// Streaming initial lists that failed or were unsupported and fell back to list + watch.
    pub watch_list_fallbacks: AtomicU64,
    /// Lists answered at an older resourceVersion than asked for, not applied.
    pub stale_lists: AtomicU64,
    /// Watches opened (streaming lists included).
    pub watches: AtomicU64,
    /// Watches the reflector ended itself at their timeout (the server had not closed them:
    /// a stalled connection).
    pub watch_timeouts: AtomicU64,
    /// Watch events received (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR).
    pub events: AtomicU64,
    /// Bookmarks received.
    pub bookmarks: AtomicU64,
    /// Bytes of watch streams received.
    pub watch_bytes: AtomicU64,
    /// Errors reported to the error handler.
    pub errors: AtomicU64,
    /// Of those, answers that said 410 Expired/Gone (an ERROR event, a failed watch or list
    /// page): the resourceVersion or continue token asked for was compacted away.
    pub expired: AtomicU64,
    /// Backoff waits started.
    pub backoffs: AtomicU64,
    /// Total length of the backoff waits started, jitter and `retryAfterSeconds` included, in
    /// microseconds: how much of a run's wall time the reflector spent waiting to retry.
    pub backoff_wait_us: AtomicU64,
    /// The part of [`ReflectorMetrics::backoff_wait_us`] that a `retryAfterSeconds` added
    /// beyond the backoff delay itself (429 answers), in microseconds.
    pub retry_after_extra_us: AtomicU64,
    /// Gauge: the last resourceVersion delivered to the store (numeric; 0 when not numeric or
    /// none yet). Never decreases.
    pub last_resource_version: AtomicU64,
    /// Gauge: the pre-jitter delay the next backoff would start from, in milliseconds.
    pub backoff_ms: AtomicU64,
    /// Gauge: the length of the current (or last) backoff wait, jitter and `retryAfterSeconds`
    /// included, in milliseconds.
    pub last_backoff_ms: AtomicU64,
    /// Gauge: `true` while the reflector waits for a backoff to pass.
    pub backing_off: AtomicBool,
    /// `true` once the first list has been delivered.
    pub listed: AtomicBool,
}

/// A plain copy of [`ReflectorMetrics`], taken by [`ReflectorMetrics::snapshot`]; each field
/// is the value of the same-named counter or gauge there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// Complete lists delivered (paginated and streaming).
    pub lists: u64,
    /// List pages fetched.
    pub list_pages: u64,
    /// Lists after the first.
    pub relists: u64,
    /// Relists started on request.
    pub requested_relists: u64,
    /// Streaming initial lists completed.
    pub watch_lists: u64,
    /// Streaming lists that fell back to list + watch.
    pub watch_list_fallbacks: u64,
    /// Lists served older than asked for, not applied.
    pub stale_lists: u64,
    /// Watches opened.
    pub watches: u64,
    /// Watches ended by the reflector's own deadline.
    pub watch_timeouts: u64,
    /// Watch events received.
    pub events: u64,
    /// Bookmarks received.
    pub bookmarks: u64,
    /// Watch stream bytes received.
    pub watch_bytes: u64,
    /// Errors reported to the error handler.
    pub errors: u64,
    /// Of those, 410 Expired/Gone answers.
    pub expired: u64,
    /// Backoff waits started.
    pub backoffs: u64,
    /// Total length of the backoff waits started, microseconds.
    pub backoff_wait_us: u64,
    /// Part of `backoff_wait_us` added by `retryAfterSeconds`, microseconds.
    pub retry_after_extra_us: u64,
    /// Last resourceVersion delivered (numeric, 0 if none or not numeric).
    pub last_resource_version: u64,
    /// Pre-jitter delay of the next backoff, milliseconds.
    pub backoff_ms: u64,
    /// Length of the current or last backoff wait, milliseconds.
    pub last_backoff_ms: u64,
    /// Waiting for a backoff right now.
    pub backing_off: bool,
    /// The first list has been delivered.
    pub listed: bool,
}

impl ReflectorMetrics {
    /// A copy of every counter and gauge (each read on its own).
    pub fn snapshot(&self) -> ReflectorStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReflectorStats {
            lists: r(&self.lists),
            list_pages: r(&self.list_pages),
            relists: r(&self.relists),
            requested_relists: r(&self.requested_relists),
            watch_lists: r(&self.watch_lists),
            watch_list_fallbacks: r(&self.watch_list_fallbacks),
            stale_lists: r(&self.stale_lists),
            watches: r(&self.watches),
            watch_timeouts: r(&self.watch_timeouts),
            events: r(&self.events),
            bookmarks: r(&self.bookmarks),
            watch_bytes: r(&self.watch_bytes),
            errors: r(&self.errors),
            expired: r(&self.expired),
            backoffs: r(&self.backoffs),
            backoff_wait_us: r(&self.backoff_wait_us),
            retry_after_extra_us: r(&self.retry_after_extra_us),
            last_resource_version: r(&self.last_resource_version),
            backoff_ms: r(&self.backoff_ms),
            last_backoff_ms: r(&self.last_backoff_ms),
            backing_off: self.backing_off.load(Ordering::Relaxed),
            listed: self.listed.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
