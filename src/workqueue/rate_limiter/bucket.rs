//! An overall token bucket shared by all items (client-go `BucketRateLimiter`, which wraps
//! `golang.org/x/time/rate.Limiter` and asks `Reserve().Delay()`).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{RateLimiter, RateLimiterError};
use crate::workqueue::clock::Clock;

/// A token bucket of `burst` tokens refilled at `qps` tokens per second, starting full. Every
/// [`when`](RateLimiter::when) reserves one token, whatever the item: while tokens are left the
/// delay is zero; after that each reservation goes into debt and waits until its token will have
/// been refilled, so delays grow by `1/qps` per call and retries leave at `qps` per second.
/// Keeps no per-item state: `forget` does nothing and `num_requeues` is 0.
pub struct BucketRateLimiter {
    qps: f64,
    burst: f64,
    clock: Arc<dyn Clock>,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available at `last`; negative while reservations are in debt.
    tokens: f64,
    last: Instant,
}

impl BucketRateLimiter {
    /// A bucket of `burst` tokens refilled at `qps` per second, reading time from `clock`.
    ///
    /// # Errors
    /// [`RateLimiterError::InvalidQps`] unless `qps` is finite and above zero;
    /// [`RateLimiterError::ZeroBurst`] if `burst` is 0.
    pub fn new(qps: f64, burst: u32, clock: impl Clock) -> Result<Self, RateLimiterError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(RateLimiterError::InvalidQps(qps));
        }
        if burst == 0 {
            return Err(RateLimiterError::ZeroBurst);
        }
        let last = clock.now();
        Ok(BucketRateLimiter {
            qps,
            burst: f64::from(burst),
            clock: Arc::new(clock),
            state: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last,
            }),
        })
    }

    /// Reserves one token now and returns how long to wait for it.
    pub fn reserve(&self) -> Duration {
        let now = self.clock.now();
        let mut b = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        b.last = b.last.max(now);
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            // Finite and positive: at worst a huge debt, which saturates.
            Duration::try_from_secs_f64(-b.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u64 {
        0
    }
}
