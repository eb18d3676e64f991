//! When each generator step's changes were made on the server, for server-change-to-handler
//! latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Changes made per generator step of an unpaced flood (a paced one makes one per step); the
/// time of each step is recorded for latencies.
pub(super) const STEP: u64 = 256;

/// Most slots of the step-time ring (16 MiB): a change is found while fewer than this many
/// steps came after its own (10 s of a paced flood at 100 000 steps/s); one seen later than
/// that gives no latency sample.
pub(super) const RING_STEPS: usize = 1 << 20;

/// When each generator step was last marked (as it started, then as it finished), in a ring
/// indexed by step: a handler looks up the step of the resourceVersion it sees to measure
/// server-change-to-handler latency.
#[derive(Debug)]
pub(super) struct Clock {
    /// Time zero of the step times.
    pub(super) start: Instant,
    /// Changes per step.
    step: u64,
    /// The resourceVersion of the first change of step 0; 0 until the flood starts.
    first_rv: AtomicU64,
    /// Per slot: the step it holds plus one (0: none, or being rewritten), and nanoseconds
    /// after `start` at which that step was last marked.
    slots: Vec<(AtomicU64, AtomicU64)>,
}

impl Clock {
    /// A ring for `steps` steps (at most [`RING_STEPS`], at least 1) of `step` changes each,
    /// starting now.
    pub(super) fn new(step: u64, steps: u64) -> Self {
        let slots = steps.clamp(1, RING_STEPS as u64) as usize;
        Clock {
            start: Instant::now(),
            step,
            first_rv: AtomicU64::new(0),
            slots: (0..slots)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }

    /// The slot of `step`.
    fn slot(&self, step: u64) -> &(AtomicU64, AtomicU64) {
        &self.slots[(step % self.slots.len() as u64) as usize]
    }

    /// Sets the resourceVersion of step 0's first change.
    pub(super) fn set_first_rv(&self, rv: u64) {
        self.first_rv.store(rv, Ordering::Release);
    }

    /// Nanoseconds since the step holding `rv` was last marked; `None` before the flood, for
    /// resourceVersions before it, for steps not yet marked, and for steps the ring has
    /// overwritten since.
    pub(super) fn latency_ns(&self, rv: u64) -> Option<u64> {
        let first = self.first_rv.load(Ordering::Acquire);
        if first == 0 || rv < first {
            return None;
        }
        let step = (rv - first) / self.step;
        let (tag, ns) = self.slot(step);
        let want = step + 1;
        if tag.load(Ordering::Acquire) != want {
            return None;
        }
        let at = ns.load(Ordering::Acquire);
        // Rewritten for a later step while we read: no sample rather than a wrong one.
        if tag.load(Ordering::Acquire) != want {
            return None;
        }
        let now = self.start.elapsed().as_nanos() as u64;
        Some(now.saturating_sub(at))
    }

    /// Records `step`'s time as now: called as it starts and again as it finishes, so a
    /// change seen mid-step is measured from the step's start.
    pub(super) fn mark(&self, step: u64) {
        let (tag, ns) = self.slot(step);
        let want = step + 1;
        if tag.load(Ordering::Acquire) != want {
            tag.store(0, Ordering::Release);
        }
        ns.store(self.start.elapsed().as_nanos() as u64, Ordering::Release);
        tag.store(want, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_step_is_found_until_the_ring_overwrites_it() {
        let clock = Clock::new(2, u64::MAX);
        assert_eq!(clock.latency_ns(10), None, "before the flood");
        clock.set_first_rv(10);
        assert_eq!(clock.latency_ns(9), None, "before the first change");
        assert_eq!(clock.latency_ns(10), None, "step 0 not marked yet");
        clock.mark(0);
        assert!(clock.latency_ns(10).is_some());
        assert!(clock.latency_ns(11).is_some(), "the step's second change");
        assert_eq!(clock.latency_ns(12), None, "step 1 not marked");
        // Step RING_STEPS reuses step 0's slot: step 0 is gone, the new one is found.
        let wrapped = RING_STEPS as u64;
        clock.mark(wrapped);
        assert_eq!(clock.latency_ns(10), None);
        assert!(clock.latency_ns(10 + 2 * wrapped).is_some());
        // A short flood's ring is as long as its steps.
        let short = Clock::new(1, 3);
        short.set_first_rv(1);
        short.mark(2);
        assert!(short.latency_ns(3).is_some());
        short.mark(5);
        assert_eq!(short.latency_ns(3), None, "step 5 took step 2's slot");
        assert!(short.latency_ns(6).is_some());
    }
}
