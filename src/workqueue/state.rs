//! The queue's state, kept under its one lock: what client-go spreads over `queue`, `dirty`,
//! `processing` (`queue.go`), the delaying heap (`delaying_queue.go`) and the metrics maps
//! (`metrics.go`). Pure bookkeeping: no locking, no waking, no clock reads; callers pass the
//! instants in.

use std::collections::VecDeque;
use std::collections::btree_map::BTreeMap;
use std::collections::hash_map::{Entry, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

use super::metrics::{Histogram, QueueStats, Report};

type Hasher = foldhash::fast::RandomState;

/// Where a known item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// In the ready deque (dirty, not in flight).
    Queued,
    /// Handed to a worker, not added since.
    Processing,
    /// Handed to a worker and added again since: queued again at `done`.
    ProcessingDirty,
}

/// One dirty or in-flight item: 16 bytes beside the key.
#[derive(Debug)]
struct Slot {
    phase: Phase,
    /// While in flight with timings: its index in [`Timings::running`].
    run: u32,
    /// With timings: when the item last became dirty, as [`Timings::stamp`]; 0 = not dirty.
    queued_at: u64,
}

impl Slot {
    fn queued(at: u64) -> Self {
        Slot {
            phase: Phase::Queued,
            run: 0,
            queued_at: at,
        }
    }
}

/// Latency bookkeeping, kept only when metrics are on (a clock read per operation).
#[derive(Debug, Default)]
struct Timings {
    /// The first instant seen; slots keep instants as nanoseconds after it.
    base: Option<Instant>,
    queue_latency: Histogram,
    work_duration: Histogram,
    /// Start instants of the items in flight, indexed by `Slot::run`; `None` = free.
    running: Vec<Option<Instant>>,
    free: Vec<u32>,
}

impl Timings {
    /// `at` as 1 + nanoseconds after the base (0 is "none"; saturates after 584 years).
    fn stamp(&mut self, at: Instant) -> u64 {
        let base = *self.base.get_or_insert(at);
        let nanos = at.saturating_duration_since(base).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant(&self, stamp: u64) -> Option<Instant> {
        let base = self.base?;
        let since = stamp.checked_sub(1)?;
        base.checked_add(Duration::from_nanos(since))
    }

    fn start(&mut self, slot: &mut Slot, now: Instant) {
        if let Some(q) = self.instant(std::mem::take(&mut slot.queued_at)) {
            self.queue_latency.observe(now.saturating_duration_since(q));
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.running.push(None);
                u32::try_from(self.running.len() - 1).unwrap_or(u32::MAX)
            }
        };
        if let Some(r) = self.running.get_mut(index as usize) {
            *r = Some(now);
        }
        slot.run = index;
    }

    fn finish(&mut self, slot: &Slot, now: Instant) {
        if let Some(start) = self
            .running
            .get_mut(slot.run as usize)
            .and_then(Option::take)
        {
            self.work_duration
                .observe(now.saturating_duration_since(start));
            self.free.push(slot.run);
        }
    }
}

/// What [`State::done`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The item was not in flight: nothing changed.
    NotInFlight,
    /// The item is finished and forgotten.
    Forgotten,
    /// The item was added while in flight and is queued again.
    Requeued,
}

#[derive(Debug)]
pub(crate) struct State<T> {
    /// Every item that is dirty or in flight, with its phase: one hash lookup per operation,
    /// where client-go's dirty set plus processing set cost two or three.
    slots: HashMap<T, Slot, Hasher>,
    /// Queued items, oldest first; each has a `Queued` slot.
    ready: VecDeque<T>,
    /// Delayed items by (ready-at, sequence number); `waiting_at` maps each back to its key.
    waiting: BTreeMap<(Instant, u64), T>,
    waiting_at: HashMap<T, (Instant, u64), Hasher>,
    next_seq: u64,
    pub(crate) shutting_down: bool,
    /// `shutdown_with_drain` is waiting for in-flight items (cleared by `shutdown`).
    pub(crate) drain: bool,
    in_flight: usize,
    /// Queued plus in flight and added again: client-go's depth.
    dirty: usize,
    adds: u64,
    retries: u64,
    /// Threads blocked (or woken and not yet running) in `get`.
    pub(crate) sync_waiters: usize,
    /// Tasks registered in `get_async`.
    pub(crate) async_waiters: usize,
    /// Threads blocked in `shutdown_with_drain`.
    pub(crate) drain_waiters: usize,
    /// The deadline some waiter is timing for the delayed items (real clocks only).
    pub(crate) timer: Option<Instant>,
    timings: Option<Box<Timings>>,
}

impl<T: Hash + Eq + Clone> State<T> {
    pub(crate) fn new(timed: bool) -> Self {
        State {
            slots: HashMap::default(),
            ready: VecDeque::new(),
            waiting: BTreeMap::new(),
            waiting_at: HashMap::default(),
            next_seq: 0,
            shutting_down: false,
            drain: false,
            in_flight: 0,
            dirty: 0,
            adds: 0,
            retries: 0,
            sync_waiters: 0,
            async_waiters: 0,
            drain_waiters: 0,
            timer: None,
            timings: timed.then(Box::default),
        }
    }

    /// Whether operations need an instant for the metrics.
    pub(crate) fn timed(&self) -> bool {
        self.timings.is_some()
    }

    pub(crate) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    pub(crate) fn ready_len(&self) -> usize {
        self.ready.len()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// client-go `Add`: marks `item` dirty. Returns true if it went into the ready deque (a
    /// waiter should wake). `at` is when it became dirty (metrics). The caller checks shutdown.
    pub(crate) fn add(&mut self, item: T, at: Option<Instant>) -> bool {
        let at = match (self.timings.as_deref_mut(), at) {
            (Some(t), Some(at)) => t.stamp(at),
            _ => 0,
        };
        let pushed = match self.slots.entry(item) {
            Entry::Vacant(v) => {
                let key = v.key().clone();
                v.insert(Slot::queued(at));
                self.ready.push_back(key);
                true
            }
            Entry::Occupied(mut o) => {
                let slot = o.get_mut();
                if slot.phase != Phase::Processing {
                    return false;
                }
                // In flight: `done` queues it again.
                slot.phase = Phase::ProcessingDirty;
                slot.queued_at = at;
                false
            }
        };
        self.dirty += 1;
        self.adds += 1;
        pushed
    }

    /// client-go `Get` without the waiting: hands out the oldest queued item, now in flight.
    pub(crate) fn take(&mut self, now: Option<Instant>) -> Option<T> {
        let item = self.ready.pop_front()?;
        self.dirty -= 1;
        self.in_flight += 1;
        let timings = self.timings.as_deref_mut();
        let start = |slot: &mut Slot| {
            slot.phase = Phase::Processing;
            if let (Some(t), Some(now)) = (timings, now) {
                t.start(slot, now);
            }
        };
        match self.slots.get_mut(&item) {
            Some(slot) => start(slot),
            // Every ready item has a slot; rebuild it rather than lose track of the item.
            None => {
                let mut slot = Slot::queued(0);
                start(&mut slot);
                self.slots.insert(item.clone(), slot);
            }
        }
        Some(item)
    }

    /// client-go `Done`. An item that is not in flight is left alone (client-go would queue a
    /// dirty one a second time).
    pub(crate) fn done(&mut self, item: &T, now: Option<Instant>) -> Finished {
        let Some(slot) = self.slots.get_mut(item) else {
            return Finished::NotInFlight;
        };
        let finished = match slot.phase {
            Phase::Queued => return Finished::NotInFlight,
            Phase::Processing => Finished::Forgotten,
            Phase::ProcessingDirty => Finished::Requeued,
        };
        if let (Some(t), Some(now)) = (self.timings.as_deref_mut(), now) {
            t.finish(slot, now);
        }
        self.in_flight -= 1;
        if finished == Finished::Requeued {
            slot.phase = Phase::Queued;
            self.ready.push_back(item.clone());
        } else {
            self.slots.remove(item);
        }
        finished
    }

    /// Counts one `add_after` (client-go's retries metric).
    pub(crate) fn count_retry(&mut self) {
        self.retries += 1;
    }

    /// client-go's delaying insert: `item` becomes ready at `at`, or at its earlier pending
    /// instant if it already waits (a waiting item only moves earlier). Returns true if `at` is
    /// now the earliest deadline.
    pub(crate) fn schedule(&mut self, item: T, at: Instant) -> bool {
        let seq = self.next_seq;
        match self.waiting_at.get_mut(&item) {
            Some(key) if at < key.0 => {
                if let Some(v) = self.waiting.remove(key) {
                    self.next_seq += 1;
                    *key = (at, seq);
                    self.waiting.insert((at, seq), v);
                }
            }
            Some(_) => return false,
            None => {
                self.next_seq += 1;
                self.waiting.insert((at, seq), item.clone());
                self.waiting_at.insert(item, (at, seq));
            }
        }
        self.next_deadline() == Some(at)
    }

    /// When the next delayed item becomes ready.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|(k, _)| k.0)
    }

    /// Adds every delayed item whose instant is not after `now`, in instant order, as if added
    /// at its instant. Returns how many entered the ready deque.
    pub(crate) fn promote_due(&mut self, now: Instant) -> usize {
        let mut pushed = 0;
        while let Some(entry) = self.waiting.first_entry() {
            let at = entry.key().0;
            if at > now {
                break;
            }
            let item = entry.remove();
            self.waiting_at.remove(&item);
            let stamp = self.timed().then_some(at);
            pushed += usize::from(self.add(item, stamp));
        }
        pushed
    }

    /// Starts shutting down: no more adds, delayed items dropped (client-go stops its waiting
    /// loop), queued and in-flight items kept.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
        self.waiting.clear();
        self.waiting_at.clear();
        self.timer = None;
    }

    /// Claims the timer for the earliest delayed item if nobody times it (or times a later
    /// one). Returns the deadline to wait for and records it in `mine`.
    pub(crate) fn claim_timer(&mut self, mine: &mut Option<Instant>) -> Option<Instant> {
        let next = self.next_deadline()?;
        if self.timer.is_some_and(|t| t <= next) {
            return None;
        }
        self.timer = Some(next);
        *mine = Some(next);
        Some(next)
    }

    /// Gives the timer back if `mine` still holds it. Returns true if it did.
    pub(crate) fn release_timer(&mut self, mine: &mut Option<Instant>) -> bool {
        match mine.take() {
            Some(m) if self.timer == Some(m) => {
                self.timer = None;
                true
            }
            _ => false,
        }
    }

    /// Whether a waiter must be woken to time the delayed items (nobody times them).
    pub(crate) fn needs_timer(&self) -> bool {
        self.timer.is_none() && self.has_waiting()
    }

    /// The counters and, with timings, the in-flight ages and histograms at `now`.
    pub(crate) fn report(&self, name: &str, now: Option<Instant>) -> Report {
        let (unfinished, longest) = match (self.timings.as_deref(), now) {
            (Some(t), Some(now)) => {
                let ages = t
                    .running
                    .iter()
                    .flatten()
                    .map(|start| now.saturating_duration_since(*start));
                let total = ages.clone().fold(Duration::ZERO, Duration::saturating_add);
                (total, ages.max().unwrap_or_default())
            }
            _ => (Duration::ZERO, Duration::ZERO),
        };
        Report {
            name: name.to_owned(),
            stats: QueueStats {
                depth: self.dirty,
                len: self.ready.len(),
                in_flight: self.in_flight,
                delayed: self.waiting.len(),
                adds: self.adds,
                retries: self.retries,
                unfinished_work: unfinished,
                longest_running: longest,
                shutting_down: self.shutting_down,
            },
            histograms: self
                .timings
                .as_deref()
                .map(|t| (t.queue_latency.clone(), t.work_duration.clone())),
        }
    }
}
