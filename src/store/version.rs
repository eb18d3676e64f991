//! [`Version`]: one immutable state of a store (items in shards + every index), the unit that
//! is published to readers. The writer clones the current version (cheap: persistent maps share
//! all their nodes), mutates the clone, and publishes it; nothing a reader holds ever changes.
//!
//! Maintenance of indexes follows client-go `tools/cache/thread_safe_store.go`
//! (`updateIndices`): on add/update the old object's values are removed and the new object's
//! values added; here only the difference between the two is touched.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use imbl::GenericHashMap;
use imbl::shared_ptr::DefaultSharedPtr;

use crate::object::{Object, ObjectKey};

use super::error::StoreError;
use super::index::{IndexDef, IndexValues, KeySet, normalize};

/// Hasher of every map of a store; one random seed per store, shared by its versions.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The items of one shard.
pub(crate) type ItemMap = GenericHashMap<ObjectKey, Arc<Object>, Hasher, DefaultSharedPtr>;

/// One index: value → keys of the objects indexed under it.
pub(crate) type ValueMap = GenericHashMap<Arc<str>, KeySet, Hasher, DefaultSharedPtr>;

/// One immutable state of the store.
#[derive(Clone)]
pub(crate) struct Version {
    /// resourceVersion this state reflects (0 = none yet).
    pub(crate) resource_version: u64,
    /// Number of versions published before this one.
    pub(crate) generation: u64,
    len: usize,
    hasher: Hasher,
    shards: Box<[ItemMap]>,
    defs: Arc<[IndexDef]>,
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

impl Version {
    /// An empty version with `shards` shards (at least one) and the given indexes.
    pub(crate) fn empty(shards: usize, hasher: Hasher, defs: Arc<[IndexDef]>) -> Self {
        let shards = shards.max(1);
        Version {
            resource_version: 0,
            generation: 0,
            len: 0,
            shards: (0..shards)
                .map(|_| ItemMap::with_hasher(hasher.clone()))
                .collect(),
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
        Version::empty(self.shards.len(), self.hasher.clone(), self.defs.clone())
    }

    // ---- reads ------------------------------------------------------------------------------

    /// Shard holding `key`: the high 32 bits of its hash, scaled to the shard count
    /// (the maps use the low 32 bits, so a shard's tree stays balanced).
    fn shard_of(&self, key: &str) -> usize {
        let n = self.shards.len();
        if n == 1 {
            return 0;
        }
        let h = self.hasher.hash_one(key) >> 32;
        ((h * n as u64) >> 32) as usize
    }

    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.shards[self.shard_of(key)].get(key)
    }

    /// Every item, shard after shard (no order promised).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Object>)> + '_ {
        self.shards.iter().flat_map(|m| m.iter())
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
        Ok(self
            .index_key_iter(name, value)?
            .filter_map(|k| self.get(k.as_str()).cloned())
            .collect())
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
        Ok(keys
            .into_iter()
            .filter_map(|k| self.get(k.as_str()).cloned())
            .collect())
    }

    // ---- writes (only on the writer's private clone) -----------------------------------------

    /// Inserts or replaces the object under its key and updates every index. Returns the
    /// object it replaced.
    ///
    /// On `Err` this version may be half-updated: the caller must discard it.
    pub(crate) fn upsert(&mut self, obj: Arc<Object>) -> Result<Option<Arc<Object>>, StoreError> {
        let key = obj.key();
        let shard = self.shard_of(key.as_str());
        let old = self.shards[shard].get(key.as_str()).cloned();
        if let Some(old) = &old
            && Arc::ptr_eq(old, &obj)
        {
            return Ok(Some(obj));
        }
        for (def, map) in self.defs.iter().zip(self.indexes.iter_mut()) {
            let new_values = call(def, &obj, &key)?;
            match &old {
                None => {
                    for v in &new_values {
                        add_key(map, v, &key);
                    }
                }
                Some(old) => match (def.func)(old) {
                    Ok(old_values) => apply_diff(map, &key, &normalize(old_values), &new_values),
                    Err(_) => {
                        // The function accepted this object when it was stored; it is not
                        // pure. Find the key's old values the slow way.
                        remove_key_everywhere(map, &key);
                        for v in &new_values {
                            add_key(map, v, &key);
                        }
                    }
                },
            }
        }
        if self.shards[shard].insert(key, obj).is_none() {
            self.len += 1;
        }
        Ok(old)
    }

    /// Removes the object under `key` and its index entries. Never fails: when an index
    /// function fails on the stored object, its entries are found by scanning that index.
    pub(crate) fn delete(&mut self, key: &str) -> Option<Arc<Object>> {
        let shard = self.shard_of(key);
        let (key, old) = self.shards[shard].remove_with_key(key)?;
        self.len -= 1;
        for (def, map) in self.defs.iter().zip(self.indexes.iter_mut()) {
            match (def.func)(&old) {
                Ok(values) => {
                    for v in &values {
                        remove_key(map, v, &key);
                    }
                }
                Err(_) => remove_key_everywhere(map, &key),
            }
        }
        Some(old)
    }

    /// Adds indexes, indexing every existing item. On `Err` the caller must discard `self`.
    pub(crate) fn add_indexes(&mut self, new: Vec<IndexDef>) -> Result<(), StoreError> {
        for d in &new {
            if self.index_pos(&d.name).is_ok()
                || new.iter().filter(|o| o.name == d.name).count() > 1
            {
                return Err(StoreError::IndexExists {
                    name: d.name.to_string(),
                });
            }
        }
        let mut maps = Vec::with_capacity(new.len());
        for def in &new {
            let mut map = ValueMap::with_hasher(self.hasher.clone());
            for (key, obj) in self.iter() {
                for v in &call(def, obj, key)? {
                    add_key(&mut map, v, key);
                }
            }
            maps.push(map);
        }
        let mut defs = self.defs.to_vec();
        defs.extend(new);
        self.defs = defs.into();
        let mut indexes = std::mem::take(&mut self.indexes).into_vec();
        indexes.extend(maps);
        self.indexes = indexes.into();
        Ok(())
    }
}

/// Calls an index function, normalizing its values and wrapping its error.
fn call(def: &IndexDef, obj: &Object, key: &ObjectKey) -> Result<IndexValues, StoreError> {
    (def.func)(obj)
        .map(normalize)
        .map_err(|source| StoreError::IndexFunc {
            index: def.name.clone(),
            key: key.clone(),
            source,
        })
}

fn add_key(map: &mut ValueMap, value: &str, key: &ObjectKey) {
    match map.get_mut(value) {
        Some(set) => set.insert(key),
        None => {
            map.insert(Arc::from(value), KeySet::One(key.clone()));
        }
    }
}

fn remove_key(map: &mut ValueMap, value: &str, key: &ObjectKey) {
    // Look first: `get_mut` copies the path to the value even when the key is absent.
    let Some(set) = map.get(value) else { return };
    if !set.contains(key) {
        return;
    }
    if set.len() == 1 {
        map.remove(value);
    } else if let Some(set) = map.get_mut(value) {
        set.remove(key);
    }
}

fn remove_key_everywhere(map: &mut ValueMap, key: &ObjectKey) {
    let values: Vec<Arc<str>> = map
        .iter()
        .filter(|(_, set)| set.contains(key))
        .map(|(v, _)| v.clone())
        .collect();
    for v in values {
        remove_key(map, &v, key);
    }
}

/// Moves `key` from the values only in `old` to the values only in `new` (both sorted and
/// deduplicated); values in both are not touched.
fn apply_diff(map: &mut ValueMap, key: &ObjectKey, old: &[String], new: &[String]) {
    let (mut i, mut j) = (0, 0);
    loop {
        match (old.get(i), new.get(j)) {
            (None, None) => break,
            (Some(o), Some(n)) if o == n => {
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o < n => {
                remove_key(map, o, key);
                i += 1;
            }
            (Some(o), None) => {
                remove_key(map, o, key);
                i += 1;
            }
            (_, Some(n)) => {
                add_key(map, n, key);
                j += 1;
            }
        }
    }
}
