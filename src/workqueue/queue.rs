//! [`WorkQueue`]: client-go's work queue, delaying queue and rate-limiting queue
//! (`util/workqueue/queue.go`, `delaying_queue.go`, `rate_limiting_queue.go`) as one type.

use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::clock::{Advance, Clock, OnAdvance, SystemClock};
use super::error::ShutDown;
use super::metrics::{QueueMetrics, QueueStats, StatsSource};
use super::rate_limiter::{RateLimiter, default_controller_rate_limiter};
use super::shared::{Shared, Wake};
use super::state::{Finished, State};

/// Delays are clamped to this (about 100 years): a later deadline means "never" anyway, and
/// an [`Instant`] cannot hold every [`Duration`].
const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A work queue with client-go's semantics: deduplication, no concurrent processing of an item,
/// delays and per-item rate limits. A cheap handle: clones share one queue.
///
/// client-go layers three types (`Interface`, `DelayingInterface`, `RateLimitingInterface`) and
/// runs a goroutine per delaying queue plus one for its metrics; this one type does all three
/// and starts nothing (see *Time*; gauges are computed when scraped).
///
/// # Semantics
///
/// - An item is *dirty* from an add until a worker gets it, and *in flight* from
///   [`get`](Self::get) until [`done`](Self::done). Adding a dirty item does nothing; adding an
///   item in flight marks it dirty, and `done` queues it again, so a key changed while it is
///   being worked on is worked on once more afterwards, never by two workers at once.
/// - Items are handed out in the order they became ready.
/// - [`add_after`](Self::add_after) holds an item back for a delay; a pending delay only ever
///   moves earlier. [`add_rate_limited`](Self::add_rate_limited) asks the queue's
///   [`RateLimiter`] for the delay.
/// - After [`shutdown_with_drain`](Self::shutdown_with_drain) adds are ignored and delayed
///   items dropped, items already queued are still handed out, `get` returns [`ShutDown`] once
///   none is left, and the call waits for the items in flight. After a plain
///   [`shutdown`](Self::shutdown) `get` returns [`ShutDown`] at once.
///
/// # Consistency
///
/// Every operation takes the queue's one lock briefly; none runs user code under it except the
/// item's `Hash`, `Eq` and `Clone`. [`len`](Self::len) and [`stats`](Self::stats) are exact at
/// the instant they take the lock and stale right after. Rate limiters keep their own lock and
/// are asked outside the queue's.
///
/// # Time
///
/// Delayed items are moved into the queue by whoever touches it next (an add, a `get`, `done`,
/// `len`) once their instant has passed, at their instant's place in the order. An idle
/// `get` waits for the earliest one: with a real clock one waiting worker sets a timer (the
/// others sleep until woken), with a [`FakeClock`](super::FakeClock) the thread calling
/// `advance` moves them. No thread or task is started by the queue.
///
/// # Examples
///
/// ```
/// use informer::workqueue::WorkQueue;
///
/// let queue = WorkQueue::new();
/// queue.add("default/web");
/// queue.add("default/web"); // already queued: dropped
/// assert_eq!(queue.len(), 1);
///
/// let key = queue.get().unwrap();
/// queue.add(key); // in flight: marked dirty, queued again at `done`
/// assert_eq!(queue.len(), 0);
/// queue.done(&key);
/// assert_eq!(queue.len(), 1);
/// ```
pub struct WorkQueue<T> {
    shared: Arc<Shared<T>>,
}

impl<T: Hash + Eq + Clone + Send + 'static> WorkQueue<T> {
    /// An unnamed queue on the real clock with [`default_controller_rate_limiter`] and no
    /// metrics.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder to set the name, clock, rate limiter and metrics.
    pub fn builder() -> Builder<T> {
        Builder {
            name: String::new(),
            clock: None,
            limiter: None,
            metrics: None,
        }
    }

    /// The name given to the builder (the `name` label of the metrics).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Marks `item` as needing processing (client-go `Add`): queued if it is neither queued nor
    /// in flight, queued again at its `done` if it is in flight, dropped if already queued or if
    /// the queue is shutting down.
    pub fn add(&self, item: T) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        if st.shutting_down {
            return;
        }
        let (now, n) = sh.promote(&mut st);
        let stamp = sh.stamp(&st, now);
        let pushed = st.add(item, stamp);
        let wake = st.wake_ready(n + usize::from(pushed));
        wake.fire(sh, st);
    }

    /// Adds `item` once `delay` has passed on the queue's clock (client-go `AddAfter`); a zero
    /// delay adds it now. If `item` already waits for an earlier instant, that instant stays;
    /// if for a later one, it moves to this one. Ignored while shutting down. Delays above
    /// about 100 years are clamped to that. Counts one retry in the metrics.
    pub fn add_after(&self, item: T, delay: Duration) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        if st.shutting_down {
            return;
        }
        st.count_retry();
        let now = sh.clock.now();
        let n = st.promote_due(now);
        let mut wake = st.wake_ready(n);
        if delay.is_zero() {
            let stamp = st.timed().then_some(now);
            let pushed = st.add(item, stamp);
            wake = wake.and(st.wake_ready(usize::from(pushed)));
        } else if let Some(at) = now.checked_add(delay.min(MAX_DELAY)) {
            let earliest = st.schedule(item, at);
            // A new earliest deadline: someone must (re)time it.
            if earliest && !sh.manual && st.timer.is_none_or(|t| at < t) {
                wake = wake.and(st.wake_ready(1));
            }
        }
        wake.fire(sh, st);
    }

    /// Adds `item` after the delay the rate limiter gives for one more failure of it
    /// (client-go `AddRateLimited`). Ignored (and not counted as a failure) while shutting down.
    pub fn add_rate_limited(&self, item: T) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.shared.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Clears the rate limiter's failure history of `item` (client-go `Forget`). Call it when
    /// the item succeeded or is given up on; it does not remove the item from the queue.
    pub fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    /// How many failures of `item` the rate limiter has recorded since its last
    /// [`forget`](Self::forget) (client-go `NumRequeues`).
    pub fn num_requeues(&self, item: &T) -> u64 {
        self.shared.limiter.num_requeues(item)
    }

    /// Blocks until an item is ready and hands it out; the caller must call
    /// [`done`](Self::done) with it when finished (client-go `Get`).
    ///
    /// # Errors
    /// [`ShutDown`] once the queue is shutting down and no item is left, or at once after a
    /// plain [`shutdown`](Self::shutdown): the worker should return. While draining
    /// ([`shutdown_with_drain`](Self::shutdown_with_drain)) items queued before are still
    /// handed out first.
    pub fn get(&self) -> Result<T, ShutDown> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        let mut timer = None;
        loop {
            let held = st.release_timer(&mut timer);
            let (outcome, wake) = sh.try_take(&mut st, held);
            if let Some(outcome) = outcome {
                wake.fire(sh, st);
                return outcome;
            }
            let deadline = if sh.manual {
                None
            } else {
                st.claim_timer(&mut timer)
            };
            st.sync_waiters += 1;
            st = match deadline {
                None => sh.ready_cv.wait(st).unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let timeout = at.saturating_duration_since(sh.clock.now());
                    match sh.ready_cv.wait_timeout(st, timeout) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    }
                }
            };
            st.sync_waiters -= 1;
        }
    }

    /// [`get`](Self::get) for async workers: waits without blocking the thread.
    ///
    /// # Errors
    /// [`ShutDown`] as for [`get`](Self::get).
    ///
    /// # Panics
    /// With a clock of [`Advance::Real`] and delayed items pending, the wait uses a tokio timer:
    /// it panics outside a tokio runtime with time enabled.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call takes no item, and a wake-up meant for it passes to another
    /// waiter.
    pub async fn get_async(&self) -> Result<T, ShutDown> {
        let sh = &*self.shared;
        let mut waiter = AsyncWaiter {
            shared: sh,
            registered: false,
            timer: None,
        };
        loop {
            let mut notified = pin!(sh.ready_notify.notified());
            // Registered before looking at the state: a wake-up sent after the check reaches us.
            notified.as_mut().enable();
            let deadline = {
                let mut st = sh.lock();
                if waiter.registered {
                    st.async_waiters -= 1;
                    waiter.registered = false;
                }
                let held = st.release_timer(&mut waiter.timer);
                let (outcome, wake) = sh.try_take(&mut st, held);
                if let Some(outcome) = outcome {
                    wake.fire(sh, st);
                    return outcome;
                }
                st.async_waiters += 1;
                waiter.registered = true;
                if sh.manual {
                    None
                } else {
                    st.claim_timer(&mut waiter.timer)
                }
            };
            match deadline {
                None => notified.await,
                Some(at) => {
                    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(at));
                    tokio::select! {
                        () = notified => {}
                        () = sleep => {}
                    }
                }
            }
        }
    }

    /// Marks `item` as finished (client-go `Done`). If it was added while in flight it is
    /// queued again now. An item that is not in flight is ignored.
    pub fn done(&self, item: &T) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        let (now, n) = sh.promote(&mut st);
        let stamp = sh.stamp(&st, now);
        let finished = st.done(item, stamp);
        let mut wake = st.wake_ready(n + usize::from(finished == Finished::Requeued));
        // Only a pending drain waits for this.
        if finished != Finished::NotInFlight && st.drain && st.in_flight() == 0 {
            wake.idle = true;
        }
        wake.fire(sh, st);
    }

    /// Items ready to be handed out now (client-go `Len`): neither items in flight nor items
    /// waiting for a delay count.
    pub fn len(&self) -> usize {
        let sh = &*self.shared;
        let mut st = sh.lock();
        let (_, n) = sh.promote(&mut st);
        let wake = st.wake_ready(n);
        let len = st.ready_len();
        wake.fire(sh, st);
        len
    }

    /// Whether [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts shutting down (client-go `ShutDown`): later adds are ignored, delayed items are
    /// dropped, every waiting `get` wakes and every `get` from now on returns [`ShutDown`],
    /// even with items still queued (unlike client-go, which hands them out: a plain shutdown
    /// means stop now; use [`shutdown_with_drain`](Self::shutdown_with_drain) to finish the
    /// queued work). Also ends a `shutdown_with_drain` wait, and with it the draining.
    pub fn shutdown(&self) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        st.shut_down(false);
        Wake {
            threads: usize::MAX,
            tasks: usize::MAX,
            idle: true,
        }
        .fire(sh, st);
    }

    /// Shuts down as [`shutdown`](Self::shutdown), then blocks until every item in flight is
    /// `done` (client-go `ShutDownWithDrain`). Items still queued may be handed out meanwhile;
    /// the wait ends when none is in flight, or when `shutdown` is called.
    ///
    /// Workers must keep calling `done` for what they got, or this never returns.
    pub fn shutdown_with_drain(&self) {
        let sh = &*self.shared;
        self.begin_drain();
        let mut st = sh.lock();
        while st.drain && st.in_flight() > 0 {
            st.drain_waiters += 1;
            st = sh.idle_cv.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.drain_waiters -= 1;
        }
    }

    /// [`shutdown_with_drain`](Self::shutdown_with_drain) for async callers.
    ///
    /// # Cancel safety
    /// Dropping the future stops waiting; the queue stays shut down.
    pub async fn shutdown_with_drain_async(&self) {
        let sh = &*self.shared;
        self.begin_drain();
        loop {
            let mut idle = pin!(sh.idle_notify.notified());
            idle.as_mut().enable();
            {
                let st = sh.lock();
                if !st.drain || st.in_flight() == 0 {
                    return;
                }
            }
            idle.await;
        }
    }

    fn begin_drain(&self) {
        let sh = &*self.shared;
        let mut st = sh.lock();
        st.shut_down(true);
        Wake {
            threads: usize::MAX,
            tasks: usize::MAX,
            idle: false,
        }
        .fire(sh, st);
    }

    /// Whether shutdown started (client-go `ShuttingDown`).
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// The queue's counters now. `unfinished_work` and `longest_running` are zero unless the
    /// queue was built with [`Builder::metrics`].
    pub fn stats(&self) -> QueueStats {
        self.shared.report().stats
    }
}

/// Unregisters a cancelled `get_async` and passes its timer on.
struct AsyncWaiter<'a, T: Hash + Eq + Clone + Send + 'static> {
    shared: &'a Shared<T>,
    registered: bool,
    timer: Option<Instant>,
}

impl<T: Hash + Eq + Clone + Send + 'static> Drop for AsyncWaiter<'_, T> {
    fn drop(&mut self) {
        if !self.registered && self.timer.is_none() {
            return;
        }
        let sh = self.shared;
        let mut st = sh.lock();
        if self.registered {
            st.async_waiters -= 1;
        }
        let wake = if st.release_timer(&mut self.timer) && st.needs_timer() {
            st.wake_ready(1)
        } else {
            Wake::default()
        };
        wake.fire(sh, st);
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.shared.name)
            .field("clock", &self.shared.clock)
            .field("rate_limiter", &self.shared.limiter)
            .finish_non_exhaustive()
    }
}

/// Builds a [`WorkQueue`]. Defaults: no name, [`SystemClock`],
/// [`default_controller_rate_limiter`] on the queue's clock, no metrics.
pub struct Builder<T> {
    name: String,
    clock: Option<Arc<dyn Clock>>,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    metrics: Option<QueueMetrics>,
}

impl<T: Hash + Eq + Clone + Send + 'static> Builder<T> {
    /// The queue's name: the `name` label of its metrics and its `Debug` output.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The clock for delays, the default rate limiter and metrics. Tests pass a
    /// [`FakeClock`](super::FakeClock).
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The rate limiter behind [`WorkQueue::add_rate_limited`], `forget` and `num_requeues`.
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Reports the queue through `metrics` (see [`QueueMetrics`]) and turns on the timings
    /// behind the latency histograms and in-flight gauges (one clock read per add, get and
    /// done).
    #[must_use]
    pub fn metrics(mut self, metrics: &QueueMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// The queue.
    pub fn build(self) -> WorkQueue<T> {
        let clock: Arc<dyn Clock> = self.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter(Arc::clone(&clock))));
        let timed = self.metrics.is_some();
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared<T>>| {
            let weak = weak.clone();
            let on_advance: Arc<OnAdvance> = Arc::new(move || {
                if let Some(sh) = weak.upgrade() {
                    sh.on_clock_advance();
                }
            });
            let manual = clock.subscribe(Arc::downgrade(&on_advance)) == Advance::Manual;
            Shared {
                state: Mutex::new(State::new(timed)),
                ready_cv: Condvar::new(),
                ready_notify: Notify::new(),
                idle_cv: Condvar::new(),
                idle_notify: Notify::new(),
                clock,
                manual,
                limiter,
                name: self.name,
                _on_advance: manual.then_some(on_advance),
            }
        });
        if let Some(metrics) = &self.metrics {
            let weak: std::sync::Weak<dyn StatsSource> = Arc::downgrade(&shared) as _;
            metrics.add_queue(weak);
        }
        WorkQueue { shared }
    }
}

impl<T> fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("clock", &self.clock)
            .field("rate_limiter", &self.limiter)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}
