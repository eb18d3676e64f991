//! The store: client-go's `Indexer`/`ThreadSafeStore` (`tools/cache/thread_safe_store.go`,
//! `tools/cache/index.go`, `tools/cache/store.go`) as a sharded, snapshot-versioned map with
//! lock-free readers.
//!
//! [`store`] returns one [`Writer`] (the informer) and a [`Store`] read handle that clones
//! cheaply and can be used from any number of threads. Objects are kept as `Arc<Object>`: a
//! reader gets the allocation the writer stored, nothing is copied.
//!
//! # Structure
//!
//! Two buffers, each a complete store: the objects in a slab (a vector of `(key, object)`
//! entries, vacant slots reused) whose layout both buffers share, so an object has the same
//! slot number in both; a key → slot map in S shards of plain hash tables (keyed by the hash of
//! `namespace/name`; shards get unequal shares of the hash range, so that their tables are not
//! all just past a doubling at once, see `shard_map` in `version.rs`), which changes only when a
//! key is added or removed; and every secondary index (value → the slots of its objects, in key
//! order) in plain hash maps. Objects, keys and index values are shared `Arc`s, so a buffer
//! costs pointers and slot numbers, never copies of objects. Readers use the *front* buffer,
//! published through one `arc_swap::ArcSwap`; nothing changes it while it is published. The
//! writer changes the *back* buffer in place, logs what it changed (with slot numbers),
//! publishes it with one atomic swap, and brings the old front up to date by replaying the log
//! once no reader is left in it (left-right double buffering, without `unsafe`: see
//! [`Writer`]; the hand-back between the buffers is model-checked with loom,
//! `tests/loom_handoff.rs`). An update costs one key lookup in the back buffer, one slab store in
//! the other (no hashing, no key comparison) and, per index, a comparison of the fields the index
//! reads (provided functions) or one call of the function on the old and the new object; `by_index`
//! reads each member's object straight from its slot (no hashing, no key read). A batch is
//! written in groups of 16 changes whose memory is read ahead for the whole group first (and
//! replayed likewise, reading ahead the slab entries and replaced objects of its updates), so
//! that the cache misses of different keys overlap.
//! `BENCHMARKS.md` has the figures, and those of the structures tried before this one
//! (persistent HAMTs, per-shard copy-on-write).
//!
//! Indexes: the built-in [`NAMESPACE_INDEX`]; [`labels_index_func`], [`owner_uid_index_func`]
//! and [`uid_index_func`] provided; any [`IndexFunc`]. An index value whose last key goes is
//! removed (client-go `deleteKeyFromIndex`), so high-cardinality indexes such as by-UID do not
//! leak.
//!
//! # Consistency
//!
//! - **Lock-free reads.** A read loads the current version pointer (`arc-swap`: no mutex, no
//!   rwlock, no spinning on the writer) and looks up in it.
//! - **Atomic versions.** Every [`Writer::apply`], [`Writer::replace`], [`Writer::bookmark`]
//!   and [`Writer::add_indexers`] publishes at most one version. A reader sees a batch whole or
//!   not at all, across all shards and indexes: an index entry never names a missing object,
//!   and an object is always under the index values of its current state.
//! - **Each `Store` call reads the latest version on its own.** Two successive calls on a
//!   [`Store`] (say `by_index` then `get`) may read two versions. A [`Snapshot`] pins one
//!   version: all its reads agree with each other and with its
//!   [`resource_version`](Snapshot::resource_version), however long it is held.
//! - **Staleness.** A version is visible to every reader once the writer's call returns (the
//!   swap is sequentially consistent); before that, readers see the previous version. The
//!   store as a whole is as stale as the informer feeding it, and says how stale through
//!   [`Store::resource_version`]; [`Store::wait_for`] waits until it reflects a given
//!   resourceVersion (read-your-writes).
//! - **Failed writes are invisible.** When an index function fails, the whole write is
//!   rejected with [`StoreError::IndexFunc`] and no version is published (client-go panics).
//! - **Readers never wait; the writer may, briefly.** Before writing the back buffer the
//!   writer waits for the readers still in it (calls that began before the last swap: a few
//!   microseconds) for at most about as long as copying the buffer would take (1 ms plus
//!   50 ns per object); a reader holding it longer (a
//!   [`Snapshot`]) keeps it, and the writer continues in a fresh copy of the front buffer.
//! - **Memory.** A held snapshot keeps its buffer, with the objects later versions replaced,
//!   alive, and costs the writer one copy of the store's tables (not of the objects). Hold
//!   snapshots briefly when the store is written often; [`Store`] calls hold nothing after
//!   they return. A buffer's slab keeps room for the most objects it held at once (24 bytes
//!   per slot, reused by later adds and by `replace`) until deletes empty the store.
//!   Buffers are freed on the writer's thread, never as a side effect of a reader
//!   dropping a snapshot (see [`Writer`]).
//!
//! # resourceVersion
//!
//! Kept as a `u64` (an etcd revision on every real API server; parse strings with
//! [`crate::object::parse_resource_version`]). 0 means "none yet". It only moves forward
//! through `apply` and `bookmark`; `replace` sets it to the list's resourceVersion.

mod config;
mod error;
mod handoff;
mod index;
mod reader;
mod sync;
mod version;
mod writer;

pub use config::{DEFAULT_SHARDS, MAX_SHARDS, StoreConfig};
pub use error::{StoreError, WaitError};
pub use index::{
    IndexError, IndexFunc, IndexValues, LABELS_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, UID_INDEX,
    index_func, labels_index_func, namespace_index_func, owner_uid_index_func, uid_index_func,
};
pub use reader::{Snapshot, Store};
pub use writer::{Batch, Op, Writer};

use std::sync::Arc;

use index::IndexDef;
use version::{Hasher, Version};

/// Creates an empty store: the read handle (clone it freely) and its one writer.
///
/// # Examples
///
/// ```
/// use informer::store::{StoreConfig, store};
///
/// let (reader, mut writer) = store(StoreConfig::default());
/// writer.bookmark(10);
/// assert_eq!(reader.resource_version(), 10);
/// assert!(reader.is_empty());
/// ```
pub fn store(config: StoreConfig) -> (Store, Writer) {
    let defs: Arc<[IndexDef]> = config
        .indexers
        .into_iter()
        .map(|(name, func)| IndexDef::new(name, func))
        .collect();
    Writer::new(Version::empty(config.shards, Hasher::default(), defs))
}
