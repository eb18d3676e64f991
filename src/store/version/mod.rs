//! [`Version`]: one buffer of a store, a complete state at one resourceVersion. A store has
//! two (the left-right scheme of [`Writer`](super::Writer), protocol in `handoff.rs`): readers
//! look up in the published one, which nothing changes while it is published; the writer
//! changes the other in place and logs each [`Change`] (`write.rs`), and the first buffer later
//! replays the log (`replay.rs`): slab stores and map inserts by slot number, no index function
//! called again, no key compared.
//!
//! A buffer holds the objects in a slab whose layout both buffers share (an object has the same
//! slot in both); key tables in shards (`shard.rs`) whose entries hold the object and its slot,
//! so that a lookup by key ends in the table; and each index as value → slots in key order.
//! Objects, keys, index values and index sets of up to 256 slots are shared `Arc`s: a buffer
//! costs pointers and slot numbers, never copies of objects.

mod change;
mod read;
mod rebuild;
mod replay;
mod shard;
mod value_map;
mod write;

use std::fmt;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::object::{Object, ObjectKey};

use super::error::StoreError;
use super::handoff::Buffer;
use super::index::IndexDef;
use super::lookup::LookupKey;
use super::slot_set::Slot;

use change::SetPositions;
pub(crate) use change::{Change, Log};
pub(crate) use write::WARM_GROUP;

use value_map::ValueMap;

/// Hasher of the index maps of a store; one random seed per store, shared by its buffers (the
/// key tables use [`key_hash`](crate::object::key_hash), whose hash every [`ObjectKey`] carries).
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The key table of one shard: entries found by the hash of their key's text
/// ([`key_hash`](crate::object::key_hash)).
type KeyTable = HashTable<Entry>;

/// One key table entry: the object (whose own cached key is the entry's key) and its slot.
///
/// Holding the object here, beside the slot, is what makes a lookup by key one probe: the
/// table entry gives the object's address at once, where a table of slots sent every `get`
/// through the slab first (one more dependent cache miss in a large store; `get` 1.15-2.2x the
/// slot-table build at 100 000 objects, BENCHMARKS.md). The slab keeps its own reference for
/// index reads; both change together, which costs updates 20-35 %: one more reference and
/// pointer store per buffer, and a table probe when the other buffer replays the update.
#[derive(Clone, Debug)]
struct Entry {
    obj: Arc<Object>,
    slot: Slot,
}

/// One buffer of the store: a complete state at one resourceVersion.
///
/// Objects live in a slab (`items`, vacant slots listed in `free`) whose layout both buffers
/// share: an object has the same slot number in both, because both see the same adds and
/// deletes in the same order (the log carries the slot). The shard tables map a key's hash to
/// an entry holding the object and its slot; index entries hold slots. So an update replays as
/// one slab store and one table store, and `by_index` reads each member straight from its slot.
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
    /// Key → (object, slot), by the hash of the key's text.
    shards: Box<[KeyTable]>,
    /// The objects, by slot; `None` for a vacant slot (listed in `free`). Keeps room for the
    /// most objects it held at once (8 bytes a slot, reused by later adds and by a replace)
    /// until deletes empty the store.
    items: Vec<Option<Arc<Object>>>,
    /// Vacant slots, reused last-freed first.
    free: Vec<Slot>,
    pub(crate) defs: Arc<[IndexDef]>,
    /// Parallel to `defs`.
    indexes: Box<[ValueMap]>,
    /// While this buffer is written: where the log holds each set's last state (see
    /// `push_index`). Emptied when the buffer replays the other's log, before it is written.
    set_positions: SetPositions,
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

/// The key of the object in `slot`, if any (index entries always name an occupied slot).
fn key_of(items: &[Option<Arc<Object>>], slot: Slot) -> Option<&ObjectKey> {
    items
        .get(slot as usize)
        .and_then(Option::as_ref)
        .map(|o| o.key_ref())
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
            set_positions: SetPositions::with_hasher(hasher.clone()),
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

    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The object in `slot`, if occupied.
    fn item(&self, slot: Slot) -> Option<&Arc<Object>> {
        self.items.get(slot as usize).and_then(Option::as_ref)
    }

    /// The table entry of `key`.
    fn find(&self, key: &(impl LookupKey + ?Sized)) -> Option<&Entry> {
        let hash = key.key_hash();
        self.shards[self.shard_of(hash)].find(hash, |e| key.key_matches(e.obj.key_ref()))
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
        self.set_positions.clear();
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
