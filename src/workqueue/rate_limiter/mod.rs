//! Rate limiters: how long a failed item waits before its retry
//! (client-go `util/workqueue/default_rate_limiters.go`).
//!
//! A limiter is asked [`RateLimiter::when`] each time an item fails; the queue's
//! [`add_rate_limited`](super::WorkQueue::add_rate_limited) then re-adds the item after that
//! delay. [`RateLimiter::forget`] clears an item's history once it succeeded.

mod bucket;
mod exponential;
mod fast_slow;
mod max_of;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use bucket::BucketRateLimiter;
pub use exponential::ItemExponentialRateLimiter;
pub use fast_slow::ItemFastSlowRateLimiter;
pub use max_of::MaxOfRateLimiter;

use super::clock::Clock;

/// Decides how long an item waits before it is retried (client-go `RateLimiter`).
///
/// Implementations are shared by every worker of a queue, so they take `&self` and keep their
/// per-item state behind their own lock. They are called outside the queue's lock.
pub trait RateLimiter<T>: fmt::Debug + Send + Sync {
    /// Records one more failure of `item` and returns how long it should wait before its next
    /// attempt.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures (call it when the item succeeded or was given up on).
    fn forget(&self, item: &T);
    /// How many failures of `item` are recorded (0 for limiters that keep no per-item state).
    fn num_requeues(&self, item: &T) -> u64;
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> u64 {
        (**self).num_requeues(item)
    }
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> u64 {
        (**self).num_requeues(item)
    }
}

/// Why a rate limiter could not be built from its parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimiterError {
    /// The token rate must be a finite number of tokens per second above zero.
    #[error("token rate {0} per second is not finite and positive")]
    InvalidQps(f64),
    /// The bucket must hold at least one token.
    #[error("bucket size must be at least 1")]
    ZeroBurst,
}

/// client-go's `DefaultControllerRateLimiter`: the larger of a per-item exponential backoff
/// (5 ms doubling up to 1000 s) and an overall token bucket (10 per second, bursts of 100).
/// The bucket reads time from `clock`.
pub fn default_controller_rate_limiter<T>(clock: impl Clock) -> MaxOfRateLimiter<T>
where
    T: std::hash::Hash + Eq + Clone + Send + 'static,
{
    let mut limiters: Vec<Box<dyn RateLimiter<T>>> = vec![Box::new(
        ItemExponentialRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000)),
    )];
    // 10 per second and 100 tokens are valid, so `new` returns `Ok`.
    if let Ok(bucket) = BucketRateLimiter::new(10.0, 100, clock) {
        limiters.push(Box::new(bucket));
    }
    MaxOfRateLimiter::new(limiters)
}

/// Per-item failure counters shared by the per-item limiters: one `u64` per item that failed,
/// until it is forgotten. The lock is held only to read or bump one counter.
pub(crate) struct FailureCounts<T> {
    counts: std::sync::Mutex<std::collections::HashMap<T, u64, foldhash::fast::RandomState>>,
}

impl<T> FailureCounts<T> {
    /// No item has failed yet.
    pub(crate) fn new() -> Self {
        FailureCounts {
            counts: std::sync::Mutex::new(std::collections::HashMap::default()),
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<T, u64, foldhash::fast::RandomState>>
    {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many items have a counter.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl<T: std::hash::Hash + Eq + Clone> FailureCounts<T> {
    /// Records one more failure of `item`; returns how many were recorded before it (0 on the
    /// first). Saturates at `u64::MAX`.
    pub(crate) fn bump(&self, item: &T) -> u64 {
        let mut counts = self.lock();
        match counts.get_mut(item) {
            Some(n) => {
                let earlier = *n;
                *n = n.saturating_add(1);
                earlier
            }
            None => {
                counts.insert(item.clone(), 1);
                0
            }
        }
    }

    /// Drops `item`'s counter.
    pub(crate) fn forget(&self, item: &T) {
        self.lock().remove(item);
    }

    /// Failures recorded for `item` (0 when none).
    pub(crate) fn get(&self, item: &T) -> u64 {
        self.lock().get(item).copied().unwrap_or(0)
    }
}
