//! Per-item exponential backoff (client-go `ItemExponentialFailureRateLimiter`).

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::{FailureCounts, RateLimiter};

/// Waits `base · 2^n` after an item's `n`-th recorded failure (counting from 0), capped at
/// `max`; the first failure waits `base`. Overflow-safe: any `n` whose delay would not fit in a
/// [`Duration`] waits `max`.
///
/// Keeps one counter per item until [`RateLimiter::forget`]: forget items that succeeded, or
/// the map grows with every key that ever failed (as in client-go).
pub struct ItemExponentialRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: FailureCounts<T>,
}

impl<T> ItemExponentialRateLimiter<T> {
    /// Backoff starting at `base`, doubling per failure, never above `max` (client-go's
    /// controller default is 5 ms and 1000 s).
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialRateLimiter {
            base,
            max,
            failures: FailureCounts::new(),
        }
    }

    /// The delay after `failures` earlier failures: `base · 2^failures`, capped at `max`.
    pub fn delay_for(&self, failures: u64) -> Duration {
        // Exact in u128 nanoseconds: a shift that would lose bits (or `failures` of 128 and
        // more, with a non-zero base) is above any Duration, so it waits `max`.
        let base = self.base.as_nanos();
        if base == 0 {
            return self.base.min(self.max);
        }
        let fits = u32::try_from(failures)
            .ok()
            .filter(|&s| s < 128 && base <= u128::MAX >> s);
        match fits {
            Some(shift) if base << shift <= self.max.as_nanos() => {
                let nanos = base << shift;
                // Below `max`, so it fits a Duration.
                let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
                let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
                Duration::new(secs, subsec)
            }
            _ => self.max,
        }
    }
}

impl<T> fmt::Debug for ItemExponentialRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tracked = self.failures.len();
        f.debug_struct("ItemExponentialRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked_items", &tracked)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ItemExponentialRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let earlier = self.failures.bump(item);
        self.delay_for(earlier)
    }

    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }

    fn num_requeues(&self, item: &T) -> u64 {
        self.failures.get(item)
    }
}
