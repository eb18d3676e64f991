//! [`Version`]: one buffer of a store (items in a slab, key → slot tables in shards, every
//! index). A store has two of them
//! (see [`super::writer`]): readers look up in the published one, which nothing mutates while
//! any reader can reach it; the writer mutates the other one in place and records what it did
//! in a [`Log`], so that the first buffer can later be brought to the same state by replaying
//! the log (slab stores and plain map inserts by slot number, no index function called twice).
//!
//! Maintenance of indexes follows client-go `tools/cache/thread_safe_store.go`
//! (`updateIndices`, `deleteKeyFromIndex`): on add/update the old object's values are removed
//! and the new object's values added (here only the difference between the two is touched), and
//! a value whose last key goes is removed.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::object::{Object, ObjectKey};

use super::error::StoreError;
use super::index::{Builtin, IndexDef, IndexValues, NO_POS, Slot, SlotSet, first, normalize};
use super::writer::Op;

/// Hasher of every map of a store; one random seed per store, shared by its buffers.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The key → slot map of one shard; each entry is found by the hash of its key's text (the
/// key itself is in the slab).
type KeyTable = HashTable<Slot>;

/// One index: value → slots of the objects indexed under it (in key order).
type ValueMap = hashbrown::HashMap<Arc<str>, SlotSet, Hasher>;

/// Slots read together by [`Version::get_many`].
const LOOKUP_GROUP: usize = 16;

/// Changes read ahead together by [`Version::warm`] and [`Version::replay`].
pub(crate) const WARM_GROUP: usize = 16;

/// Slices of the hash range that [`shard_map`] assigns to shards (a power of two).
const SHARD_SLOTS: usize = 1024;

/// Above this many shards every shard gets an equal share of the hash range (a slice of
/// [`SHARD_SLOTS`] is then too coarse to weigh them).
const MAX_WEIGHTED_SHARDS: usize = 256;

/// Which shard each slice of the hash range goes to, for `shards` shards (1 <
/// `shards` <= [`MAX_WEIGHTED_SHARDS`]; empty otherwise).
///
/// The shares are unequal on purpose: shard `i` gets a share proportional to `2^(i/shards)`,
/// so shard sizes are spread evenly, on a log scale, over one factor of two. A hash table
/// doubles when it passes 7/8 load, so it sits anywhere between 44 % and 88 % full depending
/// on its size; equal shards all sit at the same point of that cycle (at 1 000 000 objects in
/// 16 shards, all just past a doubling, at 48 %), unequal ones at every point of it at once,
/// which holds the average near 63 % load whatever the store size.
fn shard_map(shards: usize) -> Arc<[u16]> {
    if shards <= 1 || shards > MAX_WEIGHTED_SHARDS {
        return Arc::from([]);
    }
    let weights: Vec<f64> = (0..shards)
        .map(|i| (i as f64 / shards as f64).exp2())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut map = Vec::with_capacity(SHARD_SLOTS);
    let mut upto = 0.0;
    for (i, w) in weights.iter().enumerate() {
        upto += w;
        // Every shard gets at least one slice; the last one takes the rest.
        let end = if i + 1 == shards {
            SHARD_SLOTS
        } else {
            ((upto / total * SHARD_SLOTS as f64).round() as usize)
                .max(map.len() + 1)
                .min(SHARD_SLOTS - (shards - 1 - i))
        };
        map.resize(end, i as u16);
    }
    map.into()
}

/// One stored item: its key and object (the entry of a slab slot).
#[derive(Clone, Debug)]
struct Item {
    key: ObjectKey,
    obj: Arc<Object>,
}

/// One buffer of the store: a complete state at one resourceVersion.
///
/// Items live in a slab (`items`, vacant slots listed in `free`) whose layout both buffers
/// share: an item has the same slot number in both, because both see the same adds and deletes
/// in the same order (the log carries the slot). The shard tables map a key's hash to its slot
/// and change only when a key is added or removed; index entries hold slots. So an update
/// replays as one slab store, and `by_index` reads each member's object straight from its slot.
#[derive(Clone)]
pub(crate) struct Version {
    /// resourceVersion this state reflects (0 = none yet).
    pub(crate) resource_version: u64,
    /// Number of versions published before this one.
    pub(crate) generation: u64,
    len: usize,
    hasher: Hasher,
    /// Shard of each of the [`SHARD_SLOTS`] slices of the hash range (see [`shard_map`]);
    /// shared by both buffers.
    shard_map: Arc<[u16]>,
    /// Key → slot, by the hash of the key's text.
    shards: Box<[KeyTable]>,
    /// The items, by slot; `None` for a vacant slot (listed in `free`).
    items: Vec<Option<Item>>,
    /// Vacant slots, reused last-freed first.
    free: Vec<Slot>,
    pub(crate) defs: Arc<[IndexDef]>,
    /// Parallel to `defs`.
    indexes: Box<[ValueMap]>,
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Version")
            .field("resource_version", &self.resource_version)
            .field("generation", &self.generation)
            .field("len", &self.len)
            .field("shards", &self.shards.len())
            .field("indexes", &self.index_names().collect::<Vec<_>>())
            .finish()
    }
}

/// One step of a write, recorded while it is applied to one buffer so that the other buffer can
/// replay it exactly, without calling index functions again or comparing keys. Values, keys
/// and objects are the same shared allocations in both buffers; slots are the same numbers.
#[derive(Debug)]
pub(crate) enum Change {
    /// Replace the object in slot `slot` (an update: the key stays).
    Put { slot: Slot, obj: Arc<Object> },
    /// Store a new item in slot `slot` (vacant, or one past the end) and map `key`, whose text
    /// hashes to `hash`, to it.
    Insert {
        hash: u64,
        slot: Slot,
        key: ObjectKey,
        obj: Arc<Object>,
    },
    /// Remove the item in slot `slot` (whose key hashes to `hash`).
    Remove { hash: u64, slot: Slot },
    /// Add slot `slot` under `value` in index number `index`; in the recording buffer it went
    /// to position `pos` of a set of `len` members (`pos` = [`NO_POS`] when unknown).
    IndexAdd {
        index: usize,
        value: Arc<str>,
        slot: Slot,
        pos: u32,
        len: u32,
    },
    /// Remove slot `slot` from `value` in index number `index` (it was at position `pos` in
    /// the recording buffer, [`NO_POS`] when unknown).
    IndexRemove {
        index: usize,
        value: Arc<str>,
        slot: Slot,
        pos: u32,
    },
}

/// The changes one buffer has that the other has not, in order.
pub(crate) type Log = Vec<Change>;

/// The key of the item in `slot`, if any (index entries always name an occupied slot).
fn key_of(items: &[Option<Item>], slot: Slot) -> Option<&ObjectKey> {
    items
        .get(slot as usize)
        .and_then(Option::as_ref)
        .map(|i| &i.key)
}

impl Version {
    /// An empty version with `shards` shards (at least one) and the given indexes.
    pub(crate) fn empty(shards: usize, hasher: Hasher, defs: Arc<[IndexDef]>) -> Self {
        let shards = shards.max(1);
        Version {
            resource_version: 0,
            generation: 0,
            len: 0,
            shard_map: shard_map(shards),
            shards: (0..shards).map(|_| KeyTable::new()).collect(),
            items: Vec::new(),
            free: Vec::new(),
            indexes: defs
                .iter()
                .map(|_| ValueMap::with_hasher(hasher.clone()))
                .collect(),
            hasher,
            defs,
        }
    }

    /// An empty version with the same shards, hasher and indexes as `self`.
    pub(crate) fn empty_like(&self) -> Self {
        let mut v = Version::empty(self.shards.len(), self.hasher.clone(), self.defs.clone());
        v.shard_map = self.shard_map.clone();
        v
    }

    // ---- reads ------------------------------------------------------------------------------

    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Shard of a key hash: bits 47..57 pick one of [`SHARD_SLOTS`] slices of the hash range,
    /// mapped to shards by [`shard_map`] (unequal shares, see there); above
    /// [`MAX_WEIGHTED_SHARDS`] shards, bits 25..57 scaled to the shard count (equal shares).
    /// The tables use the low bits (bucket) and the top 7 bits (tag) of the same hash, so the
    /// shard choice leaves both uniformly spread within a shard.
    fn shard_of(&self, hash: u64) -> usize {
        let n = self.shards.len();
        if n == 1 {
            return 0;
        }
        if let Some(&s) = self
            .shard_map
            .get(((hash >> 47) as usize) & (SHARD_SLOTS - 1))
        {
            return usize::from(s);
        }
        ((((hash >> 25) & 0xFFFF_FFFF) * n as u64) >> 32) as usize
    }

    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The item in `slot`, if occupied.
    fn item(&self, slot: Slot) -> Option<&Item> {
        self.items.get(slot as usize).and_then(Option::as_ref)
    }

    /// Slot of the item whose key text is `key`.
    fn find(&self, hash: u64, key: &str) -> Option<Slot> {
        let items = &self.items;
        self.shards[self.shard_of(hash)]
            .find(hash, |&s| {
                key_of(items, s).is_some_and(|k| k.as_str() == key)
            })
            .copied()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Arc<Object>> {
        let slot = self.find(self.hash(key), key)?;
        self.item(slot).map(|i| &i.obj)
    }

    /// Every item, in slot order (no order promised).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Object>)> + '_ {
        self.items.iter().flatten().map(|i| (&i.key, &i.obj))
    }

    pub(crate) fn index_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.defs.iter().map(|d| &*d.name)
    }

    fn index_pos(&self, name: &str) -> Result<usize, StoreError> {
        self.defs
            .iter()
            .position(|d| &*d.name == name)
            .ok_or_else(|| StoreError::UnknownIndex {
                name: name.to_owned(),
            })
    }

    /// Keys under `value` of index `name`, ascending (empty iterator when none).
    pub(crate) fn index_key_iter(
        &self,
        name: &str,
        value: &str,
    ) -> Result<impl Iterator<Item = &ObjectKey> + '_, StoreError> {
        let pos = self.index_pos(name)?;
        Ok(self.indexes[pos]
            .get(value)
            .into_iter()
            .flat_map(|set| set.iter())
            .filter_map(|s| self.item(s).map(|i| &i.key)))
    }

    pub(crate) fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<Object>>, StoreError> {
        let pos = self.index_pos(name)?;
        let Some(set) = self.indexes[pos].get(value) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(set.len());
        self.get_many(set.iter(), &mut out);
        Ok(out)
    }

    /// Appends the objects in `slots` (in their order; vacant slots are skipped) to `out`.
    /// Arranged for a large store, where every slab entry and object is a cache miss: slots are
    /// taken in groups of [`LOOKUP_GROUP`], and each step (load every slab entry, read every
    /// object's reference count, clone every `Arc`) is done for the whole group before the
    /// next, so the misses of one step, independent of each other, overlap instead of waiting
    /// one after the other. The clones come last because an atomic increment stops later loads
    /// from overtaking it. No key is read and nothing is hashed.
    fn get_many(&self, slots: impl Iterator<Item = Slot>, out: &mut Vec<Arc<Object>>) {
        let mut slots = slots.peekable();
        let mut found: [Option<&Arc<Object>>; LOOKUP_GROUP] = [None; LOOKUP_GROUP];
        while slots.peek().is_some() {
            let mut n = 0;
            for (f, slot) in found.iter_mut().zip(slots.by_ref()) {
                *f = self.item(slot).map(|i| &i.obj);
                n += 1;
            }
            let mut counts = 0;
            for obj in found[..n].iter().flatten() {
                counts += Arc::strong_count(obj);
            }
            std::hint::black_box(counts);
            out.extend(found[..n].iter().flatten().map(|&obj| obj.clone()));
        }
    }

    pub(crate) fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        Ok(self.index_key_iter(name, value)?.cloned().collect())
    }

    pub(crate) fn index_values(&self, name: &str) -> Result<Vec<Arc<str>>, StoreError> {
        let pos = self.index_pos(name)?;
        let mut values: Vec<Arc<str>> = self.indexes[pos].keys().cloned().collect();
        values.sort_unstable();
        Ok(values)
    }

    /// Objects sharing at least one value of index `name` with `obj` (client-go `Index`),
    /// sorted by key, each once.
    pub(crate) fn index(&self, name: &str, obj: &Object) -> Result<Vec<Arc<Object>>, StoreError> {
        let pos = self.index_pos(name)?;
        let def = &self.defs[pos];
        let values = (def.func)(obj).map_err(|source| StoreError::IndexFunc {
            index: def.name.clone(),
            key: obj.key(),
            source,
        })?;
        let values = normalize(values);
        let map = &self.indexes[pos];
        let mut slots: Vec<Slot> = values
            .iter()
            .filter_map(|v| map.get(v.as_str()))
            .flat_map(|set| set.iter())
            .collect();
        if values.len() > 1 {
            slots.sort_unstable_by(|&a, &b| key_of(&self.items, a).cmp(&key_of(&self.items, b)));
            slots.dedup();
        }
        let mut out = Vec::with_capacity(slots.len());
        self.get_many(slots.into_iter(), &mut out);
        Ok(out)
    }

    // ---- writes (only on a buffer no reader can reach) ---------------------------------------

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
        let hash = self.hash(obj.key_ref().as_str());
        let (slot, old) = match self.find(hash, obj.key_ref().as_str()) {
            Some(slot) => {
                let Some(Some(item)) = self.items.get_mut(slot as usize) else {
                    unreachable_slot();
                    return None;
                };
                let old = std::mem::replace(&mut item.obj, obj.clone());
                if Arc::ptr_eq(&old, &obj) {
                    return Some(obj);
                }
                (slot, Some(old))
            }
            None => {
                let key = obj.key();
                let slot = self.insert_item(hash, key.clone(), obj.clone());
                log.push(Change::Insert {
                    hash,
                    slot,
                    key,
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
            log.push(Change::Put { slot, obj });
        }
        old
    }

    /// Removes the object under `key` and its index entries, appending the changes to `log`.
    /// Never fails: when an index function fails on the stored object, its entries are found
    /// by scanning that index.
    pub(crate) fn delete(&mut self, key: &str, log: &mut Log) -> Option<Arc<Object>> {
        let hash = self.hash(key);
        let slot = self.find(hash, key)?;
        let old = self.item(slot)?.obj.clone();
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
    /// writes will read: each key's text, its table entry, its slab entry and stored key, and
    /// the fields the provided indexes compare in the old and the new object. In a large store
    /// each of these is a cache miss, and within one write each waits for the one before;
    /// taken step by step for the whole group, the misses of one step are independent and
    /// overlap. Only reads: the writes that follow find everything in cache.
    pub(crate) fn warm(&self, ops: &[Op]) {
        let ops = &ops[..ops.len().min(WARM_GROUP)];
        let mut hashes = [0u64; WARM_GROUP];
        for (h, op) in hashes.iter_mut().zip(ops) {
            *h = self.hash(match op {
                Op::Upsert(obj) => obj.key_ref().as_str(),
                Op::Delete(key) => key.as_str(),
            });
        }
        let mut slots = [Slot::MAX; WARM_GROUP];
        for (slot, &h) in slots.iter_mut().zip(&hashes).take(ops.len()) {
            // The first entry whose tag matches: the item itself, almost always.
            if let Some(&s) = self.shards[self.shard_of(h)].find(h, |_| true) {
                *slot = s;
            }
        }
        let mut sink = 0usize;
        for (op, &slot) in ops.iter().zip(&slots) {
            if let Some(item) = self.item(slot) {
                sink ^= first(item.key.as_str());
                for def in self.defs.iter() {
                    sink ^= def.builtin.touch(&item.obj);
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

    /// Applies (and empties) changes recorded on the other buffer, which was in the same state
    /// as this one. Changes are taken in groups of [`WARM_GROUP`]: the slab entries of a
    /// group's updates and the reference counts of the objects they replace (dropped here) are
    /// read for the whole group first, so that their cache misses overlap.
    pub(crate) fn replay(&mut self, log: &mut Log) {
        let mut changes = log.drain(..);
        while changes.len() > 0 {
            let mut sink = 0usize;
            for change in changes.as_slice().iter().take(WARM_GROUP) {
                if let Change::Put { slot, .. } = change
                    && let Some(item) = self.item(*slot)
                {
                    sink ^= Arc::strong_count(&item.obj);
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
            Change::Put { slot, obj } => {
                if let Some(Some(item)) = self.items.get_mut(slot as usize) {
                    item.obj = obj;
                }
            }
            Change::Insert {
                hash,
                slot,
                key,
                obj,
            } => {
                self.claim(slot);
                self.place(hash, slot, key, obj);
            }
            Change::Remove { hash, slot } => self.remove_item(hash, slot),
            Change::IndexAdd {
                index,
                value,
                slot,
                pos,
                len,
            } => {
                let items = &self.items;
                let Some(key) = key_of(items, slot) else {
                    return;
                };
                let map = &mut self.indexes[index];
                match map.get_mut(&*value) {
                    Some(set) => {
                        let hint = (pos != NO_POS).then_some((pos, len));
                        set.insert(slot, key, hint, |s| key_of(items, s));
                    }
                    None => {
                        map.insert(value, SlotSet::One(slot));
                    }
                }
            }
            Change::IndexRemove {
                index,
                value,
                slot,
                pos,
            } => {
                let Some(key) = key_of(&self.items, slot) else {
                    return;
                };
                let map = &mut self.indexes[index];
                if let Some(set) = map.get_mut(&*value)
                    && set.remove(slot, key, pos).1
                {
                    map.remove(&*value);
                }
            }
        }
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
        self.len = 0;
    }

    /// Builds the maps of new indexes over the current items, without changing `self`.
    pub(crate) fn build_indexes(&self, new: &[IndexDef]) -> Result<Vec<ValueMapBox>, StoreError> {
        for d in new {
            if self.index_pos(&d.name).is_ok()
                || new.iter().filter(|o| o.name == d.name).count() > 1
            {
                return Err(StoreError::IndexExists {
                    name: d.name.to_string(),
                });
            }
        }
        let items = &self.items;
        let mut maps = Vec::with_capacity(new.len());
        for def in new {
            let mut map = ValueMap::with_hasher(self.hasher.clone());
            for (slot, item) in items.iter().enumerate() {
                let Some(item) = item else { continue };
                let slot = slot as Slot;
                for v in &call(def, &item.obj, || item.key.clone())? {
                    match map.get_mut(v.as_str()) {
                        Some(set) => {
                            set.insert(slot, &item.key, None, |s| key_of(items, s));
                        }
                        None => {
                            map.insert(Arc::from(v.as_str()), SlotSet::One(slot));
                        }
                    }
                }
            }
            maps.push(ValueMapBox(map));
        }
        Ok(maps)
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

    /// Stores a new item (its key absent) in a free slot and maps its key to it.
    fn insert_item(&mut self, hash: u64, key: ObjectKey, obj: Arc<Object>) -> Slot {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                // A slot is a u32: a store holds at most 2^32 - 1 objects (each object
                // costs kilobytes, so memory runs out long before).
                let slot = Slot::try_from(self.items.len()).unwrap_or(Slot::MAX);
                self.items.push(None);
                slot
            }
        };
        self.place(hash, slot, key, obj);
        slot
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
                self.items.push(None);
                if vacant != slot {
                    self.free.push(vacant);
                }
            }
        }
    }

    /// Fills the vacant, claimed `slot` and maps `key` (text hashing to `hash`) to it.
    fn place(&mut self, hash: u64, slot: Slot, key: ObjectKey, obj: Arc<Object>) {
        let shard = self.shard_of(hash);
        if let Some(entry) = self.items.get_mut(slot as usize) {
            *entry = Some(Item { key, obj });
        }
        let (items, hasher) = (&self.items, &self.hasher);
        self.shards[shard].insert_unique(hash, slot, |&s| {
            key_of(items, s).map_or(0, |k| hasher.hash_one(k.as_str()))
        });
        self.len += 1;
    }

    /// Unmaps the key of the item in `slot` (hashing to `hash`) and frees the slot. When the
    /// store becomes empty the slab is released (a store emptied by deletes gives its memory
    /// back).
    fn remove_item(&mut self, hash: u64, slot: Slot) {
        let shard = self.shard_of(hash);
        if let Ok(entry) = self.shards[shard].find_entry(hash, |&s| s == slot) {
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
        let (value, at, len) = match map.get_key_value_mut(value) {
            Some((v, set)) => {
                let (at, len) = set.insert(slot, key, None, |s| key_of(items, s));
                (v.clone(), at, len)
            }
            None => {
                let v: Arc<str> = Arc::from(value);
                map.insert(v.clone(), SlotSet::One(slot));
                (v, NO_POS, 0)
            }
        };
        log.push(Change::IndexAdd {
            index: pos,
            value,
            slot,
            pos: at,
            len,
        });
    }

    fn index_remove(&mut self, pos: usize, value: &str, slot: Slot, log: &mut Log) {
        let Some(key) = key_of(&self.items, slot) else {
            return;
        };
        let map = &mut self.indexes[pos];
        let Some((v, set)) = map.get_key_value_mut(value) else {
            return;
        };
        if !set.contains(slot, key) {
            return;
        }
        let (at, empty) = set.remove(slot, key, NO_POS);
        let value = if empty {
            map.remove_entry(value).map(|(v, _)| v)
        } else {
            Some(v.clone())
        };
        if let Some(value) = value {
            log.push(Change::IndexRemove {
                index: pos,
                value,
                slot,
                pos: at,
            });
        }
    }

    fn index_remove_everywhere(&mut self, pos: usize, slot: Slot, log: &mut Log) {
        let Some(key) = key_of(&self.items, slot) else {
            return;
        };
        let values: Vec<Arc<str>> = self.indexes[pos]
            .iter()
            .filter(|(_, set)| set.contains(slot, key))
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

impl super::handoff::Buffer for Version {
    type Change = Change;

    fn catch_up(&mut self, log: &mut Log, front: &Self) {
        self.replay(log);
        self.resource_version = front.resource_version;
        self.generation = front.generation;
    }

    fn empty_like(&self) -> Self {
        Version::empty_like(self)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn same_config(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.defs, &other.defs)
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn set_generation(&mut self, generation: u64) {
        self.generation = generation;
    }
}

/// A slot found in a key table is always occupied; this marks the branch that would mean
/// otherwise (a bug), which is handled as "not found" in release builds.
fn unreachable_slot() {
    debug_assert!(false, "a key table names a vacant slot");
}

/// An index map built off to the side by [`Version::build_indexes`] (keeps the map type
/// private to this file).
#[derive(Debug)]
pub(crate) struct ValueMapBox(ValueMap);

/// Calls an index function, normalizing its values and wrapping its error.
fn call(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_map_gives_every_shard_a_growing_share() {
        assert!(shard_map(1).is_empty());
        assert!(shard_map(MAX_WEIGHTED_SHARDS + 1).is_empty());
        for shards in 2..=MAX_WEIGHTED_SHARDS {
            let map = shard_map(shards);
            assert_eq!(map.len(), SHARD_SLOTS);
            let mut share = vec![0usize; shards];
            for w in map.windows(2) {
                assert!(w[0] <= w[1], "{shards} shards: slices in shard order");
            }
            for &s in map.iter() {
                share[usize::from(s)] += 1;
            }
            assert!(share.iter().all(|&n| n > 0), "{shards} shards: {share:?}");
            if shards <= 32 {
                // Largest share about twice the smallest (2^((n-1)/n), rounded to slices).
                let (lo, hi) = (share[0] as f64, share[shards - 1] as f64);
                assert!(hi / lo > 1.4 && hi / lo < 2.3, "{shards} shards: {share:?}");
            }
        }
    }
}
