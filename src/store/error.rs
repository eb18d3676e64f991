//! Store errors: one enum for index queries and writes, one for waiting on a resourceVersion.

use std::sync::Arc;

use crate::object::ObjectKey;

use super::index::IndexError;

/// Why a store read or write failed. A failed write changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No index of that name exists (client-go: `Index with name %s does not exist`).
    #[error("index {name:?} does not exist")]
    UnknownIndex {
        /// The name asked for.
        name: String,
    },
    /// An index function returned an error for an object. When writing, the whole batch,
    /// replace or index addition was rejected: items and indexes are as before the call.
    #[error("index {index:?} failed on object {key}")]
    IndexFunc {
        /// The index whose function failed.
        index: Arc<str>,
        /// The key of the object it failed on.
        key: ObjectKey,
        /// What the function said.
        #[source]
        source: IndexError,
    },
    /// [`Writer::add_indexers`](super::Writer::add_indexers) was given a name that is already
    /// an index of the store, or the same name twice (client-go: `indexer conflict`).
    #[error("index {name:?} already exists")]
    IndexExists {
        /// The conflicting name.
        name: String,
    },
}

/// Why [`Store::wait_for`](super::Store::wait_for) returned without the store reaching the
/// resourceVersion asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The timeout of [`Store::wait_for_blocking`](super::Store::wait_for_blocking) elapsed.
    #[error("timed out waiting for resourceVersion {wanted}; the store reflects {reached}")]
    Timeout {
        /// The resourceVersion waited for.
        wanted: u64,
        /// The resourceVersion the store reflected when the wait ended.
        reached: u64,
    },
    /// The [`Writer`](super::Writer) was dropped: the store will never advance.
    #[error(
        "store writer dropped while waiting for resourceVersion {wanted}; the store reflects {reached}"
    )]
    WriterDropped {
        /// The resourceVersion waited for.
        wanted: u64,
        /// The resourceVersion the store reflected when the writer went away.
        reached: u64,
    },
}
