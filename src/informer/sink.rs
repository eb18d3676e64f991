//! Where the reflector meets the DeltaFIFO: the queue as a [`ReflectorStore`], the informer's
//! [`FifoSink`] over it, and the store as the queue's known objects ([`KnownStore`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fifo::{DeltaFifo, DeltaType, KnownObjects};
use crate::object::{Object, ObjectKey, parse_resource_version};
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

/// What the informer's reflector writes into: the DeltaFIFO, plus the newest resourceVersion
/// the reflector has handed over (used to advance the store's resourceVersion once everything
/// before it is applied).
pub(super) struct FifoSink {
    pub(super) fifo: DeltaFifo,
    pub(super) seen_rv: Arc<AtomicU64>,
    /// Wakes the processing thread when `seen_rv` moved (it may advance the store's
    /// resourceVersion even when no delta follows, e.g. after a bookmark).
    pub(super) rv_moved: Arc<tokio::sync::Notify>,
    /// Compacts listed objects as they arrive (with [`Compression::Zstd`](super::Compression)).
    pub(super) list_compactor: Option<ListCompactor>,
}

impl FifoSink {
    fn saw(&self, rv: &str) {
        if let Some(rv) = parse_resource_version(rv) {
            self.seen_rv.fetch_max(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
    }
}

impl ReflectorStore for FifoSink {
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed> {
        ReflectorStore::replace(&self.fifo, items, resource_version)?;
        // A relist is the truth at its version, even below a bookmark seen before.
        if let Some(rv) = parse_resource_version(resource_version) {
            self.seen_rv.store(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        // The newest change's version, read before the changes are queued and recorded after.
        let newest = changes
            .last()
            .map(|c| c.object().resource_version().to_owned());
        ReflectorStore::apply(&self.fifo, changes)?;
        if let Some(rv) = newest {
            self.saw(&rv);
        }
        Ok(())
    }

    fn listed(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        match &self.list_compactor {
            Some(c) => c.compact(items),
            None => items,
        }
    }

    fn bookmark(&self, resource_version: &str) {
        self.saw(resource_version);
    }
}
