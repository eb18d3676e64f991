//! [`Change`]: one logged step of a write, replayed on the other buffer.

use std::sync::Arc;

use crate::object::Object;
use crate::store::slot_set::{SharedSlots, Slot, SlotSet};

use super::Hasher;

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
    /// Add slot `slot` under `value` in index number `index`, for the other buffer to repeat: a
    /// new value, a chunked set, or an insertion that changed nothing.
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

/// Where in the log each set's state was last logged: (index number, address of the value's
/// shared text) → position. Kept by the buffer that writes; an entry is trusted only when the
/// log still holds that set's state at that position (see [`push_index`]), so entries left
/// from an earlier batch, whose log was replayed and emptied since, are harmless.
pub(crate) type SetPositions = hashbrown::HashMap<(usize, usize), usize, Hasher>;

fn set_key(index: usize, value: &Arc<str>) -> (usize, usize) {
    (index, Arc::as_ptr(value).cast::<u8>() as usize)
}

/// Appends an index change to `log`. A set's new state replaces the state logged for it
/// earlier in the same log when nothing else about that set was logged since: the other buffer
/// then takes the final array once, and the arrays in between are freed now rather than held
/// until the replay (a batch of 40 000 deletes alternating between 200 namespaces held one
/// array per delete, 43 MB; a batch that adds 100 Pods to one namespace, 100 arrays). Moving a
/// set's state earlier is safe: installing it reads no slab entry or key, and no later change
/// in the log reads that set. A change that the other buffer repeats (a new value, a chunked
/// set, a value removed) ends the run: the next state is logged after it.
pub(crate) fn push_index(log: &mut Log, at: &mut SetPositions, change: Change) {
    match &change {
        Change::IndexSet { index, value, set } => {
            let key = set_key(*index, value);
            if let Some(&p) = at.get(&key)
                && let Some(Change::IndexSet {
                    index: i,
                    value: v,
                    set: logged,
                }) = log.get_mut(p)
                && *i == *index
                && Arc::ptr_eq(v, value)
            {
                *logged = set.clone();
                return;
            }
            at.insert(key, log.len());
        }
        Change::IndexAdd { index, value, .. } | Change::IndexRemove { index, value, .. } => {
            at.remove(&set_key(*index, value));
        }
        _ => {}
    }
    log.push(change);
}
