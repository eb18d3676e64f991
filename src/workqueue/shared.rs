//! What every handle of one queue shares ([`Shared`]: the state under its one lock, the
//! waiters' condvars and notifies, the clock and the rate limiter), and the wake-ups an
//! operation decides under that lock ([`Wake`]).

use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

use super::clock::{Clock, OnAdvance};
use super::error::ShutDown;
use super::metrics::{Report, StatsSource};
use super::rate_limiter::RateLimiter;
use super::state::State;

pub(super) struct Shared<T> {
    pub(super) state: Mutex<State<T>>,
    /// Blocking getters.
    pub(super) ready_cv: Condvar,
    /// Async getters.
    pub(super) ready_notify: Notify,
    /// `shutdown_with_drain` callers.
    pub(super) idle_cv: Condvar,
    pub(super) idle_notify: Notify,
    pub(super) clock: Arc<dyn Clock>,
    /// The clock moves due items itself (`Advance::Manual`): set no timers.
    pub(super) manual: bool,
    pub(super) limiter: Box<dyn RateLimiter<T>>,
    pub(super) name: String,
    /// Keeps the clock's callback alive as long as the queue (the clock holds it weakly).
    pub(super) _on_advance: Option<Arc<OnAdvance>>,
}

/// Wake-ups decided under the lock. `usize::MAX` means all.
///
/// They are sent before the lock is released: measured on 2 cores with 8 workers
/// (`benches/workqueue.rs`), waking after unlocking let the woken worker preempt the adder
/// right away and cost about 3x the context switches (and 2x the time) of waking under the lock.
#[derive(Debug, Default)]
#[must_use]
pub(super) struct Wake {
    pub(super) threads: usize,
    pub(super) tasks: usize,
    /// Wake `shutdown_with_drain` callers (threads only if one is blocked).
    pub(super) idle: bool,
}

impl Wake {
    pub(super) fn and(mut self, other: Wake) -> Wake {
        self.threads = self.threads.saturating_add(other.threads);
        self.tasks = self.tasks.saturating_add(other.tasks);
        self.idle |= other.idle;
        self
    }

    /// Wakes blocked threads, releases the lock, then wakes tasks (a task's waker never runs
    /// under the queue's lock).
    pub(super) fn fire<T>(self, sh: &Shared<T>, st: MutexGuard<'_, State<T>>) {
        match self.threads {
            0 => {}
            usize::MAX => sh.ready_cv.notify_all(),
            n => (0..n).for_each(|_| sh.ready_cv.notify_one()),
        }
        if self.idle && st.drain_waiters > 0 {
            sh.idle_cv.notify_all();
        }
        drop(st);
        match self.tasks {
            0 => {}
            usize::MAX => sh.ready_notify.notify_waiters(),
            n => (0..n).for_each(|_| sh.ready_notify.notify_one()),
        }
        if self.idle {
            sh.idle_notify.notify_waiters();
        }
    }
}

impl<T> State<T> {
    /// Wakes up to `n` waiters of each kind for `n` newly ready items. Both kinds are woken
    /// because a counted waiter may already be awake: a woken one that finds nothing waits again.
    pub(super) fn wake_ready(&self, n: usize) -> Wake {
        Wake {
            threads: n.min(self.sync_waiters),
            tasks: n.min(self.async_waiters),
            idle: false,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> Shared<T> {
    pub(super) fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves due delayed items into the queue. Returns the instant read (if any) and how many
    /// items became ready.
    pub(super) fn promote(&self, st: &mut State<T>) -> (Option<Instant>, usize) {
        if !st.has_waiting() {
            return (None, 0);
        }
        let now = self.clock.now();
        (Some(now), st.promote_due(now))
    }

    /// The instant to stamp an operation with, if the queue keeps timings.
    pub(super) fn stamp(&self, st: &State<T>, now: Option<Instant>) -> Option<Instant> {
        if st.timed() {
            Some(now.unwrap_or_else(|| self.clock.now()))
        } else {
            None
        }
    }

    pub(super) fn on_clock_advance(&self) {
        let mut st = self.lock();
        let (_, n) = self.promote(&mut st);
        let wake = st.wake_ready(n);
        wake.fire(self, st);
    }

    /// One attempt of `get` under the lock: an item, the shutdown signal, or `None` to wait.
    /// `held` says the caller gave the timer back at the top of this attempt: if it leaves now,
    /// another waiter must take the timer over.
    pub(super) fn try_take(
        &self,
        st: &mut State<T>,
        held: bool,
    ) -> (Option<Result<T, ShutDown>>, Wake) {
        // A plain shutdown hands out nothing more (unlike client-go, see `shutdown`);
        // `shutdown_with_drain` keeps handing out what was queued.
        if st.shutting_down && !st.drain {
            return (Some(Err(ShutDown)), Wake::default());
        }
        let (now, promoted) = self.promote(st);
        let stamp = self.stamp(st, now);
        let outcome = match st.take(stamp) {
            Some(item) => Ok(item),
            None if st.shutting_down => Err(ShutDown),
            // Nothing was promoted either (it would have been taken).
            None => return (None, Wake::default()),
        };
        // The caller takes one of the promoted items itself.
        let mut wake = st.wake_ready(promoted.saturating_sub(1));
        if held && st.needs_timer() {
            wake = wake.and(st.wake_ready(1));
        }
        (Some(outcome), wake)
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> StatsSource for Shared<T> {
    fn report(&self) -> Report {
        let mut st = self.lock();
        let (now, n) = self.promote(&mut st);
        let wake = st.wake_ready(n);
        let now = self.stamp(&st, now);
        let report = st.report(&self.name, now);
        wake.fire(self, st);
        report
    }
}
