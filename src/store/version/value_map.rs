//! [`ValueMap`]: one index of a store buffer, value → the slots indexed under it.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::store::slot_set::SlotSet;

use super::Hasher;

/// Value → [`SlotSet`], stored densely: a hash table of 4-byte positions into a vector of
/// entries.
///
/// Kept dense because an index such as by-label has about a fifth as many values as objects,
/// and a hash table's buckets sit 44–88 % full: 32-byte entries held in the buckets cost up to
/// as much again in empty room, where 4-byte positions (plus a control byte) cost 5–12 bytes
/// per value and the entries themselves sit in a vector grown by an eighth.
///
/// Removal moves the last entry into the freed place (order is not kept; readers sort values
/// where order is promised).
#[derive(Clone)]
pub(crate) struct ValueMap {
    /// Positions in `entries`, by the hash of their value.
    table: HashTable<u32>,
    entries: Vec<(Arc<str>, SlotSet)>,
    hasher: Hasher,
}

impl std::fmt::Debug for ValueMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(v, s)| (v, s)))
            .finish()
    }
}

impl ValueMap {
    /// An empty map hashing values with `hasher`.
    pub(crate) fn with_hasher(hasher: Hasher) -> Self {
        ValueMap {
            table: HashTable::new(),
            entries: Vec::new(),
            hasher,
        }
    }

    /// An empty map with room for `n` values.
    pub(crate) fn with_capacity(hasher: Hasher, n: usize) -> Self {
        ValueMap {
            table: HashTable::with_capacity(n),
            entries: Vec::with_capacity(n),
            hasher,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn hash(&self, value: &str) -> u64 {
        self.hasher.hash_one(value)
    }

    /// Position in `entries` of `value`.
    fn position(&self, value: &str) -> Option<usize> {
        let entries = &self.entries;
        self.table
            .find(self.hash(value), |&i| &*entries[i as usize].0 == value)
            .map(|&i| i as usize)
    }

    pub(crate) fn get(&self, value: &str) -> Option<&SlotSet> {
        self.position(value).map(|i| &self.entries[i].1)
    }

    pub(crate) fn get_mut(&mut self, value: &str) -> Option<&mut SlotSet> {
        self.position(value).map(|i| &mut self.entries[i].1)
    }

    /// The stored value (shared with the other buffer and the log) and its set.
    pub(crate) fn get_key_value_mut(&mut self, value: &str) -> Option<(&Arc<str>, &mut SlotSet)> {
        self.position(value).map(|i| {
            let (v, set) = &mut self.entries[i];
            (&*v, set)
        })
    }

    /// Adds `value`, which the map does not hold, with `set`.
    pub(crate) fn insert_new(&mut self, value: Arc<str>, set: SlotSet) {
        debug_assert!(self.position(&value).is_none(), "value already present");
        // A position is a u32: a buffer holds fewer than 2^32 values per index (each costs
        // at least 40 bytes here, so memory runs out long before).
        let at = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        if self.entries.len() == self.entries.capacity() {
            // Grown by an eighth, not doubled: see the type's comment.
            self.entries.reserve_exact((self.entries.len() / 8).max(4));
        }
        let hash = self.hash(&value);
        self.entries.push((value, set));
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.table
            .insert_unique(hash, at, |&i| hasher.hash_one(&*entries[i as usize].0));
    }

    /// Removes `value`; returns it (the stored, shared one) and its set.
    pub(crate) fn remove(&mut self, value: &str) -> Option<(Arc<str>, SlotSet)> {
        let hash = self.hash(value);
        let entries = &self.entries;
        let found = self
            .table
            .find_entry(hash, |&i| &*entries[i as usize].0 == value)
            .ok()?;
        let at = *found.get() as usize;
        found.remove();
        let last = self.entries.len() - 1;
        if at != last {
            // The last entry moves to `at`: repoint its table position.
            let moved = self.hash(&self.entries[last].0);
            if let Some(p) = self.table.find_mut(moved, |&i| i as usize == last) {
                *p = at as u32;
            }
        }
        let removed = self.entries.swap_remove(at);
        if self.entries.is_empty() {
            // An index emptied by deletes gives its memory back.
            *self = ValueMap::with_hasher(self.hasher.clone());
        }
        Some(removed)
    }

    /// The values, in no particular order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Arc<str>> + '_ {
        self.entries.iter().map(|(v, _)| v)
    }

    /// The values and their sets, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &SlotSet)> + '_ {
        self.entries.iter().map(|(v, s)| (v, s))
    }

    /// Bytes this map allocated (its table and entry vector, not the values' text or the
    /// sets' own vectors), for tests of the layout.
    #[cfg(test)]
    fn table_bytes(&self) -> usize {
        let buckets = if self.table.capacity() == 0 {
            0
        } else {
            (self.table.capacity() * 8 / 7).next_power_of_two()
        };
        buckets * (std::mem::size_of::<u32>() + 1)
            + self.entries.capacity() * std::mem::size_of::<(Arc<str>, SlotSet)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> ValueMap {
        ValueMap::with_hasher(Hasher::default())
    }

    #[test]
    fn inserts_finds_and_removes_by_moving_the_last_entry() {
        let mut m = map();
        for i in 0..1000u32 {
            m.insert_new(Arc::from(format!("v{i}")), SlotSet::One(i));
        }
        assert_eq!(m.len(), 1000);
        // Remove every third value, from the front: each removal moves the last entry.
        for i in (0..1000u32).step_by(3) {
            let (v, set) = m.remove(&format!("v{i}")).expect("present");
            assert_eq!(&*v, format!("v{i}"));
            assert!(matches!(set, SlotSet::One(s) if s == i));
            assert!(m.get(&format!("v{i}")).is_none());
            assert!(m.remove(&format!("v{i}")).is_none());
        }
        for i in 0..1000u32 {
            let got = m.get(&format!("v{i}"));
            if i % 3 == 0 {
                assert!(got.is_none());
            } else {
                assert!(matches!(got, Some(SlotSet::One(s)) if *s == i), "v{i}");
            }
        }
        assert_eq!(m.len(), 666);
        assert_eq!(m.keys().count(), 666);
        *m.get_mut("v1").expect("v1") = SlotSet::One(7);
        let (v, set) = m.get_key_value_mut("v1").expect("v1");
        assert_eq!(&**v, "v1");
        assert!(matches!(set, SlotSet::One(7)));
    }

    #[test]
    fn an_emptied_map_gives_its_memory_back() {
        let mut m = map();
        for i in 0..100u32 {
            m.insert_new(Arc::from(format!("v{i}")), SlotSet::One(i));
        }
        assert!(m.table_bytes() > 0);
        for i in 0..100u32 {
            m.remove(&format!("v{i}"));
        }
        assert_eq!(m.len(), 0);
        assert_eq!(m.table_bytes(), 0);
    }

    #[test]
    fn entries_grow_by_an_eighth() {
        let mut m = map();
        for i in 0..20_000u32 {
            m.insert_new(Arc::from(format!("v{i}")), SlotSet::One(i));
        }
        assert!(m.entries.capacity() <= 20_000 + 20_000 / 8 + 4);
    }
}
