//! The queue's state, kept under its one lock: what client-go spreads over `queue`, `dirty`,
//! `processing` (`queue.go`), the delaying heap (`delaying_queue.go`) and the metrics maps
//! (`metrics.go`). Pure bookkeeping: no locking, no waking, no clock reads; callers pass the
//! instants in.
//!
//! One map holds every item that is dirty or in flight, with its phase, so each operation costs
//! one hash lookup where a dirty set plus a processing set cost two or three; the ready deque
//! holds the queued items in order.

use std::collections::btree_map::BTreeMap;
use std::collections::hash_map::{Entry, HashMap};
use std::collections::{BTreeSet, VecDeque};
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

/// Latency bookkeeping, kept only when metrics are on (it costs a clock read and a hash
/// lookup per operation). Out of the main map so that a queue without metrics keeps one byte
/// per item beside the key.
#[derive(Debug)]
struct Timings<T> {
    queue_latency: Histogram,
    work_duration: Histogram,
    /// When each dirty item last became dirty.
    queued_at: HashMap<T, Instant, Hasher>,
    /// When each item in flight was handed out, with its key in `in_flight`.
    started: HashMap<T, (Instant, u64), Hasher>,
    /// Start instants of the items in flight, for unfinished work and longest running.
    in_flight: BTreeSet<(Instant, u64)>,
    next_id: u64,
}

impl<T> Default for Timings<T> {
    fn default() -> Self {
        Timings {
            queue_latency: Histogram::default(),
            work_duration: Histogram::default(),
            queued_at: HashMap::default(),
            started: HashMap::default(),
            in_flight: BTreeSet::new(),
            next_id: 0,
        }
    }
}

impl<T: Hash + Eq + Clone> Timings<T> {
    fn dirty(&mut self, item: &T, at: Instant) {
        if !self.queued_at.contains_key(item) {
            self.queued_at.insert(item.clone(), at);
        }
    }

    fn start(&mut self, item: &T, now: Instant) {
        if let Some(q) = self.queued_at.remove(item) {
            self.queue_latency.observe(now.saturating_duration_since(q));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.insert((now, id));
        self.started.insert(item.clone(), (now, id));
    }

    fn finish(&mut self, item: &T, now: Instant) {
        if let Some((start, id)) = self.started.remove(item) {
            self.work_duration
                .observe(now.saturating_duration_since(start));
            self.in_flight.remove(&(start, id));
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
    /// Every item that is dirty or in flight.
    slots: HashMap<T, Phase, Hasher>,
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
    timings: Option<Box<Timings<T>>>,
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
        let (pushed, key) = match self.slots.entry(item) {
            Entry::Vacant(v) => {
                let key = v.key().clone();
                v.insert(Phase::Queued);
                (true, key)
            }
            Entry::Occupied(mut o) => {
                if *o.get() != Phase::Processing {
                    return false;
                }
                *o.get_mut() = Phase::ProcessingDirty;
                if let (Some(t), Some(at)) = (self.timings.as_deref_mut(), at) {
                    t.dirty(o.key(), at);
                }
                self.dirty += 1;
                self.adds += 1;
                return false;
            }
        };
        if let (Some(t), Some(at)) = (self.timings.as_deref_mut(), at) {
            t.dirty(&key, at);
        }
        self.ready.push_back(key);
        self.dirty += 1;
        self.adds += 1;
        pushed
    }

    /// client-go `Get` without the waiting: hands out the oldest queued item, now in flight.
    pub(crate) fn take(&mut self, now: Option<Instant>) -> Option<T> {
        let item = self.ready.pop_front()?;
        self.dirty -= 1;
        self.in_flight += 1;
        match self.slots.get_mut(&item) {
            Some(phase) => *phase = Phase::Processing,
            // Every ready item has a slot; rebuild it rather than lose track of the item.
            None => {
                self.slots.insert(item.clone(), Phase::Processing);
            }
        }
        if let (Some(t), Some(now)) = (self.timings.as_deref_mut(), now) {
            t.start(&item, now);
        }
        Some(item)
    }

    /// client-go `Done`. An item that is not in flight is left alone (client-go would queue a
    /// dirty one a second time).
    pub(crate) fn done(&mut self, item: &T, now: Option<Instant>) -> Finished {
        let Some(phase) = self.slots.get_mut(item) else {
            return Finished::NotInFlight;
        };
        let finished = match *phase {
            Phase::Queued => return Finished::NotInFlight,
            Phase::Processing => Finished::Forgotten,
            Phase::ProcessingDirty => {
                *phase = Phase::Queued;
                Finished::Requeued
            }
        };
        if let (Some(t), Some(now)) = (self.timings.as_deref_mut(), now) {
            t.finish(item, now);
        }
        self.in_flight -= 1;
        if finished == Finished::Requeued {
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
                    .in_flight
                    .iter()
                    .map(|(start, _)| now.saturating_duration_since(*start));
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
