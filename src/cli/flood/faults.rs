//! `--fault-every`: the simulator's one-shot faults injected in turn, each with what makes it
//! fire, and the wall time until the next injection charged to the fault's kind.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use informer::Informer;
use informer::reflector::ListerWatcher;
use informer::sim::{ErrorAnswer, Fault, SimServer, SimStats, StreamFault};

use super::report::FaultsReport;
use super::wait::{Cycle, KindTimes, WaitCounters};

/// The faults `--fault-every` cycles through: [`Fault::catalogue`], with `retry_after` (if
/// given) as the `retryAfterSeconds` of its 429 answers.
fn fault_catalogue(retry_after: Option<u32>) -> Vec<Fault> {
    let with = |a: ErrorAnswer| match (a, retry_after) {
        (ErrorAnswer::TooManyRequests { .. }, Some(secs)) => ErrorAnswer::TooManyRequests {
            retry_after_seconds: secs,
        },
        _ => a,
    };
    Fault::catalogue()
        .into_iter()
        .map(|f| match f {
            Fault::List(a) => Fault::List(with(a)),
            Fault::Watch(a) => Fault::Watch(with(a)),
            Fault::Stream { .. } => f,
        })
        .collect()
}

/// Injects the simulator's one-shot faults in turn, each with what makes it fire, and charges
/// the wall time until the next injection to the fault's kind.
#[derive(Debug)]
pub(super) struct FaultDriver {
    /// Events between injections.
    every: u64,
    /// Events made at which the next fault is due.
    next_at: u64,
    catalogue: Vec<Fault>,
    /// Injections so far (the next kind is this modulo the catalogue's length).
    next: usize,
    injected: u64,
    /// Kinds injected (each fired once the next one is injected or at the end).
    kinds_injected: BTreeSet<String>,
    /// Per catalogue entry.
    times: Vec<KindTimes>,
    current: Option<Cycle>,
}

impl FaultDriver {
    /// A fault every `every` events from the catalogue, `retry_after` as in
    /// [`fault_catalogue`].
    pub(super) fn new(every: u64, retry_after: Option<u32>) -> Self {
        let catalogue = fault_catalogue(retry_after);
        FaultDriver {
            every,
            next_at: every,
            times: vec![KindTimes::default(); catalogue.len()],
            catalogue,
            next: 0,
            injected: 0,
            kinds_injected: BTreeSet::new(),
            current: None,
        }
    }

    /// Closes the current cycle at `made` events.
    pub(super) fn close<L: ListerWatcher>(
        &mut self,
        st: &SimStats,
        informer: &Informer<L>,
        made: u64,
    ) {
        if let Some(c) = self.current.take() {
            self.times[c.kind].add_cycle(&c, WaitCounters::read(st, informer), made);
        }
    }

    /// After `made` events: injects the next fault when due and the previous ones fired.
    pub(super) fn tick<L: ListerWatcher>(
        &mut self,
        sim: &SimServer,
        informer: &Informer<L>,
        made: u64,
    ) {
        let st = sim.stats();
        if let Some(c) = self.current.as_mut()
            && st.faults_pending == 0
        {
            c.mark_fired();
        }
        if made < self.next_at || st.faults_pending > 0 {
            return;
        }
        self.close(&st, informer, made);
        let kind = self.next % self.catalogue.len();
        let fault = self.catalogue[kind];
        self.next += 1;
        self.current = Some(Cycle::start(kind, made, WaitCounters::read(&st, informer)));
        sim.inject(fault);
        // A list or watch fault waits for the next list or watch: make the reflector ask.
        match fault {
            Fault::List(_) => sim.inject(Fault::Stream {
                after_events: 0,
                action: StreamFault::Expired,
            }),
            // After one event: a watch closed with none within 1 s is a "very short watch"
            // that the reflector answers with a relist, which the watch fault never sees.
            Fault::Watch(_) => sim.inject(Fault::Stream {
                after_events: 1,
                action: StreamFault::Close,
            }),
            Fault::Stream { .. } => {}
        }
        self.injected += 1;
        self.kinds_injected.insert(fault.to_string());
        self.next_at = made + self.every;
    }

    /// Whether the next fault is due at `made` events (it is injected once the previous one
    /// fired).
    pub(super) fn due(&self, made: u64) -> bool {
        made >= self.next_at
    }

    /// The report of the faults injected, with the simulator's counters `st`.
    pub(super) fn report(&self, st: &SimStats) -> FaultsReport {
        let kinds = self.kinds_injected.len();
        FaultsReport {
            every: self.every,
            injected: self.injected,
            fired: st.faults_fired,
            pending: st.faults_pending,
            kinds: self.catalogue.len(),
            kinds_fired: if st.faults_pending == 0 {
                kinds
            } else {
                kinds.saturating_sub(1)
            },
            kinds_list: self.kinds_injected.iter().cloned().collect(),
            per_kind: self
                .catalogue
                .iter()
                .zip(&self.times)
                .map(|(f, t)| t.report(f.to_string()))
                .collect(),
        }
    }
}

/// Waits (at most 60 s) until no fault of `sim` is pending.
pub(super) async fn settle(sim: &SimServer) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while sim.stats().faults_pending > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
