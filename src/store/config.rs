//! [`StoreConfig`]: shard count and the indexes a store starts with.

use std::fmt;

use super::index::{IndexFunc, NAMESPACE_INDEX, namespace_index_func};

/// Default number of shards: enough that a batch of a few hundred changes touches disjoint
/// parts of the store, few enough that cloning a version's shard table stays a few dozen
/// pointer copies. Measured choices belong in `BENCHMARKS.md`.
pub const DEFAULT_SHARDS: usize = 16;

/// Upper bound on the shard count (larger requests are clamped).
pub const MAX_SHARDS: usize = 4096;

/// How to build a store with [`store`](super::store).
///
/// # Examples
///
/// ```
/// use informer::store::{LABELS_INDEX, StoreConfig, labels_index_func, store};
///
/// let (reader, _writer) = store(
///     StoreConfig::default()
///         .shards(64)
///         .indexer(LABELS_INDEX, labels_index_func()),
/// );
/// assert_eq!(reader.index_names(), ["namespace", "labels"]);
/// ```
#[derive(Clone)]
pub struct StoreConfig {
    pub(crate) shards: usize,
    pub(crate) indexers: Vec<(String, IndexFunc)>,
}

impl Default for StoreConfig {
    /// [`DEFAULT_SHARDS`] shards and the built-in [`NAMESPACE_INDEX`].
    fn default() -> Self {
        StoreConfig {
            shards: DEFAULT_SHARDS,
            indexers: vec![(NAMESPACE_INDEX.to_owned(), namespace_index_func())],
        }
    }
}

impl StoreConfig {
    /// Same as [`StoreConfig::default`].
    pub fn new() -> Self {
        StoreConfig::default()
    }

    /// Number of shards keys hash to; clamped to `1..=MAX_SHARDS`. Any value works (no power
    /// of two needed).
    #[must_use]
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(1, MAX_SHARDS);
        self
    }

    /// Adds an index present from the start. A name given again replaces the earlier function
    /// (including the built-in `namespace` one).
    #[must_use]
    pub fn indexer(mut self, name: &str, func: IndexFunc) -> Self {
        match self.indexers.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = func,
            None => self.indexers.push((name.to_owned(), func)),
        }
        self
    }

    /// Removes every index, the built-in [`NAMESPACE_INDEX`] included: a store without
    /// indexes (then `by_index` answers [`StoreError::UnknownIndex`](super::StoreError) for
    /// every name). Indexes added after this call, or later with
    /// [`Writer::add_indexers`](super::Writer::add_indexers), are kept.
    #[must_use]
    pub fn without_indexers(mut self) -> Self {
        self.indexers.clear();
        self
    }

    /// The configured shard count.
    pub fn shard_count(&self) -> usize {
        self.shards
    }
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("shards", &self.shards)
            .field(
                "indexers",
                &self.indexers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}
