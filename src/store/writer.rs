//! The write side: [`Writer`] and the [`Batch`] it applies.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use crate::object::{Object, ObjectKey, parse_resource_version};

use super::error::StoreError;
use super::index::{IndexDef, IndexFunc};
use super::reader::{Shared, Snapshot, Store};
use super::version::Version;

/// One change in a [`Batch`].
#[derive(Clone, Debug)]
pub enum Op {
    /// Add or update (the same thing, as in client-go): store the object under its key.
    Upsert(Arc<Object>),
    /// Remove whatever is stored under the key (nothing when absent).
    Delete(ObjectKey),
}

/// Changes applied together by [`Writer::apply`]: readers see all of them or none.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use bytes::Bytes;
/// use informer::object::{Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta};
/// use informer::store::{Batch, StoreConfig, store};
///
/// let pod = |name: &str| {
///     let meta = ObjectMeta { name: name.into(), namespace: "default".into(), ..Default::default() };
///     let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
///     Arc::new(Object::from_parts(gvk, meta, Bytes::new(), Encoding::Protobuf))
/// };
/// let (reader, mut writer) = store(StoreConfig::default());
///
/// let mut batch = Batch::with_capacity(2);
/// batch.add(pod("a")).add(pod("b"));
/// batch.set_resource_version(1234);
/// writer.apply(batch)?;
///
/// let mut batch = Batch::new();
/// batch.update(pod("a")).delete(ObjectKey::new("default", "b"));
/// let previous = writer.apply(batch.with_resource_version(1235))?;
/// assert!(previous.iter().all(Option::is_some)); // an update and a delete
///
/// assert_eq!(reader.len(), 1);
/// assert_eq!(reader.resource_version(), 1235);
/// assert_eq!(reader.by_index("namespace", "default")?.len(), 1);
/// # Ok::<(), informer::store::StoreError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Batch {
    ops: Vec<Op>,
    resource_version: Option<u64>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// An empty batch with room for `n` changes.
    pub fn with_capacity(n: usize) -> Self {
        Batch {
            ops: Vec::with_capacity(n),
            resource_version: None,
        }
    }

    /// Stores `obj` under its key (client-go `Add`).
    pub fn add(&mut self, obj: Arc<Object>) -> &mut Self {
        self.ops.push(Op::Upsert(obj));
        self
    }

    /// Stores `obj` under its key (client-go `Update`; identical to [`Batch::add`]).
    pub fn update(&mut self, obj: Arc<Object>) -> &mut Self {
        self.add(obj)
    }

    /// Removes the object stored under `key` (client-go `Delete`).
    pub fn delete(&mut self, key: ObjectKey) -> &mut Self {
        self.ops.push(Op::Delete(key));
        self
    }

    /// Appends an [`Op`].
    pub fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// The resourceVersion the store reflects once this batch is applied (e.g. the watch
    /// event's). Without it, the largest `metadata.resourceVersion` among the added objects
    /// that parses as a `u64` is used. Either way the store's resourceVersion never goes back.
    pub fn set_resource_version(&mut self, rv: u64) -> &mut Self {
        self.resource_version = Some(rv);
        self
    }

    /// [`Batch::set_resource_version`], by value.
    #[must_use]
    pub fn with_resource_version(mut self, rv: u64) -> Self {
        self.resource_version = Some(rv);
        self
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The changes, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
}

impl FromIterator<Op> for Batch {
    fn from_iter<I: IntoIterator<Item = Op>>(iter: I) -> Self {
        Batch {
            ops: iter.into_iter().collect(),
            resource_version: None,
        }
    }
}

impl Extend<Op> for Batch {
    fn extend<I: IntoIterator<Item = Op>>(&mut self, iter: I) {
        self.ops.extend(iter);
    }
}

/// The one writer of a store (the informer). Not `Clone`: one writer, so versions form a line.
///
/// Every call that changes something builds the next version off the current one (persistent
/// maps: only the paths to the touched entries are copied), then publishes it with one atomic
/// pointer swap. A call that fails publishes nothing.
///
/// Old versions are freed by the writer, not by readers: a version a reader still holds (a
/// [`Snapshot`]) is kept in a retired list and dropped by a later writer call once no reader
/// holds it, so the cost of freeing a replaced store lands here, off the reader path.
pub struct Writer {
    shared: Arc<Shared>,
    current: Arc<Version>,
    rv_tx: watch::Sender<u64>,
    retired: Vec<Arc<Version>>,
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("current", &self.current)
            .field("retired", &self.retired.len())
            .finish()
    }
}

impl Writer {
    pub(crate) fn new(version: Version) -> (Store, Writer) {
        let current = Arc::new(version);
        let (rv_tx, rv_rx) = watch::channel(current.resource_version);
        let shared = Arc::new(Shared {
            current: arc_swap::ArcSwap::new(current.clone()),
            rv: rv_rx,
        });
        (
            Store {
                shared: shared.clone(),
            },
            Writer {
                shared,
                current,
                rv_tx,
                retired: Vec::new(),
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
            version: self.current.clone(),
        }
    }

    /// The resourceVersion of the latest published version.
    pub fn resource_version(&self) -> u64 {
        self.current.resource_version
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
    pub fn apply(&mut self, batch: Batch) -> Result<Vec<Option<Arc<Object>>>, StoreError> {
        self.sweep();
        let current_rv = self.current.resource_version;
        let mut next = (*self.current).clone();
        let mut previous = Vec::with_capacity(batch.ops.len());
        let mut max_rv = None;
        for op in batch.ops {
            match op {
                Op::Upsert(obj) => {
                    if batch.resource_version.is_none() {
                        max_rv = max_rv.max(parse_resource_version(obj.resource_version()));
                    }
                    previous.push(next.upsert(obj)?);
                }
                Op::Delete(key) => previous.push(next.delete(key.as_str())),
            }
        }
        next.resource_version = batch
            .resource_version
            .or(max_rv)
            .unwrap_or(current_rv)
            .max(current_rv);
        if previous.is_empty() && next.resource_version == current_rv {
            return Ok(previous);
        }
        self.publish(next);
        Ok(previous)
    }

    /// Replaces the whole content with `objects` at resourceVersion `rv`, rebuilding every
    /// index (client-go `Replace`, after a list or relist). Readers switch from the old content
    /// to the new in one step. When a key occurs twice, the later object wins.
    ///
    /// The store's resourceVersion becomes `rv`, even when lower than before (the list is the
    /// truth after a relist).
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`]: the store is unchanged.
    pub fn replace<I>(&mut self, objects: I, rv: u64) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Arc<Object>>,
    {
        self.sweep();
        let mut next = self.current.empty_like();
        for obj in objects {
            next.upsert(obj)?;
        }
        next.resource_version = rv;
        self.publish(next);
        Ok(())
    }

    /// Advances the resourceVersion without changing objects (a watch BOOKMARK event). A `rv`
    /// at or below the current one changes nothing.
    pub fn bookmark(&mut self, rv: u64) {
        self.sweep();
        if rv <= self.current.resource_version {
            return;
        }
        let mut next = (*self.current).clone();
        next.resource_version = rv;
        self.publish(next);
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
        self.sweep();
        let defs: Vec<IndexDef> = indexers
            .into_iter()
            .map(|(name, func)| IndexDef {
                name: Arc::from(name),
                func,
            })
            .collect();
        if defs.is_empty() {
            return Ok(());
        }
        let mut next = (*self.current).clone();
        next.add_indexes(defs)?;
        self.publish(next);
        Ok(())
    }

    /// Publishes `next` as the current version, then signals waiters.
    fn publish(&mut self, mut next: Version) {
        next.generation = self.current.generation + 1;
        let rv = next.resource_version;
        let next = Arc::new(next);
        // `swap` settles arc-swap's outstanding reader debts on the old version before it
        // returns, so from here on its strong count counts every reader still holding it.
        let old = self.shared.current.swap(next.clone());
        self.current = next;
        self.retire(old);
        // After the store: a waiter woken by this value finds the version published.
        self.rv_tx.send_if_modified(|v| {
            let changed = *v != rv;
            *v = rv;
            changed
        });
    }

    /// Drops `old` here if no reader holds it, else keeps it for a later [`Writer::sweep`].
    fn retire(&mut self, old: Arc<Version>) {
        if Arc::strong_count(&old) > 1 {
            self.retired.push(old);
        }
    }

    /// Drops the retired versions that no reader holds any more.
    fn sweep(&mut self) {
        self.retired.retain(|v| Arc::strong_count(v) > 1);
    }
}
