//! [`ListCompactor`]: under [`Compression::Zstd`](super::Compression), a list's objects are
//! compacted as each page arrives, so a relist never holds the whole list uncompressed.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::object::{Compactor, Dictionary, MetaTails, Object};
use crate::store::Store;

use super::list_sampler::ListSampler;

/// Compacts listed objects on the reflector's thread once the informer has a dictionary.
/// Before that, listed objects are offered to the [`ListSampler`], which trains the first one;
/// they are compacted when the list ends if the dictionary is ready then
/// ([`compact_rest`](Self::compact_rest)), else by the processing thread when idle. A listed
/// object equal to the compact one the store holds (same uid, same resourceVersion, same
/// bytes) is replaced by the stored one: a relist then costs one decompression for unchanged
/// objects, and the DeltaFIFO's replace finds them unchanged.
///
/// It gets listed objects already transformed (and filtered): a stored twin is what the
/// transform made of the same object, and nothing is transformed twice.
pub(super) struct ListCompactor {
    store: Store,
    dictionary: Arc<ArcSwapOption<Dictionary>>,
    tails: MetaTails,
    compactor: Mutex<Option<Compactor>>,
    sampler: Option<Arc<ListSampler>>,
}

impl ListCompactor {
    pub(super) fn new(
        store: Store,
        dictionary: Arc<ArcSwapOption<Dictionary>>,
        tails: MetaTails,
        sampler: Option<Arc<ListSampler>>,
    ) -> Self {
        ListCompactor {
            store,
            dictionary,
            tails,
            compactor: Mutex::new(None),
            sampler,
        }
    }

    /// The list whose pages [`compact`](Self::compact) got has ended.
    pub(super) fn list_ended(&self) {
        if let Some(sampler) = &self.sampler {
            sampler.close();
        }
    }

    /// `items` in their compact form (each as it is where compaction fails: it is still
    /// listed, and the processing thread tries again).
    pub(super) fn compact(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        let Some(dict) = self.dictionary.load_full() else {
            if let Some(sampler) = &self.sampler {
                sampler.offer(&items);
            }
            return items;
        };
        self.compact_with(items, &dict)
    }

    /// The whole list at its end, with the items listed before the dictionary was ready (the
    /// first list's first pages, while it trained) compacted now, on the reflector's thread
    /// that decoded them. Their received forms are then freed on the thread that allocated
    /// them, whose allocator reuses or returns that memory at once; freed later by the
    /// processing thread, they left pages resident on the reflector's thread, idle once the
    /// list is in (mimalloc collects a thread's cross-thread frees when it allocates again).
    /// A list without such items, or without a dictionary yet, is returned as it is.
    pub(super) fn compact_rest(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        match self.dictionary.load_full() {
            Some(dict) if !items.iter().all(|o| compact_with(o, &dict)) => {
                self.compact_with(items, &dict)
            }
            _ => items,
        }
    }

    fn compact_with(&self, items: Vec<Arc<Object>>, dict: &Arc<Dictionary>) -> Vec<Arc<Object>> {
        // The stored twins first, under one snapshot released before any compression (a held
        // snapshot makes the processing thread's next write wait, then copy the tables).
        let twins: Vec<Option<Arc<Object>>> = {
            let snapshot = self.store.snapshot();
            items
                .iter()
                .map(|o| {
                    if compact_with(o, dict) {
                        return None;
                    }
                    snapshot
                        .get(o.key_ref())
                        .filter(|s| same_compact(s, o, dict))
                        .cloned()
                })
                .collect()
        };
        let mut slot = self
            .compactor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !slot
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c.dictionary(), dict))
        {
            *slot = Some(Compactor::with_tails(dict.clone(), self.tails.clone()));
        }
        let Some(compactor) = slot.as_mut() else {
            return items;
        };
        items
            .into_iter()
            .zip(twins)
            .map(|(o, twin)| match twin {
                Some(stored) => stored,
                None if compact_with(&o, dict) => o,
                None => match compactor.compact(&o) {
                    Ok(small) => Arc::new(small),
                    Err(_) => o,
                },
            })
            .collect()
    }
}

/// Whether `obj` is compressed with `dict` already.
fn compact_with(obj: &Object, dict: &Arc<Dictionary>) -> bool {
    obj.compressed_with().is_some_and(|d| Arc::ptr_eq(d, dict))
}

/// Whether `stored` is the compact form (with `dict`) of exactly `listed`: the same uid and
/// resourceVersion, and the same bytes (a resourceVersion alone is not enough: after an etcd
/// restore, or from an aggregated API server, one can name other content).
fn same_compact(stored: &Object, listed: &Object, dict: &Arc<Dictionary>) -> bool {
    !listed.resource_version().is_empty()
        && stored.resource_version() == listed.resource_version()
        && stored.uid() == listed.uid()
        && stored.raw_len() == listed.raw_len()
        && stored
            .compressed_with()
            .is_some_and(|d| Arc::ptr_eq(d, dict))
        && matches!(
            stored.with_raw(|s| listed.with_raw(|l| s == l)),
            Ok(Ok(true))
        )
}
