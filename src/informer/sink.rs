//! Where the reflector meets the DeltaFIFO: the queue as a [`ReflectorStore`], the informer's
//! [`FifoSink`] over it, and the store as the queue's known objects ([`KnownStore`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::fifo::{DeltaFifo, DeltaType, Filter, KnownObjects, Transform};
use crate::object::{KeySet, Object, ObjectKey, parse_resource_version};
use crate::reflector::{ReflectorStore, StoreClosed, WatchChange};
use crate::store::Store;

use super::list_compactor::ListCompactor;

/// The reflector writes straight into the queue, as client-go's reflector into its DeltaFIFO:
/// a list is a [`DeltaFifo::replace`], watch changes are [`DeltaFifo::add`] /
/// [`DeltaFifo::update`] / [`DeltaFifo::delete`] (one [`DeltaFifo::apply_changes`] per batch),
/// bookmarks are ignored (the queue does not track versions). Fails with [`StoreClosed`] once
/// the queue is closed, which stops the reflector.
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
        self.apply_changes(changes.into_iter().map(|c| match c {
            WatchChange::Added(o) => (DeltaType::Added, o),
            WatchChange::Modified(o) => (DeltaType::Updated, o),
            WatchChange::Deleted(o) => (DeltaType::Deleted, o),
        }));
        Ok(())
    }
}

/// The store as the DeltaFIFO's known objects (client-go passes the indexer as
/// `knownObjects`).
pub(super) struct KnownStore(pub(super) Store);

impl KnownObjects for KnownStore {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.keys()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.0.get(key)
    }
}

/// What the informer's reflector writes into: the DeltaFIFO, behind the informer's transform
/// and filter, plus the newest resourceVersion the reflector has handed over (used to advance
/// the store's resourceVersion once everything before it is applied).
///
/// The transform runs first (in `listed` for listed objects, in `apply` for watch changes),
/// then the filter, on the transformed object. The DeltaFIFO itself has neither.
pub(super) struct FifoSink {
    pub(super) fifo: DeltaFifo,
    pub(super) seen_rv: Arc<AtomicU64>,
    /// Wakes the processing thread when `seen_rv` moved (it may advance the store's
    /// resourceVersion even when no delta follows, e.g. after a bookmark).
    pub(super) rv_moved: Arc<tokio::sync::Notify>,
    /// Compacts listed objects as they arrive (with [`Compression::Zstd`](super::Compression)).
    pub(super) list_compactor: Option<ListCompactor>,
    /// The informer's transform.
    pub(super) transform: Option<Transform>,
    /// The informer's filter: objects it rejects never reach the queue.
    pub(super) filter: Option<Filter>,
    /// Held while the filter's answers become queued deltas: by the reflector around "judge a
    /// batch, queue it", by [`FifoSink::refilter`] around "judge the cache, queue the
    /// deletions". A change judged under the filter's old answer is then queued before a
    /// refilter's deletions, never after them. Not taken without a filter.
    pub(super) filtering: Mutex<()>,
    /// The keys of the relist being queued page by page ([`DeltaFifo::replace_page`]);
    /// `None` when the current list goes to the queue whole.
    pub(super) relist_keys: Mutex<Option<KeySet>>,
}

impl FifoSink {
    fn saw(&self, rv: &str) {
        if let Some(rv) = parse_resource_version(rv) {
            self.seen_rv.fetch_max(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
    }

    /// After a list is queued: the sampler stops, and the list's version is recorded (a
    /// relist is the truth at its version, even below a bookmark seen before).
    fn ended(&self, resource_version: &str) {
        if let Some(c) = &self.list_compactor {
            c.list_ended();
        }
        if let Some(rv) = parse_resource_version(resource_version) {
            self.seen_rv.store(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
    }

    fn transformed(&self, obj: Arc<Object>) -> Arc<Object> {
        match &self.transform {
            Some(t) => t(obj),
            None => obj,
        }
    }

    fn lock_relist_keys(&self) -> MutexGuard<'_, Option<KeySet>> {
        self.relist_keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `items` (transformed, compacted) as a page of the relist being streamed, if
    /// one is: judged by the filter under its lock, named in the relist's keys. Returns the
    /// items when no relist is streamed.
    fn queue_page(&self, items: Vec<Arc<Object>>) -> Option<Vec<Arc<Object>>> {
        let mut keys = self.lock_relist_keys();
        let Some(keys) = keys.as_mut() else {
            return Some(items);
        };
        let _filtering = self.filter.as_ref().map(|_| self.lock_filtering());
        let kept: Vec<Arc<Object>> = match &self.filter {
            Some(filter) => items.into_iter().filter(|o| filter(o)).collect(),
            None => items,
        };
        keys.extend(kept.iter().map(|o| o.key()));
        self.fifo.replace_page(kept);
        None
    }

    fn lock_filtering(&self) -> MutexGuard<'_, ()> {
        self.filtering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a deletion of every key cached or queued whose newest state the filter now
    /// rejects (see [`Informer::refilter`](super::Informer::refilter)); returns how many.
    pub(super) fn refilter(&self) -> usize {
        let Some(filter) = &self.filter else {
            return 0;
        };
        let _filtering = self.lock_filtering();
        self.fifo.delete_unless(|o| filter(o))
    }
}

impl ReflectorStore for FifoSink {
    fn list_begins(&self, paged: bool) {
        // A relist read page by page goes to the queue as it comes; the first list goes in
        // whole (see `DeltaFifo::streams_relists`), and so does a streaming list, whose later
        // events may take back an object listed before.
        *self.lock_relist_keys() = (paged && self.fifo.streams_relists()).then(KeySet::default);
    }

    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed> {
        if self.fifo.is_closed() {
            return Err(StoreClosed);
        }
        let items = match &self.list_compactor {
            Some(c) => c.compact_rest(items),
            None => items,
        };
        // The end of a relist queued page by page: what is left, then its deletions.
        if self.lock_relist_keys().is_some() {
            // Only this (the reflector's) thread begins, feeds and ends lists: the keys are
            // still there, and `queue_page` takes every item.
            let _ = self.queue_page(items);
            let keys = self.lock_relist_keys().take().unwrap_or_default();
            let _filtering = self.filter.as_ref().map(|_| self.lock_filtering());
            self.fifo.finish_replace(&keys, resource_version);
            drop(_filtering);
            self.ended(resource_version);
            return Ok(());
        }
        // Items come transformed (and filtered) from `listed`; judged again here, under the
        // lock, with the filter's current answer (a refilter may have run since).
        match &self.filter {
            None => ReflectorStore::replace(&self.fifo, items, resource_version)?,
            Some(filter) => {
                let _filtering = self.lock_filtering();
                let kept = items.into_iter().filter(|o| filter(o)).collect();
                ReflectorStore::replace(&self.fifo, kept, resource_version)?;
            }
        }
        self.ended(resource_version);
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        if self.fifo.is_closed() {
            return Err(StoreClosed);
        }
        // The newest change's version, read before the changes are queued and recorded after.
        let newest = changes
            .last()
            .map(|c| c.object().resource_version().to_owned());
        let changes = changes.into_iter().map(|c| match c {
            WatchChange::Added(o) => (DeltaType::Added, self.transformed(o)),
            WatchChange::Modified(o) => (DeltaType::Updated, self.transformed(o)),
            WatchChange::Deleted(o) => (DeltaType::Deleted, self.transformed(o)),
        });
        match &self.filter {
            None => self.fifo.apply_changes(changes),
            Some(filter) => {
                // Transformed before the lock is taken: only the filter runs under it.
                let changes: Vec<(DeltaType, Arc<Object>)> = changes.collect();
                let _filtering = self.lock_filtering();
                // A rejected object leaves the cache as a deletion (dropped when its key is
                // neither cached nor queued, or already on its way out), as a server-side
                // selector sends DELETED for an object that stops matching.
                self.fifo.apply_judged(changes, |o| filter(o));
            }
        }
        if let Some(rv) = newest {
            self.saw(&rv);
        }
        Ok(())
    }

    fn listed(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        let items = self.listed_unchecked(items);
        self.queue_page(items).unwrap_or_default()
    }

    fn listed_unchecked(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        // Transformed here, once: `replace` gets only what this returns. Filtered here too,
        // so a list holds only what the cache may keep (judged again by `replace`).
        let mut items: Vec<Arc<Object>> = match &self.transform {
            Some(_) => items.into_iter().map(|o| self.transformed(o)).collect(),
            None => items,
        };
        if let Some(filter) = &self.filter {
            items.retain(|o| filter(o));
        }
        match &self.list_compactor {
            Some(c) => c.compact(items),
            None => items,
        }
    }

    fn bookmark(&self, resource_version: &str) {
        self.saw(resource_version);
    }
}
