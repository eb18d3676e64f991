//! The store: client-go's `Indexer`/`ThreadSafeStore` (`tools/cache/thread_safe_store.go`,
//! `tools/cache/index.go`, `tools/cache/store.go`) as a sharded, snapshot-versioned map with
//! lock-free readers.
//!
//! [`store`] returns a [`Store`] read handle (clone it freely, use it from any thread) and the
//! one [`Writer`] (the informer), which applies [`WriteBatch`]es. Objects are kept as
//! `Arc<Object>`: a reader gets the allocation the writer stored. Indexes: the built-in
//! [`NAMESPACE_INDEX`], the provided [`labels_index_func`], [`owner_uid_index_func`] and
//! [`uid_index_func`], or any [`IndexFunc`].
//!
//! # Consistency
//!
//! - Reads take no lock and never wait for the writer, but for two waits of a few
//!   instructions: a thread's first point read registers its hazard slots under a lock, and a
//!   counted read (a snapshot, `list`, an index read) that falls between the two stores of a
//!   publish waits for the second.
//! - Every [`Writer`] call publishes at most one version: a reader sees a batch whole or not at
//!   all, across all shards and indexes.
//! - Each [`Store`] call reads the latest version on its own (two calls may see two versions);
//!   a [`Snapshot`] pins one version, with its [`resource_version`](Snapshot::resource_version).
//! - A version is visible to every reader once the writer's call returns. The store is as
//!   stale as the informer feeding it: [`Store::resource_version`] says how stale, and
//!   [`Store::wait_for`] waits until it reflects a given resourceVersion.
//! - A failed write publishes nothing ([`StoreError::IndexFunc`]; client-go panics).
//!
//! resourceVersions are `u64`s (an etcd revision on every real API server; parse strings with
//! [`crate::object::parse_resource_version`]), 0 meaning "none yet". Only `apply` and
//! `bookmark` move it, and only forward; `replace` sets it to the list's.

mod batch;
mod config;
mod error;
mod handoff;
mod hazard;
mod index;
mod lookup;
mod reader;
mod slot_set;
mod sync;
mod version;
mod writer;

pub use batch::{Op, WriteBatch};
pub use config::{DEFAULT_SHARDS, MAX_SHARDS, StoreConfig};
pub use error::{StoreError, WaitError};
pub use index::{
    IndexError, IndexFunc, IndexValues, LABELS_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, UID_INDEX,
    index_func, labels_index_func, namespace_index_func, owner_uid_index_func, uid_index_func,
};
pub use lookup::LookupKey;
pub use reader::{Snapshot, Store};
pub use writer::Writer;

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
