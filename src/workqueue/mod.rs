//! Work queues for controllers: client-go's `util/workqueue` (`queue.go`, `delaying_queue.go`,
//! `rate_limiting_queue.go`, `default_rate_limiters.go`, `metrics.go`; see
//! `../shared/SEMANTICS.md`, section WorkQueue).
//!
//! Event handlers [`add`](WorkQueue::add) keys; workers loop on [`get`](WorkQueue::get) (or
//! [`get_async`](WorkQueue::get_async)), reconcile, then [`done`](WorkQueue::done), and on
//! failure [`add_rate_limited`](WorkQueue::add_rate_limited) (on success
//! [`forget`](WorkQueue::forget)). The queue guarantees that:
//!
//! - a key is never handed to two workers at once;
//! - a key added while a worker has it is handed out once more after `done` (adds while in
//!   flight coalesce into one re-run), and a key added while queued is not queued twice;
//! - nothing added before a drain is lost: queued keys are still handed out after
//!   [`shutdown_with_drain`](WorkQueue::shutdown_with_drain), which waits for the keys in
//!   flight; a plain [`shutdown`](WorkQueue::shutdown) stops handing out at once
//!   (`../shared/SEMANTICS.md`; client-go hands queued keys out after either).
//!
//! client-go layers three types (`Interface`, `DelayingInterface`, `RateLimitingInterface`) and
//! runs a goroutine per delaying queue plus one for its metrics. Here one [`WorkQueue`] does all
//! three and starts nothing: delayed items are moved in by whoever touches the queue once they
//! are due, one idle worker times the next one, and gauges are computed when scraped. Time comes
//! from a [`Clock`]; tests use [`FakeClock`] and never sleep.
//!
//! ```
//! use std::time::Duration;
//! use informer::workqueue::{ShutDown, WorkQueue};
//!
//! let queue: WorkQueue<String> = WorkQueue::builder().name("deployments").build();
//! let worker = {
//!     let queue = queue.clone();
//!     std::thread::spawn(move || -> Result<(), ShutDown> {
//!         loop {
//!             let key = queue.get()?;
//!             // reconcile `key` here; on error: queue.add_rate_limited(key.clone())
//!             queue.forget(&key);
//!             queue.done(&key);
//!         }
//!     })
//! };
//! queue.add("default/web".to_owned());
//! queue.shutdown_with_drain();
//! assert_eq!(worker.join().unwrap(), Err(ShutDown));
//! ```
//!
//! # Consistency
//! One mutex guards each queue; every operation holds it for a few map and deque operations.
//! Rate limiters keep their own lock and are asked outside the queue's.

mod clock;
mod enqueue;
mod metrics;
mod queue;
mod rate_limiter;
mod state;

pub use clock::{Advance, Clock, FakeClock, OnAdvance, SystemClock};
pub use metrics::{QueueMetrics, QueueStats};
pub use queue::{Builder, ShutDown, WorkQueue};
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, RateLimiterError, default_controller_rate_limiter,
};
