//! A few quick retries, then slow ones (client-go `ItemFastSlowRateLimiter`).

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::RateLimiter;

/// Waits `fast` for an item's first `max_fast_attempts` failures, then `slow` for every later
/// one, until [`RateLimiter::forget`].
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u64,
    failures: Mutex<HashMap<T, u64, foldhash::fast::RandomState>>,
}

impl<T> ItemFastSlowRateLimiter<T> {
    /// `max_fast_attempts` failures wait `fast`, the following ones `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u64) -> Self {
        ItemFastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            failures: Mutex::new(HashMap::default()),
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
        let count = {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            match failures.get_mut(item) {
                Some(n) => {
                    *n = n.saturating_add(1);
                    *n
                }
                None => {
                    failures.insert(item.clone(), 1);
                    1
                }
            }
        };
        if count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(item);
    }

    fn num_requeues(&self, item: &T) -> u64 {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(item)
            .copied()
            .unwrap_or(0)
    }
}
