//! Lookups in one buffer: by key, by index value, and client-go's `Index`.

use std::sync::Arc;

use crate::object::{Object, ObjectKey};
use crate::store::error::StoreError;
use crate::store::index::normalize;
use crate::store::lookup::LookupKey;
use crate::store::slot_set::Slot;

use super::{Version, key_of};

/// Slots read together by [`Version::get_many`].
const LOOKUP_GROUP: usize = 16;

impl Version {
    pub(crate) fn get(&self, key: &(impl LookupKey + ?Sized)) -> Option<&Arc<Object>> {
        self.find(key).map(|e| &e.obj)
    }

    /// Every item, in slot order (no order promised).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Object>)> + '_ {
        self.items.iter().flatten().map(|o| (o.key_ref(), o))
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
            .filter_map(|s| self.item(s).map(|o| o.key_ref())))
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
                *f = self.item(slot);
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
}
