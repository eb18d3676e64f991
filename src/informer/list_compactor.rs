//! [`ListCompactor`]: under [`Compression::Zstd`](super::Compression), a list's objects are
//! compacted as each page arrives, so a relist never holds the whole list uncompressed.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::object::{Compactor, Dictionary, MetaTails, Object};
use crate::store::Store;

use super::list_sampler::ListSampler;

/// Compacts listed objects on the reflector's thread once the informer has a dictionary
/// (before that, listed objects are offered to the [`ListSampler`], which trains the first
/// one, and they arrive as they are: the processing thread compacts them when idle). A listed object equal to the compact one the store holds (same uid, same
/// resourceVersion, same bytes) is replaced by the stored one: a relist then costs one
/// decompression for unchanged objects, and the DeltaFIFO's replace finds them unchanged.
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
        // The stored twins first, under one snapshot released before any compression (a held
        // snapshot makes the processing thread's next write wait, then copy the tables).
        let twins: Vec<Option<Arc<Object>>> = {
            let snapshot = self.store.snapshot();
            items
                .iter()
                .map(|o| {
                    snapshot
                        .get(o.key_ref())
                        .filter(|s| same_compact(s, o, &dict))
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
            .is_some_and(|c| Arc::ptr_eq(c.dictionary(), &dict))
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
                None => match compactor.compact(&o) {
                    Ok(small) => Arc::new(small),
                    Err(_) => o,
                },
            })
            .collect()
    }
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
