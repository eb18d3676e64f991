//! [`ListCompactor`]: under [`Compression::Zstd`](super::Compression), a list's objects are
//! compacted as each page arrives, so a relist never holds the whole list uncompressed.

use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::object::{Compactor, Dictionary, Object};
use crate::store::Store;

/// Compacts listed objects on the reflector's thread once the informer has a dictionary
/// (before that, the first list arrives as it is and the processing thread compacts it when
/// idle). An object the store already holds compacted at the same resourceVersion is replaced
/// by the stored one (a relist then costs nothing for unchanged objects, and the DeltaFIFO's
/// replace finds them unchanged).
pub(super) struct ListCompactor {
    store: Store,
    dictionary: Arc<ArcSwapOption<Dictionary>>,
    compactor: Mutex<Option<Compactor>>,
}

impl ListCompactor {
    pub(super) fn new(store: Store, dictionary: Arc<ArcSwapOption<Dictionary>>) -> Self {
        ListCompactor {
            store,
            dictionary,
            compactor: Mutex::new(None),
        }
    }

    /// `items` in their compact form (each as it is where compaction fails: it is still
    /// listed, and the processing thread tries again).
    pub(super) fn compact(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        let Some(dict) = self.dictionary.load_full() else {
            return items;
        };
        let mut slot = self
            .compactor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !slot
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c.dictionary(), &dict))
        {
            *slot = Some(Compactor::new(dict.clone()));
        }
        let Some(compactor) = slot.as_mut() else {
            return items;
        };
        let snapshot = self.store.snapshot();
        items
            .into_iter()
            .map(|o| {
                if let Some(stored) = snapshot.get(o.key_ref()) {
                    let same = !o.resource_version().is_empty()
                        && stored.resource_version() == o.resource_version()
                        && stored
                            .compressed_with()
                            .is_some_and(|d| Arc::ptr_eq(d, &dict));
                    if same {
                        return stored.clone();
                    }
                }
                match compactor.compact(&o) {
                    Ok(small) => Arc::new(small),
                    Err(_) => o,
                }
            })
            .collect()
    }
}
