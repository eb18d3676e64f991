//! Building a buffer's indexes in bulk: `replace` (a list or relist) gathers each index's slots
//! by value while it stores the objects, and `add_indexers` in one pass over the slab; every
//! set is then made once, at its exact size, instead of one insertion per object.

use std::sync::Arc;

use crate::object::{Object, ObjectKey};
use crate::store::error::StoreError;
use crate::store::index::{Builtin, IndexDef};
use crate::store::slot_set::{Slot, SlotSet};

use super::value_map::ValueMap;
use super::write::{ValueMapBox, call};
use super::{Hasher, Version, key_of};

/// The slots of one index, gathered by value as objects are stored (while each object is in
/// cache), then made into sets.
struct MapBuilder {
    groups: hashbrown::HashMap<Arc<str>, Group, Hasher>,
}

/// Groups smaller than this keep their slots in key order as they come; larger ones are
/// sorted once at the end if their keys came out of order.
const INSERT_MAX: usize = 256;

/// The slots gathered for one value, and whether they are in key order (a list from the API
/// server is sorted by key; sorting a group at the end reads every object's key again, once
/// it has left the cache).
struct Group {
    slots: Vec<Slot>,
    sorted: bool,
}

impl MapBuilder {
    fn new(hasher: &Hasher) -> Self {
        MapBuilder {
            groups: hashbrown::HashMap::with_hasher(hasher.clone()),
        }
    }

    /// Adds `slot`, whose object's key is `key`, under `value`. A slot whose key sorts before
    /// the last one's goes to its place at once while the group is small (the keys it is
    /// compared with are of objects stored just before, still in cache); a large group takes
    /// it at the end and is sorted once when finished.
    fn add(&mut self, value: &str, slot: Slot, key: &ObjectKey, items: &[Option<Arc<Object>>]) {
        let Some(g) = self.groups.get_mut(value) else {
            self.groups.insert(
                Arc::from(value),
                Group {
                    slots: vec![slot],
                    sorted: true,
                },
            );
            return;
        };
        let in_order = g
            .slots
            .last()
            .is_some_and(|&s| key_of(items, s) < Some(key));
        if in_order || !g.sorted {
            g.slots.push(slot);
        } else if g.slots.len() < INSERT_MAX {
            if let Err(pos) = g
                .slots
                .binary_search_by(|&s| key_of(items, s).cmp(&Some(key)))
            {
                g.slots.insert(pos, slot);
            }
        } else {
            g.sorted = false;
            g.slots.push(slot);
        }
    }

    /// The index: every value's slots in key order, each slot once.
    fn finish(self, hasher: &Hasher, items: &[Option<Arc<Object>>]) -> ValueMap {
        let mut map = ValueMap::with_capacity(hasher.clone(), self.groups.len());
        for (value, mut g) in self.groups {
            if !g.sorted {
                g.slots
                    .sort_unstable_by(|&a, &b| key_of(items, a).cmp(&key_of(items, b)));
                g.slots.dedup();
            }
            map.insert_new(value, SlotSet::from_sorted(g.slots));
        }
        map
    }
}

impl Version {
    /// Fills this empty buffer with `objects` (a later object under the same key replaces
    /// the earlier one), then builds every index over them.
    ///
    /// # Errors
    /// [`StoreError::IndexFunc`] when a caller's index function fails on an object: the buffer
    /// is then half-built and must not be published.
    pub(crate) fn rebuild<I>(&mut self, objects: I) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Arc<Object>>,
    {
        let mut builders: Vec<MapBuilder> = self
            .defs
            .iter()
            .map(|_| MapBuilder::new(&self.hasher))
            .collect();
        // Set when an object replaces an earlier one under its key: the earlier one's values
        // are then gathered too, so the indexes are built afresh at the end, each function
        // called on every object once more (a list never repeats a key; this is the rare
        // path).
        let mut repeated = false;
        let mut custom = Vec::new();
        for obj in objects {
            custom.clear();
            self.custom_values(&obj, &mut custom)?;
            let (slot, replaced) = self.put_unindexed(obj);
            repeated |= replaced;
            if repeated {
                continue;
            }
            let Some(obj) = self.item(slot) else { continue };
            let (key, items) = (obj.key_ref(), &self.items);
            let mut custom = custom.iter();
            for (def, builder) in self.defs.iter().zip(&mut builders) {
                match def.builtin {
                    Builtin::Namespace => builder.add(obj.namespace(), slot, key, items),
                    Builtin::Custom => {
                        for v in custom.next().into_iter().flatten() {
                            builder.add(v, slot, key, items);
                        }
                    }
                    _ => {
                        for v in &(def.func)(obj).unwrap_or_default() {
                            builder.add(v, slot, key, items);
                        }
                    }
                }
            }
        }
        if repeated {
            let defs = self.defs.clone();
            for (pos, map) in self.build_maps(&defs)?.into_iter().enumerate() {
                self.indexes[pos] = map;
            }
            return Ok(());
        }
        for (pos, builder) in builders.into_iter().enumerate() {
            self.indexes[pos] = builder.finish(&self.hasher, &self.items);
        }
        Ok(())
    }

    /// The maps of the indexes `defs` over the current items, each function called once per
    /// item.
    fn build_maps(&self, defs: &[IndexDef]) -> Result<Vec<ValueMap>, StoreError> {
        let items = &self.items;
        let mut maps = Vec::with_capacity(defs.len());
        for def in defs {
            let mut builder = MapBuilder::new(&self.hasher);
            for (slot, item) in items.iter().enumerate() {
                let Some(obj) = item else { continue };
                for v in &call(def, obj, || obj.key())? {
                    builder.add(v, slot as Slot, obj.key_ref(), items);
                }
            }
            maps.push(builder.finish(&self.hasher, items));
        }
        Ok(maps)
    }

    /// Stores `obj` under its key without touching the indexes: in place of the object under
    /// the same key, else in a new slot. Returns its slot and whether it replaced an object.
    fn put_unindexed(&mut self, obj: Arc<Object>) -> (Slot, bool) {
        let key = obj.key_ref();
        let hash = key.hash_value();
        let shard = self.shard_of(hash);
        if let Some(entry) = self.shards[shard].find_mut(hash, |e| e.obj.key_ref() == key) {
            entry.obj = obj.clone();
            let slot = entry.slot;
            if let Some(item) = self.items.get_mut(slot as usize) {
                *item = Some(obj);
            }
            return (slot, true);
        }
        (self.insert_item(hash, obj), false)
    }

    /// Builds the maps of new indexes over the current items, without changing `self`.
    ///
    /// # Errors
    /// [`StoreError::IndexExists`] when a name is taken or given twice;
    /// [`StoreError::IndexFunc`] when a function fails on a stored object.
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
        let maps = self.build_maps(new)?;
        Ok(maps.into_iter().map(ValueMapBox).collect())
    }
}
