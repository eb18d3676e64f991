//! [`Change`]: one logged step of a write, replayed on the other buffer.

use std::sync::Arc;

use crate::object::Object;
use crate::store::slot_set::Slot;

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
    /// Add slot `slot` under `value` in index number `index`; in the recording buffer it went
    /// to position `pos` of a set of `len` members (`pos` = [`NO_POS`](crate::store::slot_set::NO_POS) when unknown).
    IndexAdd {
        index: usize,
        value: Arc<str>,
        slot: Slot,
        pos: u32,
        len: u32,
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
