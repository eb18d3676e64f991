//! [`Version`]: one buffer of a store, a complete state at one resourceVersion. A store has
//! two (the left-right scheme of [`Writer`](super::Writer), protocol in `handoff.rs`): readers
//! look up in the published one, which nothing changes while it is published; the writer
//! changes the other in place and logs each [`Change`] (`write.rs`), and the first buffer later
//! replays the log (`replay.rs`): slab stores and map inserts by slot number, no index function
//! called again, no key compared.
//!
//! A buffer holds the objects in a slab of `(key, object)` entries whose layout both buffers
//! share (an object has the same slot in both); key → slot tables in shards (`shard.rs`), which
//! change only when a key is added or removed; and each index as value → slots in key order.
//! Objects, keys and index values are shared `Arc`s: a buffer costs pointers and slot numbers,
//! never copies of objects.

mod change;
mod read;
mod replay;
mod shard;
mod write;

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::object::{Object, ObjectKey};

use super::error::StoreError;
use super::handoff::Buffer;
use super::index::IndexDef;
use super::slot_set::{Slot, SlotSet};

pub(crate) use change::{Change, Log};
pub(crate) use write::WARM_GROUP;

/// Hasher of every map of a store; one random seed per store, shared by its buffers.
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The key → slot map of one shard; each entry is found by the hash of its key's text (the
/// key itself is in the slab).
type KeyTable = HashTable<Slot>;

/// One index: value → slots of the objects indexed under it (in key order).
type ValueMap = hashbrown::HashMap<Arc<str>, SlotSet, Hasher>;

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
    /// Shard of each slice of the hash range (see `shard.rs`); shared by both buffers.
    shard_map: Arc<[u16]>,
    /// Key → slot, by the hash of the key's text.
    shards: Box<[KeyTable]>,
    /// The items, by slot; `None` for a vacant slot (listed in `free`). Keeps room for the
    /// most items it held at once (24 bytes a slot, reused by later adds and by a replace)
    /// until deletes empty the store.
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
            shard_map: shard::shard_map(shards),
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

    /// The hash of a key's text (the hasher, hence the hash, is the same in both buffers).
    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
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
}

impl Buffer for Version {
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
