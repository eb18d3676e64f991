//! [`Delta`], [`DeltaType`], [`Deltas`] and the tombstone [`DeletedFinalStateUnknown`]
//! (client-go `tools/cache/delta_fifo.go`: `Delta`, `Deltas`, `DeletedFinalStateUnknown`).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::object::{Object, ObjectKey};

/// What happened to an object (client-go `DeltaType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED` event).
    Added,
    /// The object changed (a watch `MODIFIED` event).
    Updated,
    /// The object was deleted: a watch `DELETED` event, or a deletion detected by
    /// [`DeltaFifo::replace`](super::DeltaFifo::replace) (then with a tombstone).
    Deleted,
    /// The object was listed by a (re)list ([`DeltaFifo::replace`](super::DeltaFifo::replace)).
    Replaced,
    /// A periodic resync of an object already known
    /// ([`DeltaFifo::resync`](super::DeltaFifo::resync)).
    Sync,
}

/// A deletion whose final state is unknown: the object vanished while the watch was down and a
/// relist no longer lists it (client-go `DeletedFinalStateUnknown`). `obj` is the last state the
/// queue or the store knew, which may be stale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedFinalStateUnknown {
    /// Key of the deleted object.
    pub key: ObjectKey,
    /// Last known state of the object (the newest queued delta's object, else the store's).
    pub obj: Arc<Object>,
}

/// The object carried by a [`Delta`]: the object itself, or (for some deletions) a tombstone.
#[derive(Clone, PartialEq, Eq)]
pub enum DeltaObject {
    /// The object as the API server sent it (after the transform) or as the store holds it.
    Object(Arc<Object>),
    /// A deletion detected by a relist; see [`DeletedFinalStateUnknown`].
    ///
    /// Behind an `Arc`: tombstones are rare, and a 16-byte `DeltaObject` keeps a [`Delta`]
    /// 24 bytes and a [`Notification`](crate::distributor::Notification) 24 bytes (with the
    /// tombstone inline, 40 and 40). A relist queues one delta per listed key: for 100 000
    /// keys the DeltaFIFO's map of queued keys was 16 MB with 40-byte deltas.
    Tombstone(Arc<DeletedFinalStateUnknown>),
}

impl DeltaObject {
    /// The object's key (the tombstone's key for a tombstone).
    pub fn key(&self) -> ObjectKey {
        match self {
            DeltaObject::Object(obj) => obj.key(),
            DeltaObject::Tombstone(t) => t.key.clone(),
        }
    }

    /// The object, or for a tombstone the last known state it carries.
    pub fn object(&self) -> &Arc<Object> {
        match self {
            DeltaObject::Object(obj) => obj,
            DeltaObject::Tombstone(t) => &t.obj,
        }
    }

    /// `true` for a [`DeltaObject::Tombstone`].
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeltaObject::Tombstone(_))
    }
}

impl fmt::Debug for DeltaObject {
    // Objects can be large: show the key and resourceVersion, not the bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeltaObject::Object(obj) => f
                .debug_tuple("Object")
                .field(&obj.key())
                .field(&obj.resource_version())
                .finish(),
            DeltaObject::Tombstone(t) => f
                .debug_tuple("Tombstone")
                .field(&t.key)
                .field(&t.obj.resource_version())
                .finish(),
        }
    }
}

impl From<Arc<Object>> for DeltaObject {
    fn from(obj: Arc<Object>) -> Self {
        DeltaObject::Object(obj)
    }
}

impl From<DeletedFinalStateUnknown> for DeltaObject {
    fn from(t: DeletedFinalStateUnknown) -> Self {
        DeltaObject::Tombstone(Arc::new(t))
    }
}

/// One change to one object (client-go `Delta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change (for [`DeltaType::Deleted`]: its final or last known state).
    pub object: DeltaObject,
}

impl Delta {
    /// Builds a delta carrying a plain object.
    pub fn new(kind: DeltaType, obj: Arc<Object>) -> Self {
        Delta {
            kind,
            object: DeltaObject::Object(obj),
        }
    }
}

/// The deltas queued for one key, oldest first (client-go `Deltas`). Never empty when handed
/// out by the queue. Dereferences to `[Delta]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Deltas(SmallVec<[Delta; 1]>);

impl Deltas {
    /// The oldest delta, `None` when empty.
    pub fn oldest(&self) -> Option<&Delta> {
        self.0.first()
    }

    /// The newest delta, `None` when empty.
    pub fn newest(&self) -> Option<&Delta> {
        self.0.last()
    }

    /// Appends `delta`, then collapses the two newest deltas if both are deletions (client-go
    /// `dedupDeltas`/`isDeletionDup`): the older one is kept unless it is a tombstone, in which
    /// case the newer one is kept. No other pair is ever collapsed.
    pub(crate) fn push(&mut self, delta: Delta) {
        self.0.push(delta);
        let n = self.0.len();
        if n >= 2
            && self.0[n - 1].kind == DeltaType::Deleted
            && self.0[n - 2].kind == DeltaType::Deleted
        {
            let newer = self.0.pop().expect("n >= 2");
            if self.0[n - 2].object.is_tombstone() {
                self.0[n - 2] = newer;
            }
        }
    }

    /// Moves the deltas into a `Vec`.
    pub fn into_vec(self) -> Vec<Delta> {
        self.0.into_vec()
    }
}

impl Deref for Deltas {
    type Target = [Delta];

    fn deref(&self) -> &[Delta] {
        &self.0
    }
}

impl fmt::Debug for Deltas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl FromIterator<Delta> for Deltas {
    fn from_iter<I: IntoIterator<Item = Delta>>(iter: I) -> Self {
        let mut out = Deltas::default();
        for d in iter {
            out.push(d);
        }
        out
    }
}

impl IntoIterator for Deltas {
    type Item = Delta;
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        IntoIter(self.0.into_iter())
    }
}

/// Owning iterator over [`Deltas`], oldest first.
#[derive(Debug)]
pub struct IntoIter(smallvec::IntoIter<[Delta; 1]>);

impl Iterator for IntoIter {
    type Item = Delta;

    fn next(&mut self) -> Option<Delta> {
        self.0.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for IntoIter {}

impl<'a> IntoIterator for &'a Deltas {
    type Item = &'a Delta;
    type IntoIter = std::slice::Iter<'a, Delta>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
