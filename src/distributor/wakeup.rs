//! [`Wakeup`]: where a listener thread sleeps while its feed is empty, and how publishers wake
//! it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Checks of the feed before a listener thread yields or parks, the `n`th after `2^n` spin-loop
/// hints (127 in all, as crossbeam's `Backoff` spins): checking more often slowed the publisher,
/// whose next send then found the channel's cache line taken by the reader.
const SPIN_CHECKS: u32 = 7;

/// Most `sched_yield`s before parking, for a thread whose yields lately found work.
/// crossbeam's blocking `recv` always yields up to four times before it parks: with four
/// listener threads on two cores at a paced rate, where a yield almost never finds the next
/// event, those yields were a third of all CPU time (`perf record` of `informer flood --rate
/// 15000`, 2026-12-05), each thread handing the core to another idle listener instead of to
/// the pipeline. In a burst, though, the next batch often comes within a yield, and parking
/// at once would cost the publisher an `unpark` per batch and listener. So the budget adapts:
/// it doubles when waiting (or a park shorter than [`SHORT_PARK`]) found work, and drops by one
/// after each longer park.
const MAX_YIELDS: u32 = 8;

/// A park shorter than this counts as work that a few more yields would have found (a burst);
/// a longer one (a paced or idle feed) lowers the yield budget. Chosen by alternated runs
/// (2026-12-05): at 20 µs the listeners of a flood paced at 37 500 events/s kept yielding
/// (parks there last about the 27 µs between events); with no such rule (a budget starting at 0
/// and halved after every park) the `distributor` bench's 8 listeners ran at 0.37–0.66× the
/// build on crossbeam's `recv`; at 8 µs both hold.
const SHORT_PARK: Duration = Duration::from_micros(8);

/// A listener thread's record of how its recent waits ended (see [`MAX_YIELDS`]). It starts
/// at crossbeam's four yields.
#[derive(Debug)]
pub(crate) struct Patience {
    yields: u32,
}

impl Default for Patience {
    fn default() -> Self {
        Patience { yields: 4 }
    }
}

/// The parking spot of one listener thread. The thread raises `sleeping` before it parks and
/// re-checks its feed; a publisher checks `sleeping` after queueing. Each side puts a
/// sequentially consistent fence between its write and its read, so at least one of them sees
/// the other's write: either the thread finds the new message, or the publisher finds the
/// thread asleep and unparks it (`unpark` before `park` leaves a token, so that order is safe
/// too). A busy consumer costs the publisher a fence and a load, no system call.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    sleeping: AtomicBool,
    /// Set once the publishing side is gone: the thread stops waiting.
    closed: AtomicBool,
    /// The listener thread, set by itself before it first sleeps.
    thread: OnceLock<Thread>,
}

impl Wakeup {
    /// Called on the listener thread before it first waits.
    pub(crate) fn register(&self) {
        let _ = self.thread.set(thread::current());
    }

    /// Whether the publishing side is gone (see [`Wakeup::close`]).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Returns once `ready()` is true, the wakeup is closed, or a publisher woke the thread
    /// (the caller checks its feed again: wake-ups may be spurious). Only the registered
    /// thread may call this.
    pub(crate) fn wait(&self, patience: &mut Patience, ready: impl Fn() -> bool) {
        let found = |p: &mut Patience| p.yields = (p.yields * 2).clamp(1, MAX_YIELDS);
        for n in 0..SPIN_CHECKS {
            for _ in 0..1u32 << n {
                std::hint::spin_loop();
            }
            if ready() || self.is_closed() {
                return found(patience);
            }
        }
        for _ in 0..patience.yields {
            thread::yield_now();
            if ready() || self.is_closed() {
                return found(patience);
            }
        }
        // Release, with the publisher's Acquire swap: a publisher that finds the flag also sees
        // the thread registered in `thread`.
        self.sleeping.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        if !ready() && !self.is_closed() {
            let parked = Instant::now();
            thread::park();
            if parked.elapsed() < SHORT_PARK {
                found(patience);
            } else {
                patience.yields = patience.yields.saturating_sub(1);
            }
        }
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Wakes the thread if it sleeps; call after queueing for it.
    pub(crate) fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && self.sleeping.swap(false, Ordering::Acquire)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }

    /// Marks the publishing side gone and wakes the thread, so that it does not sleep on a feed
    /// nobody will fill again.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    use super::*;

    /// Every value a publisher makes is seen by the sleeping consumer: no lost wake-up,
    /// whichever side runs first.
    #[test]
    fn a_value_published_while_the_consumer_goes_to_sleep_is_never_missed() {
        let w = Arc::new(Wakeup::default());
        let value = Arc::new(AtomicU64::new(0));
        const N: u64 = 20_000;
        let consumer = {
            let (w, value) = (w.clone(), value.clone());
            thread::spawn(move || {
                w.register();
                let (mut seen, mut patience) = (0, Patience::default());
                while seen < N {
                    let v = value.load(Ordering::Acquire);
                    if v > seen {
                        seen = v;
                        continue;
                    }
                    w.wait(&mut patience, || value.load(Ordering::Acquire) > seen);
                }
                seen
            })
        };
        for i in 1..=N {
            value.store(i, Ordering::Release);
            w.wake();
            if i % 64 == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(consumer.join().unwrap(), N);
    }

    #[test]
    fn close_releases_a_sleeping_consumer() {
        let w = Arc::new(Wakeup::default());
        let consumer = {
            let w = w.clone();
            thread::spawn(move || {
                w.register();
                while !w.is_closed() {
                    w.wait(&mut Patience::default(), || false);
                }
            })
        };
        w.close();
        consumer.join().unwrap();
    }
}
