//! What [`super::handoff`] is built on, in normal builds: std's `Arc`, the published cell
//! ([`Current`]: arc-swap's `ArcSwap` beside a plain pointer read under a hazard slot), and a
//! spin-then-sleep wait. `tests/loom_handoff.rs` supplies loom's versions of the same names to
//! model-check the hand-back.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub(crate) use std::sync::Arc;

use super::hazard;

/// The cell readers load the published buffer from, two ways: a counted reference through
/// arc-swap (`load`, `load_full`: what a `Snapshot` holds), or a borrow for the length of one
/// call under a hazard slot (`read`: no reference count touched, see [`super::hazard`]).
pub(crate) struct Current<T> {
    cell: arc_swap::ArcSwap<T>,
    /// The buffer `cell` holds, stored just before it (between the two stores `swap` makes,
    /// `cell` still holds the one before; both are alive then, held by the writer).
    published: AtomicPtr<T>,
    /// Buffers the writer left when it was dropped while reads announced them: freed with the
    /// cell, when no `Store` call can be in progress any more.
    buried: Mutex<Vec<Arc<T>>>,
}

impl<T> Current<T> {
    pub(crate) fn new(value: Arc<T>) -> Self {
        let published = AtomicPtr::new(Arc::as_ptr(&value).cast_mut());
        Current {
            cell: arc_swap::ArcSwap::new(value),
            published,
            buried: Mutex::new(Vec::new()),
        }
    }

    /// Publishes `value`; returns the buffer published before, which the caller keeps alive
    /// (and unchanged) until [`wait_unique`] finds no reader in it.
    pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
        let p = Arc::as_ptr(&value).cast_mut();
        // `published` first: arc-swap's `swap` stores its pointer at once and then settles its
        // readers' debts (a walk of every arc-swap reader in the process), and counted loads
        // wait only while the two pointers differ, which is then a few instructions.
        self.published.store(p, Ordering::SeqCst);
        self.cell.swap(value)
    }

    /// A counted guard on the published buffer (arc-swap's `load`).
    ///
    /// Never older than what a `read` on this thread saw before, nor newer than what one sees
    /// after: between `swap`'s two stores, `published` is ahead of `cell`, and a load that
    /// finds them apart waits for the second store, which follows the first within a few
    /// instructions (it spins, then yields, then sleeps, so that a writer preempted there, even
    /// by a reader of higher priority on its core, gets to run).
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<T>> {
        let mut spins = 0u32;
        loop {
            let guard = self.cell.load();
            if std::ptr::eq(Arc::as_ptr(&guard), self.published.load(Ordering::Acquire)) {
                return guard;
            }
            drop(guard);
            backoff(&mut spins);
        }
    }

    /// A counted reference to the published buffer (as [`Current::load`]).
    pub(crate) fn load_full(&self) -> Arc<T> {
        Arc::clone(&self.load())
    }

    /// `f` on the published buffer, borrowed under a hazard slot (through arc-swap when this
    /// thread has none free).
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let mut f = Some(f);
        if let Some(r) = hazard::read(&self.published, &mut f) {
            return r;
        }
        let f = f
            .take()
            .expect("a read that found no slot leaves its closure");
        f(&self.load())
    }

    /// Keeps `buffer` (no longer published) until the cell is dropped, if a read in progress
    /// announces it; drops it now otherwise. What the writer does with its buffers when it is
    /// dropped: it must not wait for those reads, which may be its own thread's (a `Store::with`
    /// closure that drops the writer).
    pub(crate) fn bury(&self, buffer: Arc<T>) {
        if hazard::announced(Arc::as_ptr(&buffer)) {
            self.buried
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(buffer);
        }
    }
}

/// A short spin, then a few yields, then short sleeps.
fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 72 {
        thread::yield_now();
    } else {
        thread::sleep(Duration::from_micros(10));
    }
}

/// The value of an `Arc` the caller holds the only reference to. The hand-back only calls
/// this on a buffer it has checked is unique (the loom model fails otherwise); were it ever
/// shared, this would copy it (`Arc::make_mut`) rather than panic, and debug builds assert.
pub(crate) fn make_mut<T: Clone>(arc: &mut Arc<T>) -> &mut T {
    debug_assert!(
        Arc::get_mut(arc).is_some(),
        "the store's writer would write a buffer a reader holds"
    );
    Arc::make_mut(arc)
}

/// How long [`wait_unique`] busy-waits before it starts sleeping: a `Store` call in progress
/// finishes well within it unless its thread was preempted.
const SPIN: Duration = Duration::from_micros(50);

/// How long [`wait_unique`] sleeps between checks once [`SPIN`] has passed (at least: timer
/// slack adds to it). By then the reader it waits for is most likely preempted in the middle
/// of a call; sleeping, rather than yielding (which keeps the CPU busy when nothing else is
/// queued on it), lets the scheduler run that reader on this CPU. `BENCHMARKS.md` has the
/// measurement.
const NAP: Duration = Duration::from_micros(20);

/// Spins (without looking at the clock) before the first time check, and between checks.
const SPINS: u32 = 64;

/// Whether nobody but the caller reads `arc`'s value: no other reference, and no read in
/// progress announces it ([`hazard::announced`]; call only on a buffer no longer published).
fn unique<T>(arc: &mut Arc<T>) -> bool {
    Arc::get_mut(arc).is_some() && !hazard::announced(Arc::as_ptr(arc))
}

/// Whether a buffer the writer no longer publishes is still read: referenced elsewhere, or
/// announced by a read in progress. One that is not may be dropped.
pub(crate) fn in_use<T>(arc: &Arc<T>) -> bool {
    Arc::strong_count(arc) > 1 || hazard::announced(Arc::as_ptr(arc))
}

/// Waits until `arc` is the only reference to its value and no read announces it: spins for
/// up to [`SPIN`] (or only a few spins when `limit` is zero), then sleeps [`NAP`] between checks
/// until `limit` has passed. Returns whether it is the writer's alone.
pub(crate) fn wait_unique<T>(arc: &mut Arc<T>, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..SPINS {
            if unique(arc) {
                return true;
            }
            std::hint::spin_loop();
        }
        let waited = start.elapsed();
        if waited >= limit {
            return false;
        }
        if waited >= SPIN {
            thread::sleep(NAP);
        }
    }
}
