//! [`Version`]: one buffer of a store (items in shards + every index). A store has two of them
//! (see [`super::writer`]): readers look up in the published one, which nothing mutates while
//! any reader can reach it; the writer mutates the other one in place and records what it did
//! in a [`Log`], so that the first buffer can later be brought to the same state by replaying
//! the log (plain map inserts, no index function called twice).
//!
//! Maintenance of indexes follows client-go `tools/cache/thread_safe_store.go`
//! (`updateIndices`, `deleteKeyFromIndex`): on add/update the old object's values are removed
//! and the new object's values added (here only the difference between the two is touched), and
//! a value whose last key goes is removed.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use crate::object::{Object, ObjectKey};

use super::error::StoreError;
use super::index::{Builtin, IndexDef, IndexValues, KeySet, normalize};

/// Hasher of every map of a store; one random seed per store, shared by its buffers.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The items of one shard; each entry is found by the hash of its key's text.
type ItemTable = HashTable<(ObjectKey, Arc<Object>)>;

/// One index: value → keys of the objects indexed under it.
type ValueMap = hashbrown::HashMap<Arc<str>, KeySet, Hasher>;

/// Keys looked up together by [`Version::get_many`].
const LOOKUP_GROUP: usize = 16;

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

/// One buffer of the store: a complete state at one resourceVersion.
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
    shards: Box<[ItemTable]>,
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
/// replay it exactly, without calling index functions again. Values and keys are the same
/// shared allocations in both buffers.
#[derive(Debug)]
pub(crate) enum Change {
    /// Store `obj` under `key` (whose text hashes to `hash`; in the recording buffer its
    /// entry sits in bucket `bucket` of its shard's table).
    Put {
        hash: u64,
        bucket: usize,
        key: ObjectKey,
        obj: Arc<Object>,
    },
    /// Remove the item under `key` (from bucket `bucket` in the recording buffer).
    Remove {
        hash: u64,
        bucket: usize,
        key: ObjectKey,
    },
    /// Add `key` under `value` in index number `index`.
    IndexAdd {
        index: usize,
        value: Arc<str>,
        key: ObjectKey,
    },
    /// Remove `key` from `value` in index number `index`.
    IndexRemove {
        index: usize,
        value: Arc<str>,
        key: ObjectKey,
    },
}

/// The changes one buffer has that the other has not, in order.
pub(crate) type Log = Vec<Change>;

impl Version {
    /// An empty version with `shards` shards (at least one) and the given indexes.
    pub(crate) fn empty(shards: usize, hasher: Hasher, defs: Arc<[IndexDef]>) -> Self {
        let shards = shards.max(1);
        Version {
            resource_version: 0,
            generation: 0,
            len: 0,
            shard_map: shard_map(shards),
            shards: (0..shards).map(|_| ItemTable::new()).collect(),
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

    pub(crate) fn get(&self, key: &str) -> Option<&Arc<Object>> {
        let hash = self.hash(key);
        self.shards[self.shard_of(hash)]
            .find(hash, |(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    }

    /// Every item, shard after shard (no order promised).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Object>)> + '_ {
        self.shards
            .iter()
            .flat_map(|t| t.iter().map(|(k, v)| (k, v)))
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
            .flat_map(|set| set.iter()))
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

    /// Appends the objects stored under `keys` (in their order; keys not stored are skipped)
    /// to `out`. Same result as calling [`Version::get`] per key, arranged for a large store
    /// whose tables and objects are not in cache: the keys go in groups of
    /// [`LOOKUP_GROUP`], and each step (hash every key's text, find every entry, read every
    /// object's reference count, clone every `Arc`) is done for the whole group before the
    /// next step, so the cache misses of one step, independent of each other, overlap instead
    /// of waiting one after the other. The clones come last because an atomic increment
    /// stops later loads from overtaking it.
    fn get_many<'a>(
        &'a self,
        keys: impl Iterator<Item = &'a ObjectKey>,
        out: &mut Vec<Arc<Object>>,
    ) {
        let mut keys = keys.peekable();
        let mut hashes = [0u64; LOOKUP_GROUP];
        let mut group: [Option<&ObjectKey>; LOOKUP_GROUP] = [None; LOOKUP_GROUP];
        let mut found: [Option<&Arc<Object>>; LOOKUP_GROUP] = [None; LOOKUP_GROUP];
        while keys.peek().is_some() {
            let mut n = 0;
            for (slot, key) in group.iter_mut().zip(keys.by_ref()) {
                *slot = Some(key);
                n += 1;
            }
            for (h, key) in hashes.iter_mut().zip(&group[..n]) {
                *h = key.map_or(0, |k| self.hash(k.as_str()));
            }
            for ((f, key), &hash) in found.iter_mut().zip(&group[..n]).zip(&hashes) {
                *f = key.and_then(|key| {
                    self.shards[self.shard_of(hash)]
                        .find(hash, |(k, _)| k == key)
                        .map(|(_, v)| v)
                });
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
        let mut keys: Vec<&ObjectKey> = values
            .iter()
            .filter_map(|v| map.get(v.as_str()))
            .flat_map(|set| set.iter())
            .collect();
        if values.len() > 1 {
            keys.sort_unstable();
            keys.dedup();
        }
        let mut out = Vec::with_capacity(keys.len());
        self.get_many(keys.into_iter(), &mut out);
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
    /// when the fields they read are unchanged. `scratch` is a reusable buffer for the key's
    /// text. Returns the object it replaced; every change made is appended to `log`.
    pub(crate) fn upsert(
        &mut self,
        obj: Arc<Object>,
        custom: &[IndexValues],
        scratch: &mut String,
        log: &mut Log,
    ) -> Option<Arc<Object>> {
        scratch.clear();
        if !obj.namespace().is_empty() {
            scratch.push_str(obj.namespace());
            scratch.push('/');
        }
        scratch.push_str(obj.name());
        let hash = self.hash(scratch);
        let (key, old, bucket) = self.put(hash, scratch, obj.clone());
        if let Some(old) = &old
            && Arc::ptr_eq(old, &obj)
        {
            return Some(obj);
        }
        let defs = self.defs.clone();
        let mut custom = custom.iter();
        for (pos, def) in defs.iter().enumerate() {
            if def.builtin == Builtin::Custom {
                let Some(new) = custom.next() else { continue };
                match &old {
                    None => {
                        for v in new {
                            self.index_add(pos, v, &key, log);
                        }
                    }
                    Some(old) => match (def.func)(old) {
                        Ok(old_values) => {
                            self.apply_diff(pos, &key, &normalize(old_values), new, log)
                        }
                        Err(_) => {
                            // The function accepted this object when it was stored; it is
                            // not pure. Find the key's old values the slow way.
                            self.index_remove_everywhere(pos, &key, log);
                            for v in new {
                                self.index_add(pos, v, &key, log);
                            }
                        }
                    },
                }
                continue;
            }
            match &old {
                Some(old) if def.builtin.same_values(old, &obj) => {}
                Some(old) => {
                    let old_values = normalize((def.func)(old).unwrap_or_default());
                    let new_values = normalize((def.func)(&obj).unwrap_or_default());
                    self.apply_diff(pos, &key, &old_values, &new_values, log);
                }
                None if def.builtin == Builtin::Namespace => {
                    self.index_add(pos, obj.namespace(), &key, log);
                }
                None => {
                    for v in &normalize((def.func)(&obj).unwrap_or_default()) {
                        self.index_add(pos, v, &key, log);
                    }
                }
            }
        }
        log.push(Change::Put {
            hash,
            bucket,
            key,
            obj,
        });
        old
    }

    /// Removes the object under `key` and its index entries, appending the changes to `log`.
    /// Never fails: when an index function fails on the stored object, its entries are found
    /// by scanning that index.
    pub(crate) fn delete(&mut self, key: &str, log: &mut Log) -> Option<Arc<Object>> {
        let hash = self.hash(key);
        let (key, old, bucket) = self.take(hash, key)?;
        let defs = self.defs.clone();
        for (pos, def) in defs.iter().enumerate() {
            if def.builtin == Builtin::Namespace {
                self.index_remove(pos, old.namespace(), &key, log);
                continue;
            }
            match (def.func)(&old) {
                Ok(values) => {
                    for v in &values {
                        self.index_remove(pos, v, &key, log);
                    }
                }
                Err(_) => self.index_remove_everywhere(pos, &key, log),
            }
        }
        log.push(Change::Remove { hash, bucket, key });
        Some(old)
    }

    /// Applies (and empties) changes recorded on the other buffer, which was in the same state
    /// as this one.
    pub(crate) fn replay(&mut self, log: &mut Log) {
        for change in log.drain(..) {
            self.replay_one(change);
        }
    }

    /// Applies one change recorded on the other buffer.
    fn replay_one(&mut self, change: Change) {
        match change {
            Change::Put {
                hash,
                bucket,
                key,
                obj,
            } => self.put_key(hash, bucket, key, obj),
            Change::Remove { hash, bucket, key } => self.take_key(hash, bucket, &key),
            Change::IndexAdd { index, value, key } => {
                let map = &mut self.indexes[index];
                match map.get_mut(&*value) {
                    Some(set) => set.insert(&key),
                    None => {
                        map.insert(value, KeySet::One(key));
                    }
                }
            }
            Change::IndexRemove { index, value, key } => {
                let map = &mut self.indexes[index];
                if let Some(set) = map.get_mut(&*value)
                    && set.remove(&key)
                {
                    map.remove(&*value);
                }
            }
        }
    }

    /// Removes every item and index entry, keeping the tables' capacity.
    pub(crate) fn clear(&mut self) {
        for t in self.shards.iter_mut() {
            t.clear();
        }
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
        let mut maps = Vec::with_capacity(new.len());
        for def in new {
            let mut map = ValueMap::with_hasher(self.hasher.clone());
            for (key, obj) in self.iter() {
                for v in &call(def, obj, || key.clone())? {
                    match map.get_mut(v.as_str()) {
                        Some(set) => set.insert(key),
                        None => {
                            map.insert(Arc::from(v.as_str()), KeySet::One(key.clone()));
                        }
                    }
                }
            }
            maps.push(ValueMapBox(map));
        }
        Ok(maps)
    }

    /// Attaches indexes built by [`Version::build_indexes`].
    pub(crate) fn attach_indexes(&mut self, new: Vec<IndexDef>, maps: Vec<ValueMapBox>) {
        let mut defs = self.defs.to_vec();
        defs.extend(new);
        self.defs = defs.into();
        let mut indexes = std::mem::take(&mut self.indexes).into_vec();
        indexes.extend(maps.into_iter().map(|m| m.0));
        self.indexes = indexes.into();
    }

    /// Stores `obj` under the key whose text is `text`; returns the key as stored (the existing
    /// allocation when the key was present, so an update allocates no key), the object it
    /// replaced and the entry's bucket in its shard's table.
    fn put(
        &mut self,
        hash: u64,
        text: &str,
        obj: Arc<Object>,
    ) -> (ObjectKey, Option<Arc<Object>>, usize) {
        let shard = self.shard_of(hash);
        let hasher = &self.hasher;
        match self.shards[shard].entry(
            hash,
            |(k, _)| k.as_str() == text,
            |(k, _)| hasher.hash_one(k.as_str()),
        ) {
            Entry::Occupied(mut e) => {
                let bucket = e.bucket_index();
                let (key, slot) = e.get_mut();
                (key.clone(), Some(std::mem::replace(slot, obj)), bucket)
            }
            Entry::Vacant(e) => {
                let key = ObjectKey::from_raw(text);
                let bucket = e.insert((key.clone(), obj)).bucket_index();
                self.len += 1;
                (key, None, bucket)
            }
        }
    }

    /// Replays a [`Change::Put`]. Both buffers see the same operations in the same order from
    /// the same starting table, so the entry is normally in the bucket the other buffer
    /// recorded: it is checked there first (one memory access instead of a probe and a key
    /// comparison), and looked up normally when the layouts differ.
    fn put_key(&mut self, hash: u64, bucket: usize, key: ObjectKey, obj: Arc<Object>) {
        let shard = self.shard_of(hash);
        if let Some((k, v)) = self.shards[shard].get_bucket_mut(bucket)
            && *k == key
        {
            *v = obj;
            return;
        }
        let hasher = &self.hasher;
        match self.shards[shard].entry(
            hash,
            |(k, _)| *k == key,
            |(k, _)| hasher.hash_one(k.as_str()),
        ) {
            Entry::Occupied(mut e) => e.get_mut().1 = obj,
            Entry::Vacant(e) => {
                e.insert((key, obj));
                self.len += 1;
            }
        }
    }

    /// Removes the item under the key whose text is `key`, with its bucket.
    fn take(&mut self, hash: u64, key: &str) -> Option<(ObjectKey, Arc<Object>, usize)> {
        let shard = self.shard_of(hash);
        let entry = self.shards[shard]
            .find_entry(hash, |(k, _)| k.as_str() == key)
            .ok()?;
        let bucket = entry.bucket_index();
        let ((key, obj), _) = entry.remove();
        self.len -= 1;
        Some((key, obj, bucket))
    }

    /// Replays a [`Change::Remove`] (bucket first, as [`Version::put_key`]).
    fn take_key(&mut self, hash: u64, bucket: usize, key: &ObjectKey) {
        let shard = self.shard_of(hash);
        if let Ok(e) = self.shards[shard].get_bucket_entry(bucket)
            && e.get().0 == *key
        {
            e.remove();
            self.len -= 1;
            return;
        }
        if let Ok(e) = self.shards[shard].find_entry(hash, |(k, _)| k == key) {
            e.remove();
            self.len -= 1;
        }
    }

    fn index_add(&mut self, pos: usize, value: &str, key: &ObjectKey, log: &mut Log) {
        let map = &mut self.indexes[pos];
        let value = match map.get_key_value_mut(value) {
            Some((v, set)) => {
                set.insert(key);
                v.clone()
            }
            None => {
                let v: Arc<str> = Arc::from(value);
                map.insert(v.clone(), KeySet::One(key.clone()));
                v
            }
        };
        log.push(Change::IndexAdd {
            index: pos,
            value,
            key: key.clone(),
        });
    }

    fn index_remove(&mut self, pos: usize, value: &str, key: &ObjectKey, log: &mut Log) {
        let map = &mut self.indexes[pos];
        let Some((v, set)) = map.get_key_value_mut(value) else {
            return;
        };
        if !set.contains(key) {
            return;
        }
        let value = if set.remove(key) {
            map.remove_entry(value).map(|(v, _)| v)
        } else {
            Some(v.clone())
        };
        if let Some(value) = value {
            log.push(Change::IndexRemove {
                index: pos,
                value,
                key: key.clone(),
            });
        }
    }

    fn index_remove_everywhere(&mut self, pos: usize, key: &ObjectKey, log: &mut Log) {
        let values: Vec<Arc<str>> = self.indexes[pos]
            .iter()
            .filter(|(_, set)| set.contains(key))
            .map(|(v, _)| v.clone())
            .collect();
        for v in values {
            self.index_remove(pos, &v, key, log);
        }
    }

    /// Moves `key` from the values only in `old` to the values only in `new` (both sorted and
    /// deduplicated); values in both are not touched.
    fn apply_diff(
        &mut self,
        pos: usize,
        key: &ObjectKey,
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
                    self.index_remove(pos, o, key, log);
                    i += 1;
                }
                (Some(o), None) => {
                    self.index_remove(pos, o, key, log);
                    i += 1;
                }
                (_, Some(n)) => {
                    self.index_add(pos, n, key, log);
                    j += 1;
                }
            }
        }
    }
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
