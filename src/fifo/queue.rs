//! [`DeltaFifo`]: the queue and its [`Builder`]; what a pop hands out is in `batch.rs`, the
//! state under the lock in `state.rs`.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::batch::{KeyDeltas, PopBatch};
use super::delta::{Delta, DeltaType, Deltas};
use super::error::{PopError, TryPopError};
use super::in_order::InOrder;
use super::known::KnownObjects;
use super::room::GiveBackRoom;
use super::state::{InFlight, Inner, Shared, UNPOPULATED, tombstone};
use super::transform::Transform;
use crate::object::{KeyMap, KeySet, Object, ObjectKey, parse_resource_version};

/// How the queue keeps changes (client-go has both; `RealFIFO` is its default since 1.33).
///
/// # Examples
/// ```
/// use informer::fifo::{DeltaFifo, FifoKind};
/// use informer::{Informer, InformerConfig};
/// let queue = DeltaFifo::builder().kind(FifoKind::RealFifo).build();
/// assert!(queue.is_empty());
/// // An informer on a RealFIFO:
/// let config = InformerConfig { fifo: FifoKind::RealFifo, ..Default::default() };
/// # drop(config);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FifoKind {
    /// Per-key delta lists (client-go `DeltaFIFO`): a key is queued once, its new changes join
    /// its list, keys pop in first-enqueue order. A hot key's changes are applied together,
    /// ahead of changes to other keys made between them.
    #[default]
    DeltaFifo,
    /// Every change its own entry, popped in arrival order (client-go `RealFIFO`); a batch
    /// never holds two changes of one key, and a relist is one batch: the store moves from
    /// the old list to the new one in one version before any handler hears of it (client-go
    /// `AtomicFIFO`, `ReplacedAll`), deletions it found first, then the listed objects.
    RealFifo,
}

/// A queue of per-key deltas (client-go `DeltaFIFO`, `tools/cache/delta_fifo.go`).
///
/// Cloning gives another handle to the same queue: typically the reflector holds one to produce
/// and the informer one to consume.
///
/// # Rules (as client-go)
/// - Per key, deltas are kept oldest first; keys pop in the order they were first queued; a key
///   is queued at most once (new deltas for a queued key join its list).
/// - Only two consecutive [`DeltaType::Deleted`] are collapsed, keeping the one that is not a
///   tombstone ([`Deltas`]).
/// - `delete` of a key neither queued nor known (see [`KnownObjects`]) is ignored.
/// - `replace` queues [`DeltaType::Replaced`] for every listed object and a
///   [`DeltaType::Deleted`] carrying a [`DeletedFinalStateUnknown`] tombstone for every key that
///   is queued or known but not listed; the tombstone holds the newest queued object of that
///   key, else the known object.
/// - `resync` queues [`DeltaType::Sync`] for every known key with nothing queued.
/// - After [`close`](Self::close), pops hand out what is left, then fail with
///   [`PopError::Closed`].
/// - A [`Transform`] runs on every incoming object before it is queued.
///
/// # Differences from client-go
/// - No lock while the consumer works: a pop takes up to `max` keys out under a short lock and
///   returns them as a [`PopBatch`]; producers go on while the consumer applies it. Until the
///   batch is dropped, the queue reads [`KnownObjects`] as if it were already applied, as
///   client-go's lock guaranteed: drop a batch only after applying it.
/// - [`has_synced`](Self::has_synced) is lock-free and only a `replace` populates the queue
///   (see there).
/// - An informer queues a relist read page by page as its pages arrive (`replace_page`, then
///   the deletions at its end; `src/fifo/streamed.rs`): its consumer applies a relist's first
///   pages while later ones are still on the way, where client-go queues the whole list at
///   its end. Every object queued early is a state at the list's version, checked not older
///   than what was delivered before; the deletions still wait for the whole list.
///
/// [`DeletedFinalStateUnknown`]: super::DeletedFinalStateUnknown
#[derive(Clone)]
pub struct DeltaFifo {
    pub(super) shared: Arc<Shared>,
}

/// Builds a [`DeltaFifo`] with [`KnownObjects`] and a [`Transform`].
#[derive(Default)]
#[must_use]
pub struct Builder {
    known: Option<Arc<dyn KnownObjects>>,
    transform: Option<Transform>,
    kind: FifoKind,
}

impl Builder {
    /// The objects the consumer already applied (the informer's store). Without them the queue
    /// only knows what is queued: `delete` of an unqueued key is ignored, `replace` detects
    /// deletions of queued keys only and `resync` does nothing (as upstream).
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects>) -> Self {
        self.known = Some(known);
        self
    }

    /// A transform applied to every incoming object before it is queued.
    pub fn transform(
        mut self,
        f: impl Fn(Arc<Object>) -> Arc<Object> + Send + Sync + 'static,
    ) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// Per-key deltas (the default) or every change in order; see [`FifoKind`].
    pub fn kind(mut self, kind: FifoKind) -> Self {
        self.kind = kind;
        self
    }

    /// Builds the queue.
    pub fn build(self) -> DeltaFifo {
        DeltaFifo {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    items: KeyMap::default(),
                    in_order: (self.kind == FifoKind::RealFifo).then(InOrder::default),
                    queue: VecDeque::new(),
                    in_flight: KeyMap::default(),
                    next_batch: 0,
                    initial_unpopped: 0,
                    populated: false,
                    closed: false,
                    blocked_poppers: 0,
                    replaced_rv: 0,
                }),
                cond: Condvar::new(),
                notify: Notify::new(),
                known: self.known,
                transform: self.transform,
                unsynced: AtomicUsize::new(UNPOPULATED),
            }),
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("known_objects", &self.known.is_some())
            .field("transform", &self.transform.is_some())
            .field("kind", &self.kind)
            .finish()
    }
}

impl Default for DeltaFifo {
    fn default() -> Self {
        DeltaFifo::new()
    }
}

impl DeltaFifo {
    /// A queue without known objects and without transform.
    pub fn new() -> Self {
        Builder::default().build()
    }

    /// A queue whose deletion detection and resync use `known` (the informer's store).
    pub fn with_known_objects(known: Arc<dyn KnownObjects>) -> Self {
        Builder::default().known_objects(known).build()
    }

    /// Starts a [`Builder`].
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Queues an [`DeltaType::Added`] delta for `obj` (a watch `ADDED` event).
    pub fn add(&self, obj: Arc<Object>) {
        self.push(DeltaType::Added, obj);
    }

    /// Queues an [`DeltaType::Updated`] delta for `obj` (a watch `MODIFIED` event).
    pub fn update(&self, obj: Arc<Object>) {
        self.push(DeltaType::Updated, obj);
    }

    /// Queues a [`DeltaType::Deleted`] delta for `obj` (a watch `DELETED` event), unless its
    /// key is neither queued nor known, in which case it is ignored (client-go `Delete`).
    /// If the key's newest queued delta is also a deletion the two are collapsed (see
    /// [`Deltas`]).
    pub fn delete(&self, obj: Arc<Object>) {
        let obj = self.transform(obj);
        let key = obj.key();
        let mut inner = self.shared.lock();
        if !inner.is_queued(&key) && self.shared.known_get(&inner, &key).is_none() {
            return;
        }
        let wake = inner.enqueue(key, Delta::new(DeltaType::Deleted, obj));
        self.wake(inner, wake);
    }

    /// Replaces the queue's view with a full list (client-go `Replace`, with Replaced deltas):
    /// queues [`DeltaType::Replaced`] for every listed object, then a [`DeltaType::Deleted`]
    /// with a [`DeletedFinalStateUnknown`](super::DeletedFinalStateUnknown) tombstone for every key queued or known but not
    /// listed. The tombstone carries the newest queued object of the key, else the known one.
    ///
    /// The first call marks the queue populated: it [`has_synced`](Self::has_synced) once
    /// every key queued at the end of this call has been popped and its batch completed.
    ///
    /// `resource_version` is the list's version. The queue does not order by it (the reflector
    /// tracks versions); it hands it to every batch taken from now on
    /// ([`PopBatch::list_resource_version`]), so that the consumer that applies the last of the
    /// list knows the version its store then reflects (client-go's AtomicFIFO keeps the same
    /// for `LastStoreSyncResourceVersion`).
    pub fn replace(&self, list: Vec<Arc<Object>>, resource_version: &str) {
        // Transformed outside the lock: producers never hold it longer than needed. Keys are
        // taken under it (a reference count each), so the list is never copied into a
        // 32-byte-per-item list of pairs.
        let list: Vec<Arc<Object>> = match &self.shared.transform {
            Some(_) => list.into_iter().map(|obj| self.transform(obj)).collect(),
            None => list,
        };

        let mut inner = self.shared.lock();
        // Recorded under the lock before any item can be popped.
        inner.replaced_rv = parse_resource_version(resource_version).unwrap_or(0);
        if inner.in_order.is_some() {
            let wake = self.replace_in_order(&mut inner, list);
            self.mark_populated(&mut inner);
            self.wake(inner, wake);
            return;
        }
        // The keys queued before this list, in queue order: the only ones that can be queued
        // and not listed. Usually few (the consumer keeps up), so no set of the whole list is
        // built to find them.
        let before: Vec<ObjectKey> = inner.queue.iter().cloned().collect();
        let mut unlisted: KeySet = before.iter().cloned().collect();
        // Room for the whole list at once: grown step by step, each rehash held the old and
        // the new table together (for 100 000 keys, 24 MB at the peak of a relist).
        let more = list.len().saturating_sub(inner.items.len());
        inner.items.reserve(more);
        inner.queue.reserve_exact(more);
        let mut wake = false;
        for obj in list {
            let key = obj.key();
            if !unlisted.is_empty() {
                unlisted.remove(&key);
            }
            wake |= inner.enqueue(key, Delta::new(DeltaType::Replaced, obj));
        }

        // Deletions of queued keys, in queue order.
        let queued_missing: Vec<ObjectKey> = before
            .into_iter()
            .filter(|k| unlisted.contains(k))
            .collect();
        drop(unlisted);
        // Every listed key is queued by now: "neither listed nor queued" is "not queued".
        wake |= self.queue_deletions(&mut inner, queued_missing, |_| false);
        self.mark_populated(&mut inner);
        self.wake(inner, wake);
    }

    /// The end of a list: queues a tombstone for each of `queued_missing` (queued keys the
    /// list did not name, in queue order) carrying its newest queued object, then for each
    /// known key neither queued nor `listed`, with the known object. Returns whether the
    /// queue was empty.
    pub(super) fn queue_deletions(
        &self,
        inner: &mut Inner,
        queued_missing: Vec<ObjectKey>,
        listed: impl Fn(&ObjectKey) -> bool,
    ) -> bool {
        let queued_missing: Vec<(ObjectKey, Arc<Object>)> = queued_missing
            .into_iter()
            .filter_map(|k| {
                let newest = inner.items.get(&k)?.newest()?.object.object().clone();
                Some((k, newest))
            })
            .collect();
        // A key listed but then gone from the store was deleted meanwhile: nothing to do.
        let known_missing: Vec<(ObjectKey, Arc<Object>)> = self
            .shared
            .known_keys(inner)
            .into_iter()
            .filter(|k| !inner.items.contains_key(k) && !listed(k))
            .filter_map(|k| Some((k.clone(), self.shared.known_get(inner, &k)?)))
            .collect();
        // Counted first, so the key queue grows by what they need, not by doubling (the
        // queued keys' tombstones join keys already queued).
        inner.items.reserve(known_missing.len());
        inner.queue.reserve_exact(known_missing.len());
        let mut wake = false;
        for (key, obj) in queued_missing.into_iter().chain(known_missing) {
            wake |= inner.enqueue_tombstone(key, obj);
        }
        wake
    }

    /// The first `replace` populates the queue: what it left queued is the initial list.
    pub(super) fn mark_populated(&self, inner: &mut Inner) {
        if !inner.populated {
            inner.populated = true;
            let n = inner.queued_len();
            inner.initial_unpopped = n;
            self.shared.unsynced.store(n, Ordering::Release);
        }
    }

    /// [`FifoKind::RealFifo`]'s `replace`: one group of entries (popped as one batch), the
    /// tombstones of keys queued or known but not listed first, then the listed objects in
    /// list order (client-go `ReplacedAll`). A key whose newest queued change is a deletion
    /// gets no tombstone: it is already on its way out (the per-key queue collapses the two
    /// deletions instead). Returns whether the queue was empty.
    fn replace_in_order(&self, inner: &mut Inner, list: Vec<Arc<Object>>) -> bool {
        let was_empty = inner.queued_len() == 0;
        // The tombstones go before the listed entries, so the listed keys are needed first.
        let listed: KeySet = list.iter().map(|obj| obj.key()).collect();
        let mut gone: Vec<(ObjectKey, Arc<Object>)> = {
            let q = inner.in_order.as_ref().expect("in-order queue");
            let mut queued: Vec<ObjectKey> = q
                .queued_keys()
                .filter(|k| !listed.contains(*k))
                .cloned()
                .collect();
            queued.sort();
            queued
                .into_iter()
                .filter_map(|k| q.newest(&k).map(|o| (k, o)))
                .collect()
        };
        for key in self.shared.known_keys(inner) {
            let queued = inner.in_order.as_ref().is_some_and(|q| q.is_queued(&key));
            if listed.contains(&key) || queued {
                continue;
            }
            if let Some(obj) = self.shared.known_get(inner, &key) {
                gone.push((key, obj));
            }
        }
        let q = inner.in_order.as_mut().expect("in-order queue");
        let group = q.new_group();
        for (key, obj) in gone {
            let delta = tombstone(key.clone(), obj);
            q.push(key, delta, group);
        }
        for obj in list {
            q.push(obj.key(), Delta::new(DeltaType::Replaced, obj), group);
        }
        was_empty && inner.queued_len() > 0
    }

    /// Queues a [`DeltaType::Sync`] delta for every known key that has nothing queued (client-go
    /// `Resync`). Does nothing without [`KnownObjects`].
    pub fn resync(&self) {
        if self.shared.known.is_none() {
            return;
        }
        let mut inner = self.shared.lock();
        let mut wake = false;
        for key in self.shared.known_keys(&inner) {
            if inner.is_queued(&key) {
                continue;
            }
            if let Some(obj) = self.shared.known_get(&inner, &key) {
                wake |= inner.enqueue(key, Delta::new(DeltaType::Sync, obj));
            }
        }
        self.wake(inner, wake);
    }

    /// `true` once the first [`replace`](Self::replace) happened and every key it left queued
    /// (listed items and detected deletions) has been popped and its [`PopBatch`] completed
    /// (dropped). One atomic load: lock-free, callable from anywhere, including the consumer
    /// while it holds a batch.
    ///
    /// Unlike upstream, `add`/`update`/`delete` before the first `replace` do not mark the
    /// queue populated: only a full list does.
    pub fn has_synced(&self) -> bool {
        self.shared.unsynced.load(Ordering::Acquire) == 0
    }

    /// Closes the queue: pops hand out what is still queued, then return
    /// [`PopError::Closed`]. Wakes every waiting pop. Producers may still push (their deltas are
    /// handed out too); nothing ever blocks them.
    pub fn close(&self) {
        let mut inner = self.shared.lock();
        inner.closed = true;
        drop(inner);
        self.shared.cond.notify_all();
        self.shared.notify.notify_waiters();
    }

    /// `true` after [`close`](Self::close).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Number of queued keys ([`FifoKind::RealFifo`]: of queued changes).
    pub fn len(&self) -> usize {
        self.shared.lock().queued_len()
    }

    /// `true` when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.shared.lock().queued_len() == 0
    }

    /// Queued keys in pop order ([`FifoKind::RealFifo`]: one per queued change).
    pub fn queued_keys(&self) -> Vec<ObjectKey> {
        let inner = self.shared.lock();
        match &inner.in_order {
            Some(q) => q.keys_in_order(),
            None => inner.queue.iter().cloned().collect(),
        }
    }

    /// Pops up to `max` (at least one) distinct keys with their deltas, in first-enqueue order,
    /// blocking while the queue is empty. The queue's lock is held only to take the batch out:
    /// the consumer works on it without any lock of ours, and producers go on meanwhile.
    ///
    /// Drop the [`PopBatch`] once its deltas are applied: that completes it (see
    /// [`PopBatch`] and [`has_synced`](Self::has_synced)).
    ///
    /// # Errors
    /// [`PopError::Closed`] once the queue is closed and empty.
    pub fn pop_batch(&self, max: usize) -> Result<PopBatch, PopError> {
        let mut inner = self.shared.lock();
        loop {
            if inner.queued_len() > 0 {
                return Ok(self.take_locked(&mut inner, max));
            }
            if inner.closed {
                return Err(PopError::Closed);
            }
            inner.blocked_poppers += 1;
            inner = self
                .shared
                .cond
                .wait(inner)
                .unwrap_or_else(PoisonError::into_inner);
            inner.blocked_poppers -= 1;
        }
    }

    /// As [`pop_batch`](Self::pop_batch) without waiting.
    ///
    /// # Errors
    /// [`TryPopError::Empty`] when nothing is queued, [`TryPopError::Closed`] once the queue is
    /// closed and empty.
    pub fn try_pop_batch(&self, max: usize) -> Result<PopBatch, TryPopError> {
        let mut inner = self.shared.lock();
        if inner.queued_len() > 0 {
            Ok(self.take_locked(&mut inner, max))
        } else if inner.closed {
            Err(TryPopError::Closed)
        } else {
            Err(TryPopError::Empty)
        }
    }

    /// As [`pop_batch`](Self::pop_batch), waiting asynchronously (for consumers on a tokio
    /// runtime; works on any executor).
    ///
    /// # Errors
    /// [`PopError::Closed`] once the queue is closed and empty.
    ///
    /// # Cancel safety
    /// Cancel safe: the batch is taken synchronously in the poll that returns it, so a dropped
    /// future never loses deltas.
    pub async fn pop_batch_async(&self, max: usize) -> Result<PopBatch, PopError> {
        loop {
            let notified = self.shared.notify.notified();
            let mut notified = std::pin::pin!(notified);
            // Register before checking, so a push between the check and the await wakes us.
            notified.as_mut().enable();
            match self.try_pop_batch(max) {
                Ok(batch) => return Ok(batch),
                Err(TryPopError::Closed) => return Err(PopError::Closed),
                Err(TryPopError::Empty) => notified.await,
            }
        }
    }

    pub(super) fn transform(&self, obj: Arc<Object>) -> Arc<Object> {
        match &self.shared.transform {
            Some(f) => f(obj),
            None => obj,
        }
    }

    /// Queues a batch of changes in order, as [`add`](Self::add) ([`DeltaType::Added`]),
    /// [`update`](Self::update) ([`DeltaType::Updated`]) and [`delete`](Self::delete)
    /// ([`DeltaType::Deleted`]) one by one would (any other type is queued as given), but under
    /// one lock and with at most one wake-up of a waiting pop: a consumer woken by the first
    /// change finds the whole batch (client-go's reflector takes the DeltaFIFO lock per event;
    /// the outcome is the same). The reflector's watch batches come in through this.
    pub fn apply_changes(&self, changes: impl IntoIterator<Item = (DeltaType, Arc<Object>)>) {
        let prepared: Vec<(DeltaType, ObjectKey, Arc<Object>)> = changes
            .into_iter()
            .map(|(kind, obj)| {
                let obj = self.transform(obj);
                (kind, obj.key(), obj)
            })
            .collect();
        let mut inner = self.shared.lock();
        let mut wake = false;
        for (kind, key, obj) in prepared {
            if kind == DeltaType::Deleted
                && !inner.is_queued(&key)
                && self.shared.known_get(&inner, &key).is_none()
            {
                continue;
            }
            wake |= inner.enqueue(key, Delta::new(kind, obj));
        }
        self.wake(inner, wake);
    }

    fn push(&self, kind: DeltaType, obj: Arc<Object>) {
        let obj = self.transform(obj);
        let key = obj.key();
        let mut inner = self.shared.lock();
        let wake = inner.enqueue(key, Delta::new(kind, obj));
        self.wake(inner, wake);
    }

    /// Releases the lock, then wakes waiting pops if the queue just became non-empty: waiters
    /// only sleep on an empty queue, so other pushes need no wake-up, and the `Condvar` is
    /// signalled only when a thread waits on it (async pops wait on the `Notify`). A busy queue
    /// costs producers one short lock per push and no wake-up.
    pub(super) fn wake(&self, inner: MutexGuard<'_, Inner>, became_non_empty: bool) {
        let blocked = inner.blocked_poppers > 0;
        drop(inner);
        if became_non_empty {
            if blocked {
                self.shared.cond.notify_all();
            }
            self.shared.notify.notify_waiters();
        }
    }

    fn take_locked(&self, inner: &mut Inner, max: usize) -> PopBatch {
        let id = inner.next_batch;
        inner.next_batch += 1;
        let track = self.shared.known.is_some();
        let taken: Vec<(ObjectKey, Deltas)> = match &mut inner.in_order {
            Some(q) => q
                .take(max)
                .into_iter()
                .map(|(key, delta)| (key, std::iter::once(delta).collect()))
                .collect(),
            None => {
                let n = max.max(1).min(inner.queue.len());
                let taken = (0..n)
                    .map(|_| {
                        let key = inner.queue.pop_front().expect("n <= queue length");
                        let deltas = inner
                            .items
                            .remove(&key)
                            .expect("every queued key has deltas");
                        (key, deltas)
                    })
                    .collect();
                inner.queue.give_back_room();
                inner.items.give_back_room();
                taken
            }
        };
        let mut items = Vec::with_capacity(taken.len());
        let mut initial = 0;
        for (key, deltas) in taken {
            let is_in_initial_list = inner.initial_unpopped > 0;
            if is_in_initial_list {
                inner.initial_unpopped -= 1;
                initial += 1;
            }
            if track {
                let newest = deltas.newest().expect("queued deltas are never empty");
                let after = match newest.kind {
                    DeltaType::Deleted => None,
                    _ => Some(newest.object.object().clone()),
                };
                inner
                    .in_flight
                    .insert(key.clone(), InFlight { batch: id, after });
            }
            items.push(KeyDeltas {
                key,
                deltas,
                is_in_initial_list,
            });
        }
        PopBatch {
            items,
            shared: self.shared.clone(),
            id,
            initial,
            tracked: track,
            list_rv: inner.replaced_rv,
        }
    }
}

impl fmt::Debug for DeltaFifo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("DeltaFifo")
            .field("queued", &inner.queued_len())
            .field(
                "kind",
                &if inner.in_order.is_some() {
                    FifoKind::RealFifo
                } else {
                    FifoKind::DeltaFifo
                },
            )
            .field("in_flight", &inner.in_flight.len())
            .field("populated", &inner.populated)
            .field("closed", &inner.closed)
            .field("has_synced", &self.has_synced())
            .finish()
    }
}
