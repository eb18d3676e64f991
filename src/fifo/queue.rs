//! [`DeltaFifo`]: the queue itself, its [`Builder`] and the popped [`Batch`].

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::delta::{DeletedFinalStateUnknown, Delta, DeltaType, Deltas};
use super::error::{PopError, TryPopError};
use super::in_order::InOrder;
use super::known::KnownObjects;
use crate::object::{Object, ObjectKey, parse_resource_version};
use crate::reflector::{ReflectorStore, StoreClosed, WatchChange};

/// A transform applied to every object entering the queue from the producer (`add`, `update`,
/// `delete`, `replace`), before it is queued; for example dropping `managedFields`
/// (client-go `TransformFunc`). Not applied to objects read back from [`KnownObjects`] (they went
/// through it when they were queued).
pub type Transform = Arc<dyn Fn(Arc<Object>) -> Arc<Object> + Send + Sync>;

/// `unsynced` before the first `replace`.
const UNPOPULATED: usize = usize::MAX;

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

/// A queue of per-key deltas (client-go `DeltaFIFO`); see the [module docs](super) for the rules.
///
/// Cloning gives another handle to the same queue: typically the reflector holds one to produce
/// and the informer one to consume.
#[derive(Clone)]
pub struct DeltaFifo {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Signals blocked [`DeltaFifo::pop_batch`] callers (only when `Inner::blocked_poppers > 0`).
    cond: Condvar,
    /// Signals async [`DeltaFifo::pop_batch_async`] callers.
    notify: Notify,
    known: Option<Arc<dyn KnownObjects>>,
    transform: Option<Transform>,
    /// Items of the first `replace` not yet popped *and* completed (their [`Batch`] dropped);
    /// [`UNPOPULATED`] before the first `replace`. `has_synced` is `unsynced == 0`.
    ///
    /// Written under the lock by the first `replace` and decremented by `Batch::drop` with
    /// `Release`; read with `Acquire`, so a thread that sees `has_synced() == true` also sees
    /// everything the consumer did before completing the last initial batch (e.g. store writes).
    unsynced: AtomicUsize,
}

struct Inner {
    /// Deltas per queued key; a key is here iff it is in `queue` ([`FifoKind::DeltaFifo`]).
    items: HashMap<ObjectKey, Deltas>,
    /// Every change in order ([`FifoKind::RealFifo`]; `items` and `queue` stay empty).
    in_order: Option<InOrder>,
    /// Queued keys in first-enqueue order, each once.
    queue: VecDeque<ObjectKey>,
    /// Keys popped in batches not yet completed, with the state the consumer is applying. Only
    /// kept when there are [`KnownObjects`]: it overlays them, so deletion detection and resync
    /// see the state as if those batches were already applied (upstream gets this by holding
    /// its lock while the consumer runs; we do not).
    in_flight: HashMap<ObjectKey, InFlight>,
    next_batch: u64,
    /// Items of the first `replace` not yet popped.
    initial_unpopped: usize,
    populated: bool,
    closed: bool,
    /// Threads waiting in `pop_batch`.
    blocked_poppers: usize,
    /// The resourceVersion of the newest `replace` (0 before the first, or when it is not a
    /// number), handed to every batch taken after it.
    replaced_rv: u64,
}

struct InFlight {
    batch: u64,
    /// The object after applying the batch; `None` when its newest delta is a deletion.
    after: Option<Arc<Object>>,
}

/// One popped key: its deltas, oldest first, and whether it belongs to the first `replace`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDeltas {
    /// The key.
    pub key: ObjectKey,
    /// Its deltas, oldest first; never empty.
    pub deltas: Deltas,
    /// `true` while the queue has not synced: this key is part of the first `replace` (client-go
    /// `isInInitialList`); the informer passes it on to `on_add`.
    pub is_in_initial_list: bool,
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
                    items: HashMap::new(),
                    in_order: (self.kind == FifoKind::RealFifo).then(InOrder::default),
                    queue: VecDeque::new(),
                    in_flight: HashMap::new(),
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
        let mut inner = self.lock();
        if !is_queued(&inner, &key) && self.known_get(&inner, &key).is_none() {
            return;
        }
        let wake = enqueue(&mut inner, key, Delta::new(DeltaType::Deleted, obj));
        self.wake(inner, wake);
    }

    /// Replaces the queue's view with a full list (client-go `Replace`, with Replaced deltas):
    /// queues [`DeltaType::Replaced`] for every listed object, then a [`DeltaType::Deleted`]
    /// with a [`DeletedFinalStateUnknown`] tombstone for every key queued or known but not
    /// listed. The tombstone carries the newest queued object of the key, else the known one.
    ///
    /// The first call marks the queue populated: it [`has_synced`](Self::has_synced) once
    /// every key queued at the end of this call has been popped and its batch completed.
    ///
    /// `resource_version` is the list's version. The queue does not order by it (the reflector
    /// tracks versions); it hands it to every batch taken from now on
    /// ([`Batch::list_resource_version`]), so that the consumer that applies the last of the
    /// list knows the version its store then reflects (client-go's AtomicFIFO keeps the same
    /// for `LastStoreSyncResourceVersion`).
    pub fn replace(&self, list: Vec<Arc<Object>>, resource_version: &str) {
        // Transform and key outside the lock: producers never hold it longer than needed.
        let list: Vec<(ObjectKey, Arc<Object>)> = list
            .into_iter()
            .map(|obj| {
                let obj = self.transform(obj);
                (obj.key(), obj)
            })
            .collect();
        let listed: HashSet<ObjectKey> = list.iter().map(|(k, _)| k.clone()).collect();

        let mut inner = self.lock();
        // Recorded under the lock before any item can be popped.
        inner.replaced_rv = parse_resource_version(resource_version).unwrap_or(0);
        if inner.in_order.is_some() {
            let wake = self.replace_in_order(&mut inner, list, &listed);
            self.mark_populated(&mut inner);
            self.wake(inner, wake);
            return;
        }
        let mut wake = false;
        for (key, obj) in list {
            wake |= enqueue(&mut inner, key, Delta::new(DeltaType::Replaced, obj));
        }

        // Deletions of queued keys, in queue order.
        let queued_missing: Vec<(ObjectKey, Arc<Object>)> = inner
            .queue
            .iter()
            .filter(|k| !listed.contains(*k))
            .filter_map(|k| {
                let newest = inner.items.get(k)?.newest()?;
                Some((k.clone(), newest.object.object().clone()))
            })
            .collect();
        for (key, obj) in queued_missing {
            wake |= enqueue_tombstone(&mut inner, key, obj);
        }

        // Deletions of known keys with nothing queued.
        for key in self.known_keys(&inner) {
            if listed.contains(&key) || inner.items.contains_key(&key) {
                continue;
            }
            // A key listed but then gone from the store was deleted meanwhile: nothing to do.
            let Some(obj) = self.known_get(&inner, &key) else {
                continue;
            };
            wake |= enqueue_tombstone(&mut inner, key, obj);
        }

        self.mark_populated(&mut inner);
        self.wake(inner, wake);
    }

    /// The first `replace` populates the queue: what it left queued is the initial list.
    fn mark_populated(&self, inner: &mut Inner) {
        if !inner.populated {
            inner.populated = true;
            let n = queued_len(inner);
            inner.initial_unpopped = n;
            self.shared.unsynced.store(n, Ordering::Release);
        }
    }

    /// [`FifoKind::RealFifo`]'s `replace`: one group of entries (popped as one batch), the
    /// tombstones of keys queued or known but not listed first, then the listed objects in
    /// list order (client-go `ReplacedAll`). A key whose newest queued change is a deletion
    /// gets no tombstone: it is already on its way out (the per-key queue collapses the two
    /// deletions instead). Returns whether the queue was empty.
    fn replace_in_order(
        &self,
        inner: &mut Inner,
        list: Vec<(ObjectKey, Arc<Object>)>,
        listed: &HashSet<ObjectKey>,
    ) -> bool {
        let was_empty = queued_len(inner) == 0;
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
        for key in self.known_keys(inner) {
            let queued = inner.in_order.as_ref().is_some_and(|q| q.is_queued(&key));
            if listed.contains(&key) || queued {
                continue;
            }
            if let Some(obj) = self.known_get(inner, &key) {
                gone.push((key, obj));
            }
        }
        let q = inner.in_order.as_mut().expect("in-order queue");
        let group = q.new_group();
        for (key, obj) in gone {
            let tombstone = DeletedFinalStateUnknown {
                key: key.clone(),
                obj,
            };
            let delta = Delta {
                kind: DeltaType::Deleted,
                object: tombstone.into(),
            };
            q.push(key, delta, group);
        }
        for (key, obj) in list {
            q.push(key, Delta::new(DeltaType::Replaced, obj), group);
        }
        was_empty && queued_len(inner) > 0
    }

    /// Queues a [`DeltaType::Sync`] delta for every known key that has nothing queued (client-go
    /// `Resync`). Does nothing without [`KnownObjects`].
    pub fn resync(&self) {
        if self.shared.known.is_none() {
            return;
        }
        let mut inner = self.lock();
        let mut wake = false;
        for key in self.known_keys(&inner) {
            if is_queued(&inner, &key) {
                continue;
            }
            if let Some(obj) = self.known_get(&inner, &key) {
                wake |= enqueue(&mut inner, key, Delta::new(DeltaType::Sync, obj));
            }
        }
        self.wake(inner, wake);
    }

    /// `true` once the first [`replace`](Self::replace) happened and every key it left queued
    /// (listed items and detected deletions) has been popped and its [`Batch`] completed
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
        let mut inner = self.lock();
        inner.closed = true;
        drop(inner);
        self.shared.cond.notify_all();
        self.shared.notify.notify_waiters();
    }

    /// `true` after [`close`](Self::close).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Number of queued keys ([`FifoKind::RealFifo`]: of queued changes).
    pub fn len(&self) -> usize {
        queued_len(&self.lock())
    }

    /// `true` when nothing is queued.
    pub fn is_empty(&self) -> bool {
        queued_len(&self.lock()) == 0
    }

    /// Queued keys in pop order ([`FifoKind::RealFifo`]: one per queued change).
    pub fn queued_keys(&self) -> Vec<ObjectKey> {
        let inner = self.lock();
        match &inner.in_order {
            Some(q) => q.keys_in_order(),
            None => inner.queue.iter().cloned().collect(),
        }
    }

    /// Pops up to `max` (at least one) distinct keys with their deltas, in first-enqueue order,
    /// blocking while the queue is empty. The queue's lock is held only to take the batch out:
    /// the consumer works on it without any lock of ours, and producers go on meanwhile.
    ///
    /// Drop the [`Batch`] once its deltas are applied: that completes it (see
    /// [`Batch`] and [`has_synced`](Self::has_synced)).
    ///
    /// # Errors
    /// [`PopError::Closed`] once the queue is closed and empty.
    pub fn pop_batch(&self, max: usize) -> Result<Batch, PopError> {
        let mut inner = self.lock();
        loop {
            if queued_len(&inner) > 0 {
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
    pub fn try_pop_batch(&self, max: usize) -> Result<Batch, TryPopError> {
        let mut inner = self.lock();
        if queued_len(&inner) > 0 {
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
    pub async fn pop_batch_async(&self, max: usize) -> Result<Batch, PopError> {
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code of ours panics under the lock with the structures half-updated; a panic in a
        // `KnownObjects` implementation leaves them consistent.
        self.shared
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn transform(&self, obj: Arc<Object>) -> Arc<Object> {
        match &self.shared.transform {
            Some(f) => f(obj),
            None => obj,
        }
    }

    /// Queues a batch of watch changes in order, as [`DeltaFifo::add`], [`DeltaFifo::update`]
    /// and [`DeltaFifo::delete`] one by one would, but under one lock and with at most one
    /// wake-up of a waiting pop: a consumer woken by the first change finds the whole batch
    /// (client-go's reflector takes the DeltaFIFO lock per event; the outcome is the same).
    pub fn apply_changes(&self, changes: Vec<WatchChange>) {
        let prepared: Vec<(DeltaType, ObjectKey, Arc<Object>)> = changes
            .into_iter()
            .map(|c| {
                let (kind, obj) = match c {
                    WatchChange::Added(o) => (DeltaType::Added, o),
                    WatchChange::Modified(o) => (DeltaType::Updated, o),
                    WatchChange::Deleted(o) => (DeltaType::Deleted, o),
                };
                let obj = self.transform(obj);
                (kind, obj.key(), obj)
            })
            .collect();
        let mut inner = self.lock();
        let mut wake = false;
        for (kind, key, obj) in prepared {
            if kind == DeltaType::Deleted
                && !is_queued(&inner, &key)
                && self.known_get(&inner, &key).is_none()
            {
                continue;
            }
            wake |= enqueue(&mut inner, key, Delta::new(kind, obj));
        }
        self.wake(inner, wake);
    }

    fn push(&self, kind: DeltaType, obj: Arc<Object>) {
        let obj = self.transform(obj);
        let key = obj.key();
        let mut inner = self.lock();
        let wake = enqueue(&mut inner, key, Delta::new(kind, obj));
        self.wake(inner, wake);
    }

    /// Releases the lock, then wakes waiting pops if the queue just became non-empty (waiters
    /// only sleep on an empty queue, so other pushes need no wake-up).
    fn wake(&self, inner: MutexGuard<'_, Inner>, became_non_empty: bool) {
        let blocked = inner.blocked_poppers > 0;
        drop(inner);
        if became_non_empty {
            if blocked {
                self.shared.cond.notify_all();
            }
            self.shared.notify.notify_waiters();
        }
    }

    /// The known object under `key`, with in-flight batches applied.
    fn known_get(&self, inner: &Inner, key: &ObjectKey) -> Option<Arc<Object>> {
        let known = self.shared.known.as_ref()?;
        match inner.in_flight.get(key) {
            Some(f) => f.after.clone(),
            None => known.get(key),
        }
    }

    /// The known keys, with in-flight batches applied.
    fn known_keys(&self, inner: &Inner) -> Vec<ObjectKey> {
        let Some(known) = &self.shared.known else {
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

    fn take_locked(&self, inner: &mut Inner, max: usize) -> Batch {
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
                (0..n)
                    .map(|_| {
                        let key = inner.queue.pop_front().expect("n <= queue length");
                        let deltas = inner
                            .items
                            .remove(&key)
                            .expect("every queued key has deltas");
                        (key, deltas)
                    })
                    .collect()
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
        Batch {
            items,
            shared: self.shared.clone(),
            id,
            initial,
            tracked: track,
            list_rv: inner.replaced_rv,
        }
    }
}

/// Queues a Deleted delta carrying a tombstone with the last known `obj` of `key` (a deletion
/// detected by `replace`, not seen on the watch). Returns whether the queue was empty.
fn enqueue_tombstone(inner: &mut Inner, key: ObjectKey, obj: Arc<Object>) -> bool {
    let tombstone = DeletedFinalStateUnknown {
        key: key.clone(),
        obj,
    };
    enqueue(
        inner,
        key,
        Delta {
            kind: DeltaType::Deleted,
            object: tombstone.into(),
        },
    )
}

/// Whether `key` has something queued.
fn is_queued(inner: &Inner, key: &ObjectKey) -> bool {
    match &inner.in_order {
        Some(q) => q.is_queued(key),
        None => inner.items.contains_key(key),
    }
}

/// Queued keys ([`FifoKind::DeltaFifo`]) or changes ([`FifoKind::RealFifo`]).
fn queued_len(inner: &Inner) -> usize {
    match &inner.in_order {
        Some(q) => q.len(),
        None => inner.queue.len(),
    }
}

/// Appends `delta` to `key`'s deltas, queueing the key if it was not ([`FifoKind::RealFifo`]:
/// appends it as its own entry). Returns `true` when the queue was empty before.
fn enqueue(inner: &mut Inner, key: ObjectKey, delta: Delta) -> bool {
    if let Some(q) = &mut inner.in_order {
        let was_empty = q.len() == 0;
        q.push(key, delta, 0);
        return was_empty;
    }
    let was_empty = inner.queue.is_empty();
    match inner.items.entry(key) {
        Entry::Occupied(mut e) => e.get_mut().push(delta),
        Entry::Vacant(e) => {
            inner.queue.push_back(e.key().clone());
            e.insert(std::iter::once(delta).collect());
        }
    }
    was_empty
}

/// The reflector writes straight into the queue, as client-go's reflector into its DeltaFIFO:
/// a list is a [`DeltaFifo::replace`], watch changes are [`DeltaFifo::add`] /
/// [`DeltaFifo::update`] / [`DeltaFifo::delete`], bookmarks are ignored (the queue does not track
/// versions). Fails with [`StoreClosed`] once the queue is closed, which stops the reflector.
impl ReflectorStore for DeltaFifo {
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed> {
        if self.is_closed() {
            return Err(StoreClosed);
        }
        DeltaFifo::replace(self, items, resource_version);
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        if self.is_closed() {
            return Err(StoreClosed);
        }
        self.apply_changes(changes);
        Ok(())
    }
}

impl fmt::Debug for DeltaFifo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("DeltaFifo")
            .field("queued", &queued_len(&inner))
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

/// Keys popped together, each with its deltas; dereferences to `[KeyDeltas]`.
///
/// The batch is *completed* when dropped: the queue then stops overlaying its state on the
/// [`KnownObjects`] (the consumer must have applied it to them by then) and counts its initial
/// items towards [`DeltaFifo::has_synced`]. Drop it after applying its deltas, not before.
/// A batch may be sent to another thread.
#[must_use = "dropping a batch completes it: apply its deltas first"]
pub struct Batch {
    items: Vec<KeyDeltas>,
    shared: Arc<Shared>,
    id: u64,
    initial: usize,
    tracked: bool,
    list_rv: u64,
}

impl Batch {
    /// The popped keys with their deltas, in pop order.
    pub fn items(&self) -> &[KeyDeltas] {
        &self.items
    }

    /// The resourceVersion of the newest [`DeltaFifo::replace`] queued before this batch was
    /// taken (0 before the first list, or when its version is not a number). Once this batch
    /// is applied and the queue is empty, a store fed by the queue reflects at least this
    /// version.
    pub fn list_resource_version(&self) -> u64 {
        self.list_rv
    }

    /// Completes the batch (same as dropping it).
    pub fn complete(self) {}
}

impl Deref for Batch {
    type Target = [KeyDeltas];

    fn deref(&self) -> &[KeyDeltas] {
        &self.items
    }
}

impl<'a> IntoIterator for &'a Batch {
    type Item = &'a KeyDeltas;
    type IntoIter = std::slice::Iter<'a, KeyDeltas>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if self.tracked {
            let mut inner = self
                .shared
                .inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for item in &self.items {
                if let Entry::Occupied(e) = inner.in_flight.entry(item.key.clone())
                    && e.get().batch == self.id
                {
                    e.remove();
                }
            }
        }
        if self.initial > 0 {
            self.shared
                .unsynced
                .fetch_sub(self.initial, Ordering::Release);
        }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("id", &self.id)
            .field("initial", &self.initial)
            .field("items", &self.items)
            .finish()
    }
}
