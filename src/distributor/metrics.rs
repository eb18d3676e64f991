//! Per-listener counters ([`ListenerStats`] is their snapshot).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of one listener. All `Relaxed`: they are gauges for metrics and tests, never used to
/// order memory (use a [`Marker`](super::Marker) for that).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Notifications accepted for this listener (by `publish` and `publish_to`).
    pub(crate) published: AtomicU64,
    /// Notifications handed to the handler (including calls that panicked).
    pub(crate) delivered: AtomicU64,
    /// Notifications merged away by coalescing (never delivered as such).
    pub(crate) coalesced: AtomicU64,
    pub(crate) max_pending: AtomicU64,
    pub(crate) handler_nanos: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) last_panic: Mutex<Option<String>>,
}

impl Metrics {
    /// Counts `n` newly accepted notifications and updates the high-water mark.
    pub(crate) fn published(&self, n: u64) {
        let published = self.published.fetch_add(n, Ordering::Relaxed) + n;
        let processed =
            self.delivered.load(Ordering::Relaxed) + self.coalesced.load(Ordering::Relaxed);
        self.max_pending
            .fetch_max(published.saturating_sub(processed), Ordering::Relaxed);
    }

    /// Takes back `n` counted by [`Metrics::published`] that no consumer will ever take.
    pub(crate) fn unpublished(&self, n: u64) {
        self.published.fetch_sub(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ListenerStats {
        // Read the consumer's counters first so that `pending` never underflows.
        let delivered = self.delivered.load(Ordering::Relaxed);
        let coalesced = self.coalesced.load(Ordering::Relaxed);
        let published = self.published.load(Ordering::Relaxed);
        ListenerStats {
            published,
            delivered,
            coalesced,
            pending: published.saturating_sub(delivered + coalesced),
            max_pending: self.max_pending.load(Ordering::Relaxed),
            handler_time: Duration::from_nanos(self.handler_nanos.load(Ordering::Relaxed)),
            panics: self.panics.load(Ordering::Relaxed),
            last_panic: self
                .last_panic
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        }
    }
}

/// A snapshot of one listener's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerStats {
    /// Notifications published to this listener, less those discarded because its consumer
    /// was gone (a dropped stream, a stopped listener).
    pub published: u64,
    /// Notifications handed to its handler, panicking calls included.
    pub delivered: u64,
    /// Notifications merged into a later one by [`OverflowPolicy::CoalesceByKey`](super::OverflowPolicy::CoalesceByKey).
    pub coalesced: u64,
    /// The lag gauge: published and neither delivered nor coalesced yet (a batch being handled
    /// counts as pending until its last notification returns).
    pub pending: u64,
    /// Highest `pending` seen at publish time.
    pub max_pending: u64,
    /// Total time spent in the handler.
    pub handler_time: Duration,
    /// Handler calls that panicked.
    pub panics: u64,
    /// Message of the last panic.
    pub last_panic: Option<String>,
}
