//! Writes, only on a buffer no reader can reach: upserts and deletes with their index
//! maintenance, clearing, index addition; each change logged for the other buffer to replay.
//!
//! Index maintenance follows client-go `tools/cache/thread_safe_store.go` (`updateIndices`,
//! `deleteKeyFromIndex`): on add/update the old object's values are removed and the new
//! object's added (here only the difference between the two is touched), and a value whose
//! last key goes is removed, so that high-cardinality indexes such as by-UID do not leak.

use std::sync::Arc;

use crate::object::{Object, ObjectKey};
use crate::store::batch::Op;
use crate::store::error::StoreError;
use crate::store::index::{Builtin, IndexDef, IndexValues, first, normalize};
use crate::store::slot_set::{NO_POS, Slot, SlotSet};

use super::change::{Change, Log, push_index};
use super::{Entry, ValueMap, Version, key_of};

/// Changes read ahead together by [`Version::warm`] and [`Version::replay`].
pub(crate) const WARM_GROUP: usize = 16;

impl Version {
    /// Number of indexes whose function is the caller's (see [`Version::custom_values`]).
    pub(crate) fn custom_count(&self) -> usize {
        self.defs
            .iter()
            .filter(|d| d.builtin == Builtin::Custom)
            .count()
    }

    /// Appends the values of the caller's index functions for `obj` (normalized, in index
    /// order) to `out`: the only part of a write that can fail, done before anything changes.
    /// The provided functions never fail and are called, when needed at all, while writing.
    pub(crate) fn custom_values(
        &self,
        obj: &Object,
        out: &mut Vec<IndexValues>,
    ) -> Result<(), StoreError> {
        for def in self.defs.iter().filter(|d| d.builtin == Builtin::Custom) {
            out.push(call(def, obj, || obj.key())?);
        }
        Ok(())
    }

    /// Inserts or replaces `obj` under its key and moves its index entries from the old
    /// object's values to the new one's. `custom` holds the values of the caller's index
    /// functions for `obj` (from [`Version::custom_values`]); provided functions are not called
    /// when the fields they read are unchanged. The object's own cached key is used (a new item
    /// shares it: no key allocation). Returns the object it replaced; every change made is
    /// appended to `log`.
    pub(crate) fn upsert(
        &mut self,
        obj: Arc<Object>,
        custom: &[IndexValues],
        log: &mut Log,
    ) -> Option<Arc<Object>> {
        let key = obj.key_ref();
        let hash = key.hash_value();
        let shard = self.shard_of(hash);
        let (slot, old) = match self.shards[shard].find_mut(hash, |e| e.obj.key_ref() == key) {
            Some(entry) => {
                if Arc::ptr_eq(&entry.obj, &obj) {
                    return Some(obj);
                }
                let old = std::mem::replace(&mut entry.obj, obj.clone());
                let slot = entry.slot;
                match self.items.get_mut(slot as usize) {
                    Some(Some(item)) => *item = obj.clone(),
                    _ => unreachable_slot(),
                }
                (slot, Some(old))
            }
            None => {
                let slot = self.insert_item(hash, obj.clone());
                log.push(Change::Insert {
                    hash,
                    slot,
                    obj: obj.clone(),
                });
                (slot, None)
            }
        };
        let mut custom = custom.iter();
        // The definitions are read in place (no reference count taken per write); a function
        // is cloned out only when it must be called.
        for pos in 0..self.defs.len() {
            let builtin = self.defs[pos].builtin;
            if builtin == Builtin::Custom {
                let Some(new) = custom.next() else { continue };
                match &old {
                    None => {
                        for v in new {
                            self.index_add(pos, v, slot, log);
                        }
                    }
                    Some(old) => match (self.defs[pos].func.clone())(old) {
                        Ok(old_values) => {
                            self.apply_diff(pos, slot, &normalize(old_values), new, log)
                        }
                        Err(_) => {
                            // The function accepted this object when it was stored; it is
                            // not pure. Find the item's old values the slow way.
                            self.index_remove_everywhere(pos, slot, log);
                            for v in new {
                                self.index_add(pos, v, slot, log);
                            }
                        }
                    },
                }
                continue;
            }
            match &old {
                Some(old) if builtin.same_values(old, &obj) => {}
                Some(old) => {
                    let func = self.defs[pos].func.clone();
                    let old_values = normalize(func(old).unwrap_or_default());
                    let new_values = normalize(func(&obj).unwrap_or_default());
                    self.apply_diff(pos, slot, &old_values, &new_values, log);
                }
                None if builtin == Builtin::Namespace => {
                    self.index_add(pos, obj.namespace(), slot, log);
                }
                None => {
                    let func = self.defs[pos].func.clone();
                    for v in &normalize(func(&obj).unwrap_or_default()) {
                        self.index_add(pos, v, slot, log);
                    }
                }
            }
        }
        if old.is_some() {
            log.push(Change::Put { hash, slot, obj });
        }
        old
    }

    /// Removes the object under `key` and its index entries, appending the changes to `log`.
    /// Never fails: when an index function fails on the stored object, its entries are found
    /// by scanning that index.
    pub(crate) fn delete(&mut self, key: &ObjectKey, log: &mut Log) -> Option<Arc<Object>> {
        let hash = key.hash_value();
        let (slot, old) = self.find(key).map(|e| (e.slot, e.obj.clone()))?;
        let defs = self.defs.clone();
        for (pos, def) in defs.iter().enumerate() {
            if def.builtin == Builtin::Namespace {
                self.index_remove(pos, old.namespace(), slot, log);
                continue;
            }
            match (def.func)(&old) {
                Ok(values) => {
                    for v in &values {
                        self.index_remove(pos, v, slot, log);
                    }
                }
                Err(_) => self.index_remove_everywhere(pos, slot, log),
            }
        }
        self.remove_item(hash, slot);
        log.push(Change::Remove { hash, slot });
        Some(old)
    }

    /// Reads ahead, for a group of upcoming changes (at most [`WARM_GROUP`]), what their
    /// writes will read: each key's table entry, the stored object and its key's text, its slab
    /// entry, and the fields the provided indexes compare in the old and the new object. In a
    /// large store each of these is a cache miss, and within one write each waits for the one
    /// before; taken step by step for the whole group, the misses of one step are independent
    /// and overlap. Only reads: the writes that follow find everything in cache.
    pub(crate) fn warm(&self, ops: &[Op]) {
        let ops = &ops[..ops.len().min(WARM_GROUP)];
        let mut found: [Option<&Entry>; WARM_GROUP] = [None; WARM_GROUP];
        for (f, op) in found.iter_mut().zip(ops) {
            let h = match op {
                Op::Upsert(obj) => obj.key_ref().hash_value(),
                Op::Delete(key) => key.hash_value(),
            };
            // The first entry whose tag matches: the object itself, almost always.
            *f = self.shards[self.shard_of(h)].find(h, |_| true);
        }
        let mut sink = 0usize;
        for (op, entry) in ops.iter().zip(&found) {
            if let Some(entry) = entry {
                sink ^= first(entry.obj.key_ref().as_str());
                sink ^= usize::from(self.item(entry.slot).is_some());
                for def in self.defs.iter() {
                    sink ^= def.builtin.touch(&entry.obj);
                }
            }
            if let Op::Upsert(obj) = op {
                for def in self.defs.iter() {
                    sink ^= def.builtin.touch(obj);
                }
            }
        }
        std::hint::black_box(sink);
    }

    /// Removes every item and index entry, keeping the tables' and the slab's capacity.
    pub(crate) fn clear(&mut self) {
        for t in self.shards.iter_mut() {
            t.clear();
        }
        self.items.clear();
        self.free.clear();
        for m in self.indexes.iter_mut() {
            *m = ValueMap::with_hasher(self.hasher.clone());
        }
        self.set_positions.clear();
        self.len = 0;
    }

    /// Attaches indexes built by [`Version::build_indexes`] (on a buffer in the same state as
    /// the one that built them: the slots must match).
    pub(crate) fn attach_indexes(&mut self, new: Vec<IndexDef>, maps: Vec<ValueMapBox>) {
        let mut defs = self.defs.to_vec();
        defs.extend(new);
        self.defs = defs.into();
        let mut indexes = std::mem::take(&mut self.indexes).into_vec();
        indexes.extend(maps.into_iter().map(|m| m.0));
        self.indexes = indexes.into();
    }

    /// Stores a new object (its key absent) in a free slot and maps its key to it.
    pub(super) fn insert_item(&mut self, hash: u64, obj: Arc<Object>) -> Slot {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                // A slot is a u32: a store holds at most 2^32 - 1 objects (each object
                // costs kilobytes, so memory runs out long before).
                let slot = Slot::try_from(self.items.len()).unwrap_or(Slot::MAX);
                self.push_vacant();
                slot
            }
        };
        self.place(hash, slot, obj);
        slot
    }

    /// Adds one vacant slot at the end of the slab. The slab grows by an eighth, not by
    /// doubling: it keeps room for the most objects the store held (see `items`), and a
    /// doubled slab held up to twice that, 8 bytes a slot in each buffer (a store filled with
    /// 100 000 objects kept 131 072 slots). Both buffers grow alike (replay calls this too).
    pub(super) fn push_vacant(&mut self) {
        if self.items.len() == self.items.capacity() {
            self.items.reserve_exact((self.items.len() / 8).max(16));
        }
        self.items.push(None);
    }

    /// Fills the vacant, claimed `slot` with `obj` and maps its key (text hashing to `hash`).
    pub(super) fn place(&mut self, hash: u64, slot: Slot, obj: Arc<Object>) {
        let shard = self.shard_of(hash);
        if let Some(entry) = self.items.get_mut(slot as usize) {
            *entry = Some(obj.clone());
        }
        self.shards[shard]
            .insert_unique(hash, Entry { obj, slot }, |e| e.obj.key_ref().hash_value());
        self.len += 1;
    }

    /// Unmaps the key of the item in `slot` (hashing to `hash`) and frees the slot. When the
    /// store becomes empty the slab is released (a store emptied by deletes gives its memory
    /// back).
    pub(super) fn remove_item(&mut self, hash: u64, slot: Slot) {
        let shard = self.shard_of(hash);
        if let Ok(entry) = self.shards[shard].find_entry(hash, |e| e.slot == slot) {
            entry.remove();
        }
        if let Some(entry) = self.items.get_mut(slot as usize)
            && entry.take().is_some()
        {
            self.len -= 1;
            self.free.push(slot);
        }
        if self.len == 0 {
            self.items = Vec::new();
            self.free = Vec::new();
        }
    }

    fn index_add(&mut self, pos: usize, value: &str, slot: Slot, log: &mut Log) {
        let items = &self.items;
        let Some(key) = key_of(items, slot) else {
            return;
        };
        let map = &mut self.indexes[pos];
        let change = match map.get_key_value_mut(value) {
            Some((v, set)) => {
                set.insert(slot, key, |s| key_of(items, s));
                Change::set_or(pos, v, set, || Change::IndexAdd {
                    index: pos,
                    value: v.clone(),
                    slot,
                })
            }
            None => {
                let v: Arc<str> = Arc::from(value);
                map.insert_new(v.clone(), SlotSet::One(slot));
                Change::IndexAdd {
                    index: pos,
                    value: v,
                    slot,
                }
            }
        };
        push_index(log, &mut self.set_positions, change);
    }

    fn index_remove(&mut self, pos: usize, value: &str, slot: Slot, log: &mut Log) {
        let items = &self.items;
        let Some(key) = key_of(items, slot) else {
            return;
        };
        let map = &mut self.indexes[pos];
        let Some((v, set)) = map.get_key_value_mut(value) else {
            return;
        };
        if !set.contains(slot, key, |s| key_of(items, s)) {
            return;
        }
        let (at, empty) = set.remove(slot, key, NO_POS, |s| key_of(items, s));
        let change = if empty {
            let Some((value, _)) = map.remove(value) else {
                return;
            };
            Change::IndexRemove {
                index: pos,
                value,
                slot,
                pos: at,
            }
        } else {
            Change::set_or(pos, v, set, || Change::IndexRemove {
                index: pos,
                value: v.clone(),
                slot,
                pos: at,
            })
        };
        push_index(log, &mut self.set_positions, change);
    }

    fn index_remove_everywhere(&mut self, pos: usize, slot: Slot, log: &mut Log) {
        let items = &self.items;
        let Some(key) = key_of(items, slot) else {
            return;
        };
        let values: Vec<Arc<str>> = self.indexes[pos]
            .iter()
            .filter(|(_, set)| set.contains(slot, key, |s| key_of(items, s)))
            .map(|(v, _)| v.clone())
            .collect();
        for v in values {
            self.index_remove(pos, &v, slot, log);
        }
    }

    /// Moves `slot` from the values only in `old` to the values only in `new` (both sorted and
    /// deduplicated); values in both are not touched.
    fn apply_diff(
        &mut self,
        pos: usize,
        slot: Slot,
        old: &[String],
        new: &[String],
        log: &mut Log,
    ) {
        let (mut i, mut j) = (0, 0);
        loop {
            match (old.get(i), new.get(j)) {
                (None, None) => break,
                (Some(o), Some(n)) if o == n => {
                    i += 1;
                    j += 1;
                }
                (Some(o), Some(n)) if o < n => {
                    self.index_remove(pos, o, slot, log);
                    i += 1;
                }
                (Some(o), None) => {
                    self.index_remove(pos, o, slot, log);
                    i += 1;
                }
                (_, Some(n)) => {
                    self.index_add(pos, n, slot, log);
                    j += 1;
                }
            }
        }
    }
}

/// A slot found in a key table is always occupied; this marks the branch that would mean
/// otherwise (a bug), which is handled as "not found" in release builds.
fn unreachable_slot() {
    debug_assert!(false, "a key table names a vacant slot");
}

/// An index map built off to the side by [`Version::build_indexes`] (keeps the map type
/// private to the version module).
#[derive(Debug)]
pub(crate) struct ValueMapBox(pub(super) ValueMap);

/// Calls an index function, normalizing its values and wrapping its error.
pub(super) fn call(
    def: &IndexDef,
    obj: &Object,
    key: impl FnOnce() -> ObjectKey,
) -> Result<IndexValues, StoreError> {
    (def.func)(obj)
        .map(normalize)
        .map_err(|source| StoreError::IndexFunc {
            index: def.name.clone(),
            key: key(),
            source,
        })
}
