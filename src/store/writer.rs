//! The write side: [`Writer`], which applies [`WriteBatch`]es.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use crate::object::{Object, parse_resource_version};

use super::batch::{Op, WriteBatch};
use super::error::StoreError;
use super::handoff::Handoff;
use super::index::{IndexDef, IndexFunc};
use super::reader::{Shared, Snapshot, Store};
use super::version::{Version, WARM_GROUP};

/// The one writer of a store (the informer). Not `Clone`: one writer, so versions form a line.
///
/// The writer keeps two buffers, each a complete store. Readers look up in the *front* one,
/// published through one `arc_swap::ArcSwap`; nothing changes it while it is published. A write
/// goes to the *back* buffer, in place, and is logged; then the two swap roles with one atomic
/// pointer swap, and the old front, once no reader is left in it, replays the log to become the
/// next back buffer. This is the left-right scheme: "no reader is left" is `Arc::get_mut`
/// succeeding on the old front after `ArcSwap::swap` (which turns every reader's outstanding
/// load into a counted reference before it returns), and no hazard slot announcing it (the
/// borrowing reads, `src/store/hazard.rs`: the one `unsafe` block of the crate, a dereference
/// of the published pointer). The protocol (`src/store/handoff.rs`) and the slots are
/// model-checked with loom (`tests/loom_handoff.rs`).
///
/// # Waiting on readers
///
/// Readers never wait for the writer (but for the few instructions the module docs name). The
/// writer waits for a reader only when the buffer it is about to write is still in use: by a
/// `Store` call that started before the previous swap (it finishes within microseconds unless
/// its thread was preempted) or by a held
/// [`Snapshot`]. It waits at most about as long as copying the store's tables would take
/// (1 ms plus 50 ns per object), then leaves that buffer to its readers and writes into a
/// fresh copy of the front buffer instead: a held snapshot never blocks the writer (what it
/// costs instead: see [`Snapshot`]).
///
/// A call that fails publishes nothing. Buffers left to readers are freed by a later writer
/// call once no reader holds them: freeing a replaced store's content happens here, never on a
/// reader's thread.
pub struct Writer {
    shared: Arc<Shared>,
    /// The two buffers and the log between them (the protocol lives in `handoff.rs`).
    buffers: Handoff<Version>,
    rv_tx: watch::Sender<u64>,
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("front", self.buffers.front())
            .field("pending_changes", &self.buffers.pending())
            .field("retired", &self.buffers.retired())
            .field("copies", &self.buffers.copies())
            .finish()
    }
}

impl Drop for Writer {
    /// Frees the unpublished buffers, except those a `Store` call in progress still reads
    /// (possibly on this very thread, inside a [`Store::with`] closure): those stay with the
    /// readers' handle until its last clone goes. Never waits.
    fn drop(&mut self) {
        self.buffers.release(&self.shared.current);
    }
}

impl Writer {
    pub(crate) fn new(version: Version) -> (Store, Writer) {
        let (buffers, front) = Handoff::new(version);
        let (rv_tx, rv_rx) = watch::channel(front.resource_version);
        let shared = Arc::new(Shared {
            current: super::sync::Current::new(front),
            rv: rv_rx,
        });
        (
            Store {
                shared: shared.clone(),
            },
            Writer {
                shared,
                buffers,
                rv_tx,
            },
        )
    }

    /// A read handle on this writer's store.
    pub fn store(&self) -> Store {
        Store {
            shared: self.shared.clone(),
        }
    }

    /// The latest published version (what readers see now).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: self.buffers.front().clone(),
        }
    }

    /// The resourceVersion of the latest published version.
    pub fn resource_version(&self) -> u64 {
        self.buffers.front().resource_version
    }

    /// How many times a buffer still held by readers (a [`Snapshot`] kept across writes) made
    /// this writer copy the store instead of updating that buffer in place.
    pub fn buffer_copies(&self) -> u64 {
        self.buffers.copies()
    }

    /// Applies a batch of adds, updates and deletes as one version (client-go `Add`, `Update`,
    /// `Delete`, one call per batch). Changes apply in order; a later change to the same key
    /// sees the earlier one.
    ///
    /// Returns, for each change in order, the object it replaced or deleted (`None` when the key
    /// was absent): the informer's "old object" for update and delete notifications.
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`] when an index function fails on an added object: the whole
    /// batch is rejected, readers never see any of it, and the store is unchanged.
    pub fn apply(&mut self, batch: WriteBatch) -> Result<Vec<Option<Arc<Object>>>, StoreError> {
        self.buffers.sweep();
        let front = self.buffers.front();
        let current_rv = front.resource_version;
        // Everything that can fail happens before anything changes: the index values of every
        // added object.
        // (Objects' own resourceVersions are parsed while writing, when each object is in
        // cache anyway; a pass of its own over the batch costs a cache miss per object.)
        let customs = front.custom_count();
        let mut values = Vec::new();
        if customs > 0 {
            for op in &batch.ops {
                if let Op::Upsert(obj) = op {
                    front.custom_values(obj, &mut values)?;
                }
            }
        }
        if batch.ops.is_empty() && batch.resource_version.is_none_or(|rv| rv <= current_rv) {
            return Ok(Vec::new());
        }
        let mut max_rv = None;
        let (back, log) = self.buffers.begin();
        let mut previous = Vec::with_capacity(batch.ops.len());
        let mut values = values.chunks(customs.max(1));
        let mut ops = batch.ops.into_iter();
        while ops.len() > 0 {
            back.warm(ops.as_slice());
            for op in ops.by_ref().take(WARM_GROUP) {
                match op {
                    Op::Upsert(obj) => {
                        if batch.resource_version.is_none() {
                            max_rv = max_rv.max(parse_resource_version(obj.resource_version()));
                        }
                        let custom = if customs == 0 {
                            &[]
                        } else {
                            values.next().unwrap_or_default()
                        };
                        previous.push(back.upsert(obj, custom, log));
                    }
                    Op::Delete(key) => previous.push(back.delete(&key, log)),
                }
            }
        }
        back.resource_version = batch
            .resource_version
            .or(max_rv)
            .unwrap_or(current_rv)
            .max(current_rv);
        self.publish(false);
        Ok(previous)
    }

    /// Replaces the whole content with `objects` at resourceVersion `rv`, rebuilding every
    /// index (client-go `Replace`, after a list or relist). Readers switch from the old content
    /// to the new in one step. When a key occurs twice, the later object wins.
    ///
    /// The store's resourceVersion becomes `rv`, even when lower than before (the list is the
    /// truth after a relist). The old content is released before the call returns unless a
    /// reader still holds it (then by a later writer call, once that reader lets go).
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`]: the store is unchanged.
    pub fn replace<I>(&mut self, objects: I, rv: u64) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Arc<Object>>,
    {
        self.buffers.sweep();
        // The back buffer is rebuilt: however this ends, it is copied from the front before
        // its next use as the back. On failure it is half-built and never published (the
        // front, what readers see, is never touched).
        let (back, _) = self.buffers.begin_rebuild();
        back.clear();
        back.rebuild(objects)?;
        back.resource_version = rv;
        self.publish(true);
        Ok(())
    }

    /// Advances the resourceVersion without changing objects (a watch BOOKMARK event). A `rv`
    /// at or below the current one changes nothing.
    pub fn bookmark(&mut self, rv: u64) {
        self.buffers.sweep();
        if rv <= self.buffers.front().resource_version {
            return;
        }
        self.buffers.begin().0.resource_version = rv;
        self.publish(false);
    }

    /// Adds one index and indexes every stored object (client-go `AddIndexers`).
    ///
    /// # Errors
    /// As [`Writer::add_indexers`].
    pub fn add_indexer(&mut self, name: &str, func: IndexFunc) -> Result<(), StoreError> {
        self.add_indexers([(name.to_owned(), func)])
    }

    /// Adds indexes and indexes every stored object with them, in one version: readers see
    /// the new indexes complete or not at all. Allowed at any time (client-go only allows it
    /// before the informer starts).
    ///
    /// # Errors
    /// [`StoreError::IndexExists`] when a name is taken or given twice;
    /// [`StoreError::IndexFunc`] when a function fails on a stored object. The store is then
    /// unchanged.
    pub fn add_indexers<I>(&mut self, indexers: I) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = (String, IndexFunc)>,
    {
        self.buffers.sweep();
        let defs: Vec<IndexDef> = indexers
            .into_iter()
            .map(|(name, func)| IndexDef::new(name, func))
            .collect();
        if defs.is_empty() {
            return Ok(());
        }
        let maps = self.buffers.front().build_indexes(&defs)?;
        self.buffers.begin().0.attach_indexes(defs, maps);
        self.buffers.discard();
        self.publish(false);
        Ok(())
    }

    /// Publishes the back buffer as the new version, wakes `wait_for` callers, and brings the
    /// other buffer up to date (waiting for its readers when `wait`: after a replace, to
    /// release the old content promptly).
    fn publish(&mut self, wait: bool) {
        self.buffers.publish(&self.shared.current);
        let rv = self.buffers.front().resource_version;
        // After the swap: a waiter woken by this value finds the version published.
        self.rv_tx.send_if_modified(|v| {
            let changed = *v != rv;
            *v = rv;
            changed
        });
        self.buffers.settle(wait);
    }
}
