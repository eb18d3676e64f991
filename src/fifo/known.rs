//! [`KnownObjects`]: the queue's view of what the consumer has already applied (client-go
//! `KeyListerGetter`, the `knownObjects` of `tools/cache/delta_fifo.go`).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, RwLock};

use crate::object::{Object, ObjectKey};

/// Read access to the objects the queue's consumer has already applied: in an informer, the
/// store. [`DeltaFifo`](super::DeltaFifo) asks it which keys exist when it detects deletions in
/// [`replace`](super::DeltaFifo::replace), decides whether a
/// [`delete`](super::DeltaFifo::delete) is relevant, and lists what to
/// [`resync`](super::DeltaFifo::resync).
///
/// The queue calls these methods while holding its own lock, so an implementation must not call
/// back into the queue. They should be cheap snapshot reads.
pub trait KnownObjects: Send + Sync {
    /// Every key currently known, in any order.
    fn list_keys(&self) -> Vec<ObjectKey>;

    /// The object currently known under `key`.
    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>>;
}

impl<S: BuildHasher + Send + Sync> KnownObjects for HashMap<ObjectKey, Arc<Object>, S> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.keys().cloned().collect()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        HashMap::get(self, key).cloned()
    }
}

impl KnownObjects for BTreeMap<ObjectKey, Arc<Object>> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.keys().cloned().collect()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        BTreeMap::get(self, key).cloned()
    }
}

/// For tests and simple consumers that apply deltas to a locked map. A poisoned lock is read
/// through (the map itself is still consistent: every write is a single insert or remove).
impl<T: KnownObjects> KnownObjects for Mutex<T> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.lock().unwrap_or_else(|e| e.into_inner()).list_keys()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.lock().unwrap_or_else(|e| e.into_inner()).get(key)
    }
}

/// As for `Mutex<T>`.
impl<T: KnownObjects> KnownObjects for RwLock<T> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.read().unwrap_or_else(|e| e.into_inner()).list_keys()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.read().unwrap_or_else(|e| e.into_inner()).get(key)
    }
}

impl<T: KnownObjects + ?Sized> KnownObjects for Arc<T> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        (**self).list_keys()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        (**self).get(key)
    }
}
