//! A few quick retries, then slow ones (client-go `ItemFastSlowRateLimiter`).

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use super::{FailureCounts, RateLimiter};

/// Waits `fast` for an item's first `max_fast_attempts` failures, then `slow` for every later
/// one, until [`RateLimiter::forget`].
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u64,
    failures: FailureCounts<T>,
}

impl<T> ItemFastSlowRateLimiter<T> {
    /// `max_fast_attempts` failures wait `fast`, the following ones `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u64) -> Self {
        ItemFastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            failures: FailureCounts::new(),
        }
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let count = self.failures.bump(item).saturating_add(1);
        if count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }

    fn num_requeues(&self, item: &T) -> u64 {
        self.failures.get(item)
    }
}
