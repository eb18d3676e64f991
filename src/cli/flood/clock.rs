//! When each generator step's changes existed on the server, for server-change-to-handler
//! latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Changes made per generator step of an unpaced flood (a paced one makes one per step); the
/// time of each step is recorded for latencies.
pub(super) const STEP: u64 = 256;

/// Entries of the step-time table (8 MiB): runs of more steps (over 268 million events at 256
/// per step) keep flooding but record no latency samples past it.
pub(super) const MAX_STEPS: usize = 1 << 20;

/// When each generator step finished, indexed by step: a handler looks up the step of the
/// resourceVersion it sees to measure server-change-to-handler latency.
#[derive(Debug)]
pub(super) struct Clock {
    /// Time zero of the step times.
    pub(super) start: Instant,
    /// Changes per step.
    step: u64,
    /// The resourceVersion of the first change of step 0; 0 until the flood starts.
    first_rv: AtomicU64,
    /// Nanoseconds after `start` at which each step finished; 0 while it has not.
    step_done_ns: Vec<AtomicU64>,
}

impl Clock {
    /// A table of `steps` steps of `step` changes each, starting now.
    pub(super) fn new(step: u64, steps: usize) -> Self {
        Clock {
            start: Instant::now(),
            step,
            first_rv: AtomicU64::new(0),
            step_done_ns: (0..steps).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Sets the resourceVersion of step 0's first change.
    pub(super) fn set_first_rv(&self, rv: u64) {
        self.first_rv.store(rv, Ordering::Release);
    }

    /// Nanoseconds since the step holding `rv` finished; `None` before the flood, for
    /// resourceVersions before it, and for steps not finished or past the table.
    pub(super) fn latency_ns(&self, rv: u64) -> Option<u64> {
        let first = self.first_rv.load(Ordering::Acquire);
        if first == 0 || rv < first {
            return None;
        }
        let step = ((rv - first) / self.step) as usize;
        let done = self.step_done_ns.get(step)?.load(Ordering::Acquire);
        if done == 0 {
            return None;
        }
        let now = self.start.elapsed().as_nanos() as u64;
        Some(now.saturating_sub(done))
    }

    /// Records `step`'s time as now (ignored past the table): called as it starts and again
    /// as it finishes, so a change seen mid-step is measured from the step's start.
    pub(super) fn mark(&self, step: usize) {
        if let Some(s) = self.step_done_ns.get(step) {
            s.store(self.start.elapsed().as_nanos() as u64, Ordering::Release);
        }
    }
}
