//! [`PopBatch`]: the keys one pop takes out of the queue, each with its deltas ([`KeyDeltas`]);
//! dropping it completes it.

use std::collections::hash_map::Entry;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::delta::Deltas;
use super::room::GiveBackRoom;
use super::state::Shared;
use crate::object::ObjectKey;

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

/// Keys popped together, each with its deltas; dereferences to `[KeyDeltas]`.
///
/// The batch is *completed* when dropped: the queue then stops overlaying its state on the
/// [`KnownObjects`](super::KnownObjects) (the consumer must have applied it to them by then)
/// and counts its initial items towards [`DeltaFifo::has_synced`](super::DeltaFifo::has_synced).
/// Drop it after applying its deltas, not before. A batch may be sent to another thread.
#[must_use = "dropping a batch completes it: apply its deltas first"]
pub struct PopBatch {
    pub(super) items: Vec<KeyDeltas>,
    pub(super) shared: Arc<Shared>,
    pub(super) id: u64,
    /// How many of `items` belong to the first `replace`.
    pub(super) initial: usize,
    /// The queue keeps an in-flight entry per key of this batch (it has known objects).
    pub(super) tracked: bool,
    pub(super) list_rv: u64,
}

impl PopBatch {
    /// The popped keys with their deltas, in pop order.
    pub fn items(&self) -> &[KeyDeltas] {
        &self.items
    }

    /// The resourceVersion of the newest [`DeltaFifo::replace`](super::DeltaFifo::replace)
    /// queued before this batch was taken (0 before the first list, or when its version is not
    /// a number). Once this batch is applied and the queue is empty, a store fed by the queue
    /// reflects at least this version.
    pub fn list_resource_version(&self) -> u64 {
        self.list_rv
    }

    /// Completes the batch (same as dropping it).
    pub fn complete(self) {}
}

impl Deref for PopBatch {
    type Target = [KeyDeltas];

    fn deref(&self) -> &[KeyDeltas] {
        &self.items
    }
}

impl<'a> IntoIterator for &'a PopBatch {
    type Item = &'a KeyDeltas;
    type IntoIter = std::slice::Iter<'a, KeyDeltas>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl Drop for PopBatch {
    fn drop(&mut self) {
        if self.tracked {
            let mut inner = self.shared.lock();
            for item in &self.items {
                if let Entry::Occupied(e) = inner.in_flight.entry(item.key.clone())
                    && e.get().batch == self.id
                {
                    e.remove();
                }
            }
            inner.in_flight.give_back_room();
        }
        if self.initial > 0 {
            self.shared
                .unsynced
                .fetch_sub(self.initial, Ordering::Release);
        }
    }
}

impl fmt::Debug for PopBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PopBatch")
            .field("id", &self.id)
            .field("initial", &self.initial)
            .field("items", &self.items)
            .finish()
    }
}
