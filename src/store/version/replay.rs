//! Replay: bringing a buffer to the other's state from the log of changes recorded there.

use std::sync::Arc;

use crate::store::slot_set::{Slot, SlotSet};

use super::change::{Change, Log};
use super::write::WARM_GROUP;
use super::{Version, key_of};

impl Version {
    /// Applies (and empties) changes recorded on the other buffer, which was in the same state
    /// as this one. Changes are taken in groups of [`WARM_GROUP`]: the table and slab entries
    /// of a group's updates and the reference counts of the objects they replace (dropped here)
    /// are read for the whole group first, so that their cache misses overlap.
    pub(crate) fn replay(&mut self, log: &mut Log) {
        let mut changes = log.drain(..);
        while changes.len() > 0 {
            let mut sink = 0usize;
            for change in changes.as_slice().iter().take(WARM_GROUP) {
                if let Change::Put { hash, slot, .. } = change {
                    let shard = self.shard_of(*hash);
                    if let Some(e) = self.shards[shard].find(*hash, |e| e.slot == *slot) {
                        sink ^= Arc::strong_count(&e.obj);
                    }
                    sink ^= usize::from(self.item(*slot).is_some());
                }
            }
            std::hint::black_box(sink);
            for change in changes.by_ref().take(WARM_GROUP) {
                self.replay_one(change);
            }
        }
    }

    /// Applies one change recorded on the other buffer.
    fn replay_one(&mut self, change: Change) {
        match change {
            Change::Put { hash, slot, obj } => {
                let shard = self.shard_of(hash);
                if let Some(e) = self.shards[shard].find_mut(hash, |e| e.slot == slot) {
                    e.obj = obj.clone();
                }
                if let Some(Some(item)) = self.items.get_mut(slot as usize) {
                    *item = obj;
                }
            }
            Change::Insert { hash, slot, obj } => {
                self.claim(slot);
                self.place(hash, slot, obj);
            }
            Change::Remove { hash, slot } => self.remove_item(hash, slot),
            Change::IndexAdd { index, value, slot } => {
                let items = &self.items;
                let Some(key) = key_of(items, slot) else {
                    return;
                };
                let map = &mut self.indexes[index];
                match map.get_mut(&value) {
                    Some(set) => set.insert(slot, key, |s| key_of(items, s)),
                    None => map.insert_new(value, SlotSet::One(slot)),
                }
            }
            Change::IndexSet { index, value, set } => {
                let map = &mut self.indexes[index];
                match map.get_mut(&value) {
                    Some(s) => *s = SlotSet::Few(set),
                    None => map.insert_new(value, SlotSet::Few(set)),
                }
            }
            Change::IndexRemove {
                index,
                value,
                slot,
                pos,
            } => {
                let items = &self.items;
                let Some(key) = key_of(items, slot) else {
                    return;
                };
                let map = &mut self.indexes[index];
                if let Some(set) = map.get_mut(&value)
                    && set.remove(slot, key, pos, |s| key_of(items, s)).1
                {
                    map.remove(&value);
                }
            }
        }
    }

    /// Makes `slot` the slot the next insertion takes, as it was in the recording buffer:
    /// normally the last freed slot or one past the end, as there.
    fn claim(&mut self, slot: Slot) {
        if self.free.last() == Some(&slot) {
            self.free.pop();
        } else if let Some(i) = self.free.iter().rposition(|&s| s == slot) {
            self.free.remove(i);
        } else {
            while self.items.len() <= slot as usize {
                let vacant = self.items.len() as Slot;
                self.push_vacant();
                if vacant != slot {
                    self.free.push(vacant);
                }
            }
        }
    }
}
