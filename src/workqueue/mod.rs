//! Work queues for controllers: client-go's `util/workqueue` (`queue.go`, `delaying_queue.go`,
//! `rate_limiting_queue.go`, `default_rate_limiters.go`, `metrics.go`) as one [`WorkQueue`]
//! type, with its [`RateLimiter`]s, a [`Clock`] and metrics.
//!
//! Event handlers [`add`](WorkQueue::add) keys; workers loop on [`get`](WorkQueue::get) (or
//! [`get_async`](WorkQueue::get_async)), reconcile, then [`done`](WorkQueue::done), and on
//! failure [`add_rate_limited`](WorkQueue::add_rate_limited) (on success
//! [`forget`](WorkQueue::forget)). The guarantees are on [`WorkQueue`].
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

mod clock;
mod enqueue;
mod error;
mod metrics;
mod queue;
mod rate_limiter;
mod shared;
mod state;

pub use clock::{Advance, Clock, FakeClock, OnAdvance, SystemClock};
pub use error::ShutDown;
pub use metrics::{QueueMetrics, QueueStats};
pub use queue::{Builder, WorkQueue};
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, RateLimiterError, default_controller_rate_limiter,
};
