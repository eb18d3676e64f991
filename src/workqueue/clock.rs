//! Time as the queue and the rate limiters see it: [`Clock`], the real [`SystemClock`] and the
//! test [`FakeClock`] (client-go injects `k8s.io/utils/clock` the same way).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// A callback a clock calls after its time moved (see [`Clock::subscribe`]).
pub type OnAdvance = dyn Fn() + Send + Sync;

/// How a clock's time moves, which decides how a queue waits for its next delayed item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advance {
    /// Time moves by itself at the pace of real time. A queue waits for a deadline with an OS
    /// timeout (a condition-variable timeout, or a tokio timer in
    /// [`WorkQueue::get_async`](super::WorkQueue::get_async)).
    Real,
    /// Time moves only when told, and the clock calls every subscribed callback after each move.
    /// A queue sets no timers: the thread that moves the clock moves due items into the queue.
    Manual,
}

/// A source of [`Instant`]s for delays, rate limits and metrics.
///
/// Implement it to drive a queue from your own time source; [`SystemClock`] and [`FakeClock`]
/// cover real use and tests.
pub trait Clock: fmt::Debug + Send + Sync + 'static {
    /// The current instant. Must never go backwards.
    fn now(&self) -> Instant;

    /// Called once by every queue built on this clock. A clock whose time moves by itself
    /// returns [`Advance::Real`] and drops `on_advance` (the default). A clock whose time moves
    /// only when told keeps `on_advance`, calls it (if it still upgrades) after every move and
    /// returns [`Advance::Manual`]. The callback takes the queue's lock: never call it while
    /// holding a lock that [`Clock::now`] takes.
    fn subscribe(&self, on_advance: Weak<OnAdvance>) -> Advance {
        drop(on_advance);
        Advance::Real
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
    fn subscribe(&self, on_advance: Weak<OnAdvance>) -> Advance {
        (**self).subscribe(on_advance)
    }
}

/// The real monotonic clock ([`Instant::now`]). The default of every queue and limiter.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that stands still until [`FakeClock::advance`] moves it; clones share one time.
///
/// Queues built on it never wait on a real timer: `advance` moves every item whose delay has
/// passed into its queue before it returns, so a test can assert on
/// [`WorkQueue::len`](super::WorkQueue::len) right after. client-go's tests use
/// `clock.FakeClock` the same way.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::{Clock, FakeClock, WorkQueue};
///
/// let clock = FakeClock::new();
/// let queue = WorkQueue::builder().clock(clock.clone()).build();
/// queue.add_after("a", Duration::from_secs(3));
/// assert_eq!(queue.len(), 0);
/// clock.advance(Duration::from_secs(3));
/// assert_eq!(queue.len(), 1);
/// ```
#[derive(Clone)]
pub struct FakeClock {
    inner: Arc<FakeInner>,
}

struct FakeInner {
    start: Instant,
    /// Nanoseconds since `start`. `AcqRel`/`Acquire`: a thread that reads the moved time also
    /// sees what the mover wrote before moving it (tests rely on that order).
    offset_nanos: AtomicU64,
    subscribers: Mutex<Vec<Weak<OnAdvance>>>,
}

impl FakeClock {
    /// A fake clock at an arbitrary start instant (the real `now` when created).
    pub fn new() -> Self {
        FakeClock {
            inner: Arc::new(FakeInner {
                start: Instant::now(),
                offset_nanos: AtomicU64::new(0),
                subscribers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Moves time forward by `by` (saturating at about 584 years past the start), then lets
    /// every queue built on this clock move its due items. Returns after they did.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // The closure always returns `Some`, so this never fails.
        let _ = self
            .inner
            .offset_nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old.saturating_add(by))
            });
        // Collect live callbacks and drop the list lock before calling them: a callback takes a
        // queue lock, and a queue calls `now` (no lock) under its own lock.
        let live: Vec<Arc<OnAdvance>> = {
            let mut subs = self
                .inner
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            subs.retain(|w| w.strong_count() > 0);
            subs.iter().filter_map(Weak::upgrade).collect()
        };
        for wake in live {
            wake();
        }
    }

    /// Time elapsed since the clock was created, as moved by [`FakeClock::advance`].
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.inner.offset_nanos.load(Ordering::Acquire))
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.inner.start + self.elapsed()
    }

    fn subscribe(&self, on_advance: Weak<OnAdvance>) -> Advance {
        self.inner
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(on_advance);
        Advance::Manual
    }
}
