//! [`Change`]: one logged step of a write, replayed on the other buffer.

use std::sync::Arc;

use crate::object::Object;
use crate::store::slot_set::{SharedSlots, Slot, SlotSet};

/// One step of a write, recorded while it is applied to one buffer so that the other buffer can
/// replay it exactly, without calling index functions again or comparing keys. Values and
/// objects are the same shared allocations in both buffers; slots are the same numbers.
#[derive(Debug)]
pub(crate) enum Change {
    /// Replace the object in slot `slot`, whose key hashes to `hash` (an update: the key
    /// stays).
    Put {
        hash: u64,
        slot: Slot,
        obj: Arc<Object>,
    },
    /// Store a new object in slot `slot` (vacant, or one past the end) and map its key, whose
    /// text hashes to `hash`, to it.
    Insert {
        hash: u64,
        slot: Slot,
        obj: Arc<Object>,
    },
    /// Remove the item in slot `slot` (whose key hashes to `hash`).
    Remove { hash: u64, slot: Slot },
    /// Add slot `slot` under `value` in index number `index` (a new value, or a chunked set).
    IndexAdd {
        index: usize,
        value: Arc<str>,
        slot: Slot,
    },
    /// Make `set` the set of `value` in index number `index` (present, in another shape or
    /// another array): the recording buffer's own array, so both buffers share it.
    IndexSet {
        index: usize,
        value: Arc<str>,
        set: SharedSlots,
    },
    /// Remove slot `slot` from `value` in index number `index` (it was at position `pos` in
    /// the recording buffer, [`NO_POS`](crate::store::slot_set::NO_POS) when unknown).
    IndexRemove {
        index: usize,
        value: Arc<str>,
        slot: Slot,
        pos: u32,
    },
}

/// The changes one buffer has that the other has not, in order.
pub(crate) type Log = Vec<Change>;

impl Change {
    /// What to log after a change left `set` as the set of `value` in index number `index`:
    /// the set itself when it is a shared array (the other buffer takes it as it is), else
    /// `step`, the change for the other buffer to repeat.
    pub(crate) fn set_or(
        index: usize,
        value: &Arc<str>,
        set: &SlotSet,
        step: impl FnOnce() -> Change,
    ) -> Change {
        match set {
            SlotSet::Few(slots) => Change::IndexSet {
                index,
                value: value.clone(),
                set: slots.clone(),
            },
            _ => step(),
        }
    }
}

/// How far back [`push_index`] looks for an earlier state of the same set.
const COALESCE_WINDOW: usize = 16;

/// Appends an index change to `log`. A set's new state replaces the state logged for it
/// earlier in the window when nothing about that set was logged in between: the other buffer
/// then takes the final array once, and the arrays in between are freed now rather than kept
/// until the replay (a batch that adds 100 Pods to one namespace made 100 of them). Moving a
/// set's state earlier is safe: installing it reads no slab entry or key, and no later change
/// in the log reads that set.
pub(crate) fn push_index(log: &mut Log, change: Change) {
    if let Change::IndexSet { index, value, set } = &change {
        for earlier in log.iter_mut().rev().take(COALESCE_WINDOW) {
            let (i, v) = match earlier {
                Change::IndexSet { index, value, .. }
                | Change::IndexAdd { index, value, .. }
                | Change::IndexRemove { index, value, .. } => (*index, &*value),
                _ => continue,
            };
            if i != *index || !Arc::ptr_eq(v, value) {
                continue;
            }
            if let Change::IndexSet { set: logged, .. } = earlier {
                *logged = set.clone();
                return;
            }
            break;
        }
    }
    log.push(change);
}
