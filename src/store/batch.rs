//! [`WriteBatch`]: the changes one [`Writer::apply`](super::Writer::apply) call makes, as
//! [`Op`]s.

use std::sync::Arc;

use crate::object::{Object, ObjectKey};

/// One change in a [`WriteBatch`].
#[derive(Clone, Debug)]
pub enum Op {
    /// Add or update (the same thing, as in client-go): store the object under its key.
    Upsert(Arc<Object>),
    /// Remove whatever is stored under the key (nothing when absent).
    Delete(ObjectKey),
}

/// Changes applied together by [`Writer::apply`](super::Writer::apply): readers see all of them or none.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use bytes::Bytes;
/// use informer::object::{Encoding, GroupVersionKind, Object, ObjectKey, ObjectMetaFields};
/// use informer::store::{WriteBatch, StoreConfig, store};
///
/// let pod = |name: &str| {
///     let meta = ObjectMetaFields { name: name.into(), namespace: "default".into(), ..Default::default() };
///     let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
///     Arc::new(Object::from_parts(gvk, meta.into(), Bytes::new(), Encoding::Protobuf))
/// };
/// let (reader, mut writer) = store(StoreConfig::default());
///
/// let mut batch = WriteBatch::with_capacity(2);
/// batch.add(pod("a")).add(pod("b"));
/// batch.set_resource_version(1234);
/// writer.apply(batch)?;
///
/// let mut batch = WriteBatch::new();
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
pub struct WriteBatch {
    pub(super) ops: Vec<Op>,
    pub(super) resource_version: Option<u64>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// An empty batch with room for `n` changes.
    pub fn with_capacity(n: usize) -> Self {
        WriteBatch {
            ops: Vec::with_capacity(n),
            resource_version: None,
        }
    }

    /// Stores `obj` under its key (client-go `Add`).
    pub fn add(&mut self, obj: Arc<Object>) -> &mut Self {
        self.ops.push(Op::Upsert(obj));
        self
    }

    /// Stores `obj` under its key (client-go `Update`; identical to [`WriteBatch::add`]).
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

    /// [`WriteBatch::set_resource_version`], by value.
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

impl FromIterator<Op> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = Op>>(iter: I) -> Self {
        WriteBatch {
            ops: iter.into_iter().collect(),
            resource_version: None,
        }
    }
}

impl Extend<Op> for WriteBatch {
    fn extend<I: IntoIterator<Item = Op>>(&mut self, iter: I) {
        self.ops.extend(iter);
    }
}
