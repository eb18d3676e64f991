//! What [`super::handoff`] is built on, in normal builds: std's `Arc`, arc-swap's `ArcSwap` as
//! the published cell, and a spin-then-sleep wait. `tests/loom_handoff.rs` supplies loom's
//! versions of the same names to model-check the hand-back.

use std::thread;
use std::time::{Duration, Instant};

pub(crate) use std::sync::Arc;

/// The cell readers load the published buffer from.
pub(crate) type Current<T> = arc_swap::ArcSwap<T>;

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

/// Waits until `arc` is the only reference to its value: spins for up to [`SPIN`] (or only a
/// few spins when `limit` is zero), then sleeps [`NAP`] between checks until `limit` has
/// passed. Returns whether it is the only one.
pub(crate) fn wait_unique<T>(arc: &mut Arc<T>, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..SPINS {
            if Arc::get_mut(arc).is_some() {
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
