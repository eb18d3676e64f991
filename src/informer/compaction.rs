//! The processing thread's idle work under [`Compression::Zstd`]: training the dictionary and
//! rewriting written objects into their compact form.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::Shared;
use super::compression::{Compression, ZstdOptions};
use super::ratio_watch::RatioWatch;
use super::training::{MIN_SAMPLES, SampleRules, Samples};
use crate::fifo::room::GiveBackRoom;
use crate::object::{Compactor, DecodeError, Dictionary, KeySet, MetaTails, Object, ObjectKey};
use crate::store::{Op, WriteBatch};

/// Longest stretch of compaction between two looks at the DeltaFIFO: what an event arriving
/// meanwhile may wait (one HEAD Pod compresses in about 11 µs, an etcd Pod in about 2.5 µs).
const SLICE: Duration = Duration::from_micros(200);

/// Objects compacted per store write (each write is one store version).
const PER_WRITE: usize = 64;

/// The compaction state, owned by the processing thread.
pub(super) struct Compaction {
    options: Option<ZstdOptions>,
    /// Keys written since they were last compacted, oldest first, each once.
    dirty: VecDeque<ObjectKey>,
    queued: KeySet,
    compactor: Option<Compactor>,
    training: Option<Receiver<Result<Dictionary, DecodeError>>>,
    /// Store size at the last failed training: the next try waits until it has doubled.
    failed_at: Option<usize>,
    /// How well the current dictionary compresses (trained ones only: a given dictionary is
    /// kept whatever its ratio).
    ratio: RatioWatch,
    /// The ratio degraded: train a new dictionary (objects compressed with the old one keep
    /// it; new writes use the new one).
    retrain: bool,
    /// The dictionary was given ([`ZstdOptions::dictionary`]): never retrained.
    given: bool,
    /// The informer's shared metadata tails, for every compactor it makes.
    tails: MetaTails,
}

impl Compaction {
    pub(super) fn new(compression: &Compression, tails: MetaTails) -> Compaction {
        let options = match compression {
            Compression::None => None,
            Compression::Zstd(o) => Some(o.clone()),
        };
        let compactor = options
            .as_ref()
            .and_then(|o| o.dictionary.clone())
            .map(|d| Compactor::with_tails(d, tails.clone()));
        Compaction {
            tails,
            given: compactor.is_some(),
            options,
            dirty: VecDeque::new(),
            queued: KeySet::default(),
            compactor,
            training: None,
            failed_at: None,
            ratio: RatioWatch::default(),
            retrain: false,
        }
    }

    /// Records that `obj` was written under `key`, unless it is compact with the current
    /// dictionary already (a relist's objects are: the list compactor made them so, and
    /// recording 100 000 of them filled a set and a deque of keys, about 6 MB, for nothing).
    /// Before there is a dictionary nothing is recorded: its arrival queues the whole store.
    pub(super) fn written(&mut self, key: &ObjectKey, obj: &Object) {
        let Some(compactor) = &self.compactor else {
            return;
        };
        if obj
            .compressed_with()
            .is_some_and(|d| Arc::ptr_eq(d, compactor.dictionary()))
        {
            return;
        }
        if self.queued.insert(key.clone()) {
            self.dirty.push_back(key.clone());
        }
    }

    /// Queues every stored key (when the first dictionary arrives).
    fn queue_store(&mut self, shared: &Shared) {
        for key in shared.store.keys() {
            if self.queued.insert(key.clone()) {
                self.dirty.push_back(key);
            }
        }
    }

    /// Idle work, for at most [`SLICE`] or until a delta is queued: starts or collects the
    /// dictionary's training, then compacts written objects. Returns whether more is left to
    /// do right away (otherwise the thread may sleep: a finished training wakes it).
    pub(super) fn run(&mut self, shared: &Shared) -> bool {
        if self.options.is_none() {
            return false;
        }
        if self.compactor.is_none() {
            let first = self.adopt(shared) || self.train(shared);
            if !first {
                return false;
            }
            if !self.given {
                self.queue_store(shared);
            }
        } else if self.training.is_some() {
            // A retraining: objects compressed with the old dictionary keep it.
            self.train(shared);
        }
        let start = Instant::now();
        while !self.dirty.is_empty() && shared.fifo.is_empty() && start.elapsed() < SLICE {
            self.compact_some(shared, start);
        }
        if self.retrain && self.training.is_none() {
            self.train(shared);
            if self.training.is_some() {
                self.retrain = false;
            }
        }
        !self.dirty.is_empty()
    }

    /// Installs a compactor with the dictionary the first list's samples trained
    /// ([`ListSampler`](super::list_sampler::ListSampler)), if there is one by now: `true` when
    /// it did.
    fn adopt(&mut self, shared: &Shared) -> bool {
        let Some(dict) = shared.dictionary.load_full() else {
            return false;
        };
        tracing::debug!(informer = %shared.name, bytes = dict.len(), "compression dictionary trained from the first list");
        self.compactor = Some(Compactor::with_tails(dict, self.tails.clone()));
        self.ratio = RatioWatch::default();
        true
    }

    /// Starts the dictionary's training (the first, or a retraining), or collects it: `true`
    /// when a new compactor was installed.
    fn train(&mut self, shared: &Shared) -> bool {
        let Some(options) = &self.options else {
            return false;
        };
        if let Some(rx) = &self.training {
            match rx.try_recv() {
                Err(TryRecvError::Empty) => {}
                Ok(Ok(dict)) => {
                    tracing::debug!(informer = %shared.name, bytes = dict.len(), "compression dictionary trained");
                    let dict = Arc::new(dict);
                    shared.dictionary.store(Some(dict.clone()));
                    self.compactor = Some(Compactor::with_tails(dict, self.tails.clone()));
                    self.ratio = RatioWatch::default();
                    self.training = None;
                    return true;
                }
                Ok(Err(e)) => {
                    tracing::debug!(informer = %shared.name, error = %e, "compression dictionary training failed");
                    self.failed_at = Some(shared.store.len());
                    self.training = None;
                }
                // The training thread died (a panic in zstd's trainer): as a failure.
                Err(TryRecvError::Disconnected) => {
                    self.failed_at = Some(shared.store.len());
                    self.training = None;
                }
            }
            return false;
        }
        if self.compactor.is_some() && !self.retrain {
            return false;
        }
        // Train once the first list is in the store (it is what the cache will mostly hold),
        // unless the list sampler still trains from its first pages.
        let len = shared.store.len();
        if !shared.fifo.has_synced()
            || len < MIN_SAMPLES
            || self.failed_at.is_some_and(|n| len < 2 * n.max(MIN_SAMPLES))
        {
            return false;
        }
        if self.compactor.is_none() {
            let sampler_done = shared.list_sampler.as_ref().is_none_or(|s| s.hand_over());
            // A dictionary the sampler trained meanwhile is adopted on the next run.
            if !sampler_done || shared.dictionary.load().is_some() {
                return false;
            }
        }
        let rules = SampleRules::new(options);
        let snapshot = shared.store.snapshot();
        // Spread over the store.
        let step = (len / rules.count).max(1);
        let mut samples = Samples::default();
        for (_, o) in snapshot.iter().step_by(step) {
            if rules.enough(&samples) {
                break;
            }
            rules.take(&mut samples, o);
        }
        drop(snapshot);
        let wake = shared.rv_moved.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = rules.spawn(samples, move |trained| {
            let _ = tx.send(trained);
            wake.notify_one();
        });
        if spawned {
            self.training = Some(rx);
        } else {
            self.failed_at = Some(len);
        }
        false
    }

    /// Compacts up to [`PER_WRITE`] dirty keys (fewer once the slice begun at `start` is
    /// spent or a delta is queued) and writes them as one store version.
    fn compact_some(&mut self, shared: &Shared, start: Instant) {
        let Some(compactor) = self.compactor.as_mut() else {
            return;
        };
        // The writer lock keeps the stored objects as read until the write below (the
        // processing thread, this one, is the only other writer).
        let mut state = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let writer = &mut state.writer;
        let snapshot = writer.snapshot();
        let mut batch = WriteBatch::with_capacity(PER_WRITE);
        let mut n = 0;
        while n < PER_WRITE && (n == 0 || (start.elapsed() < SLICE && shared.fifo.is_empty())) {
            let Some(key) = self.dirty.pop_front() else {
                break;
            };
            self.queued.remove(&key);
            let Some(current) = snapshot.get(&key) else {
                continue;
            };
            if current
                .compressed_with()
                .is_some_and(|d| Arc::ptr_eq(d, compactor.dictionary()))
            {
                continue;
            }
            match compactor.compact(current) {
                Ok(small) => {
                    let trained = self.training.is_none() && !self.given;
                    if self.ratio.record(small.raw_len(), small.cached_len()) && trained {
                        tracing::debug!(informer = %shared.name, baseline = ?self.ratio.baseline(), "compression ratio degraded: training a new dictionary");
                        self.retrain = true;
                    }
                    batch.push(Op::Upsert(Arc::new(small)));
                    n += 1;
                }
                // Kept as it is: the object is still cached, only uncompressed.
                Err(e) => {
                    tracing::debug!(informer = %shared.name, key = %key, error = %e, "not compressed")
                }
            }
        }
        drop(snapshot);
        self.dirty.give_back_room();
        self.queued.give_back_room();
        if n == 0 {
            return;
        }
        let rv = writer.resource_version();
        let ops: Vec<Op> = batch.ops().to_vec();
        batch.set_resource_version(rv);
        if writer.apply(batch).is_err() {
            // An index function rejected one of them (it would reject the original too: same
            // metadata, unless it decodes the body): the others go in one by one.
            for op in ops {
                let mut one = WriteBatch::with_capacity(1);
                one.push(op);
                one.set_resource_version(rv);
                let _ = writer.apply(one);
            }
        }
    }
}
