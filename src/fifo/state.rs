//! What every handle of one queue shares ([`Shared`]) and the state under its one lock
//! ([`Inner`]): the queued deltas, the in-flight overlay on the known objects, and the count of
//! initial items not yet completed.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::delta::{DeletedFinalStateUnknown, Delta, DeltaType, Deltas};
use super::in_order::InOrder;
use super::known::KnownObjects;
use super::transform::Transform;
use crate::object::{KeyMap, Object, ObjectKey};

/// `unsynced` before the first `replace`.
pub(super) const UNPOPULATED: usize = usize::MAX;

pub(super) struct Shared {
    pub(super) inner: Mutex<Inner>,
    /// Signals blocked `DeltaFifo::pop_batch` callers (only when `Inner::blocked_poppers > 0`).
    pub(super) cond: Condvar,
    /// Signals async `DeltaFifo::pop_batch_async` callers.
    pub(super) notify: Notify,
    pub(super) known: Option<Arc<dyn KnownObjects>>,
    pub(super) transform: Option<Transform>,
    /// Items of the first `replace` not yet popped *and* completed (their `PopBatch` dropped);
    /// [`UNPOPULATED`] before the first `replace`. `has_synced` is `unsynced == 0`, one atomic
    /// load, so the consumer can call it while it holds a batch (upstream's `HasSynced` takes
    /// the lock its `Pop` holds while the consumer runs).
    ///
    /// Written under the lock by the first `replace` and decremented by `PopBatch::drop` with
    /// `Release`; read with `Acquire`, so a thread that sees `has_synced() == true` also sees
    /// everything the consumer did before completing the last initial batch (e.g. store writes).
    pub(super) unsynced: AtomicUsize,
}

pub(super) struct Inner {
    /// Deltas per queued key; a key is here iff it is in `queue` ([`FifoKind::DeltaFifo`]).
    ///
    /// [`FifoKind::DeltaFifo`]: super::FifoKind::DeltaFifo
    pub(super) items: KeyMap<Deltas>,
    /// Every change in order ([`FifoKind::RealFifo`]; `items` and `queue` stay empty).
    ///
    /// [`FifoKind::RealFifo`]: super::FifoKind::RealFifo
    pub(super) in_order: Option<InOrder>,
    /// Queued keys in first-enqueue order, each once.
    pub(super) queue: VecDeque<ObjectKey>,
    /// Keys popped in batches not yet completed, with the state the consumer is applying. Only
    /// kept when there are [`KnownObjects`]: it overlays them, so deletion detection and resync
    /// see the state as if those batches were already applied.
    ///
    /// Upstream's `Pop` gets this by running the consumer under the queue lock; here the
    /// consumer works on a popped batch without it, so producers never wait for handlers.
    /// Example of what the overlay prevents: a batch holding `Added(x)` is being applied when a
    /// relist that no longer lists `x` arrives; the store does not have `x` yet, but the
    /// overlay does, so `replace` still queues the tombstone and `x` does not stay in the store
    /// as a ghost.
    pub(super) in_flight: KeyMap<InFlight>,
    pub(super) next_batch: u64,
    /// Items of the first `replace` not yet popped.
    pub(super) initial_unpopped: usize,
    pub(super) populated: bool,
    pub(super) closed: bool,
    /// Threads waiting in `pop_batch`.
    pub(super) blocked_poppers: usize,
    /// The resourceVersion of the newest `replace` (0 before the first, or when it is not a
    /// number), handed to every batch taken after it.
    pub(super) replaced_rv: u64,
}

pub(super) struct InFlight {
    pub(super) batch: u64,
    /// The object after applying the batch; `None` when its newest delta is a deletion.
    pub(super) after: Option<Arc<Object>>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code of ours panics under the lock with the structures half-updated; a panic in a
        // `KnownObjects` implementation leaves them consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The known object under `key`, with in-flight batches applied.
    pub(super) fn known_get(&self, inner: &Inner, key: &ObjectKey) -> Option<Arc<Object>> {
        let known = self.known.as_ref()?;
        match inner.in_flight.get(key) {
            Some(f) => f.after.clone(),
            None => known.get(key),
        }
    }

    /// The known keys, with in-flight batches applied.
    pub(super) fn known_keys(&self, inner: &Inner) -> Vec<ObjectKey> {
        let Some(known) = &self.known else {
            return Vec::new();
        };
        let mut keys = known.list_keys();
        if !inner.in_flight.is_empty() {
            keys.retain(|k| !inner.in_flight.contains_key(k));
            keys.extend(
                inner
                    .in_flight
                    .iter()
                    .filter(|(_, f)| f.after.is_some())
                    .map(|(k, _)| k.clone()),
            );
        }
        keys
    }
}

impl Inner {
    /// Whether `key` has something queued.
    pub(super) fn is_queued(&self, key: &ObjectKey) -> bool {
        match &self.in_order {
            Some(q) => q.is_queued(key),
            None => self.items.contains_key(key),
        }
    }

    /// Queued keys ([`FifoKind::DeltaFifo`]) or changes ([`FifoKind::RealFifo`]).
    ///
    /// [`FifoKind::DeltaFifo`]: super::FifoKind::DeltaFifo
    /// [`FifoKind::RealFifo`]: super::FifoKind::RealFifo
    pub(super) fn queued_len(&self) -> usize {
        match &self.in_order {
            Some(q) => q.len(),
            None => self.queue.len(),
        }
    }

    /// Appends `delta` to `key`'s deltas, queueing the key if it was not ([`FifoKind::RealFifo`]:
    /// appends it as its own entry). Returns `true` when the queue was empty before.
    ///
    /// [`FifoKind::RealFifo`]: super::FifoKind::RealFifo
    pub(super) fn enqueue(&mut self, key: ObjectKey, delta: Delta) -> bool {
        if let Some(q) = &mut self.in_order {
            let was_empty = q.len() == 0;
            q.push(key, delta, 0);
            return was_empty;
        }
        let was_empty = self.queue.is_empty();
        match self.items.entry(key) {
            Entry::Occupied(mut e) => e.get_mut().push(delta),
            Entry::Vacant(e) => {
                self.queue.push_back(e.key().clone());
                e.insert(std::iter::once(delta).collect());
            }
        }
        was_empty
    }

    /// Queues a Deleted delta carrying a tombstone with the last known `obj` of `key` (a
    /// deletion detected by `replace`, not seen on the watch). Returns whether the queue was
    /// empty.
    pub(super) fn enqueue_tombstone(&mut self, key: ObjectKey, obj: Arc<Object>) -> bool {
        let delta = tombstone(key.clone(), obj);
        self.enqueue(key, delta)
    }
}

/// A Deleted delta carrying a [`DeletedFinalStateUnknown`] with the last known `obj` of `key`.
pub(super) fn tombstone(key: ObjectKey, obj: Arc<Object>) -> Delta {
    Delta {
        kind: DeltaType::Deleted,
        object: DeletedFinalStateUnknown { key, obj }.into(),
    }
}
