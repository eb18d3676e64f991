//! Where a fault run's time went: the wait counters of the simulator and the reflector, and
//! their growth charged to the fault kind whose cycle was open.

use std::time::{Duration, Instant};

use informer::Informer;
use informer::reflector::ListerWatcher;
use informer::sim::SimStats;

use super::report::KindReport;

/// Counters whose growth during a fault's cycle is charged to that fault's kind.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WaitCounters {
    /// `SimStats::flood_wait_us`: the generator held back by flow control.
    pub(super) flood_wait_us: u64,
    /// `ReflectorStats::backoff_wait_us`.
    pub(super) backoff_us: u64,
    /// `ReflectorStats::retry_after_extra_us`.
    pub(super) retry_after_us: u64,
    /// `ReflectorStats::watch_timeouts`: stalled streams the reflector's deadline ended.
    watch_timeouts: u64,
    /// `ReflectorStats::relists`.
    relists: u64,
    /// `ReflectorStats::backoffs`.
    backoffs: u64,
}

impl WaitCounters {
    /// The counters now.
    pub(super) fn read<L: ListerWatcher>(sim: &SimStats, informer: &Informer<L>) -> Self {
        let r = informer
            .reflector_metrics()
            .map(|m| m.snapshot())
            .unwrap_or_default();
        WaitCounters {
            flood_wait_us: sim.flood_wait_us,
            backoff_us: r.backoff_wait_us,
            retry_after_us: r.retry_after_extra_us,
            watch_timeouts: r.watch_timeouts,
            relists: r.relists,
            backoffs: r.backoffs,
        }
    }

    /// Growth since `before`.
    fn since(self, before: WaitCounters) -> WaitCounters {
        WaitCounters {
            flood_wait_us: self.flood_wait_us.saturating_sub(before.flood_wait_us),
            backoff_us: self.backoff_us.saturating_sub(before.backoff_us),
            retry_after_us: self.retry_after_us.saturating_sub(before.retry_after_us),
            watch_timeouts: self.watch_timeouts.saturating_sub(before.watch_timeouts),
            relists: self.relists.saturating_sub(before.relists),
            backoffs: self.backoffs.saturating_sub(before.backoffs),
        }
    }

    /// Adds `d` to these counters.
    fn add(&mut self, d: WaitCounters) {
        self.flood_wait_us += d.flood_wait_us;
        self.backoff_us += d.backoff_us;
        self.retry_after_us += d.retry_after_us;
        self.watch_timeouts += d.watch_timeouts;
        self.relists += d.relists;
        self.backoffs += d.backoffs;
    }
}

/// Microseconds as seconds.
pub(super) fn us_to_secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Where the wall time of one fault kind's cycles went (a cycle runs from the fault's
/// injection to the next fault's injection, or to the end of the run).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KindTimes {
    cycles: u64,
    /// Wall time of the cycles, microseconds.
    cycle_us: u64,
    /// Injection to firing (as the generator saw it, at step granularity), microseconds.
    fire_us: u64,
    /// Events the generator made during the cycles.
    events: u64,
    waits: WaitCounters,
}

impl KindTimes {
    /// Adds closed cycle `c`, which ended with `made` events and the counters at `now`.
    pub(super) fn add_cycle(&mut self, c: &Cycle, now: WaitCounters, made: u64) {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.cycles += 1;
        self.cycle_us += us(c.started.elapsed());
        self.fire_us += us(c.fired.unwrap_or_else(|| c.started.elapsed()));
        self.events += made - c.made_at_start;
        self.waits.add(now.since(c.base));
    }

    /// The report of these cycles, for fault `kind`.
    pub(super) fn report(&self, kind: String) -> KindReport {
        KindReport {
            kind,
            cycles: self.cycles,
            events: self.events,
            cycle_seconds: us_to_secs(self.cycle_us),
            fire_seconds: us_to_secs(self.fire_us),
            flow_control_wait_seconds: us_to_secs(self.waits.flood_wait_us),
            backoff_seconds: us_to_secs(self.waits.backoff_us),
            retry_after_extra_seconds: us_to_secs(self.waits.retry_after_us),
            backoffs: self.waits.backoffs,
            watch_timeouts: self.waits.watch_timeouts,
            relists: self.waits.relists,
        }
    }
}

/// The fault being waited for or recovered from.
#[derive(Debug)]
pub(super) struct Cycle {
    /// Index of the fault in the catalogue.
    pub(super) kind: usize,
    started: Instant,
    /// Injection to firing, once it fired.
    fired: Option<Duration>,
    /// Events made when the cycle started.
    made_at_start: u64,
    /// Counters when the cycle started.
    base: WaitCounters,
}

impl Cycle {
    /// A cycle of fault `kind` starting now, after `made` events, with the counters at `base`.
    pub(super) fn start(kind: usize, made: u64, base: WaitCounters) -> Self {
        Cycle {
            kind,
            started: Instant::now(),
            fired: None,
            made_at_start: made,
            base,
        }
    }

    /// Notes that the fault fired (the first call counts).
    pub(super) fn mark_fired(&mut self) {
        if self.fired.is_none() {
            self.fired = Some(self.started.elapsed());
        }
    }
}
