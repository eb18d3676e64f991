//! A port of client-go's `threadSafeMap` (`tools/cache/thread_safe_store.go`): one reader/
//! writer lock over the items map (string key → object) and the indices (index name → value →
//! set of string keys). Behaviour kept:
//! - `Update(key, obj)` takes the write lock per object, stores it, then for every indexer
//!   computes the old object's and the new object's values; when both are the same single
//!   value nothing is touched, else the key leaves every old value's set (an emptied set is
//!   deleted) and joins every new value's set;
//! - `ByIndex` takes the read lock, finds the value's key set and looks every key up in the
//!   items map, returning a freshly allocated list (in set order, not sorted);
//! - the lock is writer-preferring, like Go's `sync.RWMutex` (a waiting writer holds back new
//!   readers): `std::sync::RwLock` on Linux.
//!
//! Left out: the O(n) `checkNoNilInvariant` scans some client-go versions run on every call
//! (they would only make this baseline slower), and the panics on index errors.
//! Keys are `String`s built by the caller as `MetaNamespaceKeyFunc` does; Go hashes strings
//! with a fast AES-based hash, so the maps here use foldhash rather than SipHash.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use informer::object::Object;
use informer::store::IndexFunc;

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

type Hasher = foldhash::fast::RandomState;
type Set = HashSet<String, Hasher>;
type Index = HashMap<String, Set, Hasher>;

/// The map and its indices, behind one lock.
pub struct ThreadSafeMap {
    lock: RwLock<Inner>,
}

struct Inner {
    items: HashMap<String, Arc<Object>, Hasher>,
    indexers: Vec<(String, IndexFunc)>,
    indices: HashMap<String, Index, Hasher>,
}

impl Inner {
    fn update_single_index(
        &mut self,
        name: &str,
        func: &IndexFunc,
        old: Option<&Object>,
        new: Option<&Object>,
        key: &str,
    ) {
        let old_values = old.map(|o| func(o).unwrap_or_default()).unwrap_or_default();
        let new_values = new.map(|o| func(o).unwrap_or_default()).unwrap_or_default();
        let index = self.indices.entry(name.to_owned()).or_default();
        if old_values.len() == 1 && new_values.len() == 1 && old_values[0] == new_values[0] {
            return;
        }
        for v in &old_values {
            if let Some(set) = index.get_mut(v.as_str()) {
                set.remove(key);
                if set.is_empty() {
                    index.remove(v.as_str());
                }
            }
        }
        for v in new_values {
            index.entry(v).or_default().insert(key.to_owned());
        }
    }

    fn update_indices(&mut self, old: Option<&Object>, new: Option<&Object>, key: &str) {
        let indexers = std::mem::take(&mut self.indexers);
        for (name, func) in &indexers {
            self.update_single_index(name, func, old, new, key);
        }
        self.indexers = indexers;
    }
}

impl ThreadSafeMap {
    pub fn new(indexers: Vec<(String, IndexFunc)>) -> Self {
        ThreadSafeMap {
            lock: RwLock::new(Inner {
                items: HashMap::default(),
                indexers,
                indices: HashMap::default(),
            }),
        }
    }

    /// `Add` and `Update` (identical in client-go).
    pub fn update(&self, key: String, obj: Arc<Object>) {
        let mut c = self.lock.write().unwrap();
        let old = c.items.insert(key.clone(), obj.clone());
        c.update_indices(old.as_deref(), Some(&obj), &key);
    }

    pub fn delete(&self, key: &str) {
        let mut c = self.lock.write().unwrap();
        if let Some(old) = c.items.remove(key) {
            c.update_indices(Some(&old), None, key);
        }
    }

    /// Looks up every key under one read lock; how many were found (each cloned and dropped).
    pub fn get_all<'a>(&self, keys: impl Iterator<Item = &'a str>) -> usize {
        let c = self.lock.read().unwrap();
        keys.filter(|k| c.items.get(*k).cloned().is_some()).count()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        self.lock.read().unwrap().items.get(key).cloned()
    }

    /// Calls `f` with the object under `key`, borrowed (no reference count touched).
    pub fn with<R>(&self, key: &str, f: impl FnOnce(&Arc<Object>) -> R) -> Option<R> {
        self.lock.read().unwrap().items.get(key).map(f)
    }

    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Object>> {
        let c = self.lock.read().unwrap();
        let Some(set) = c.indices.get(index).and_then(|i| i.get(value)) else {
            return Vec::new();
        };
        let mut list = Vec::with_capacity(set.len());
        for k in set {
            if let Some(v) = c.items.get(k.as_str()) {
                list.push(v.clone());
            }
        }
        list
    }

    /// `Replace`: swap in a new items map and rebuild every index.
    pub fn replace(&self, items: HashMap<String, Arc<Object>, Hasher>) {
        let mut c = self.lock.write().unwrap();
        c.items = items;
        c.indices = HashMap::default();
        let all: Vec<(String, Arc<Object>)> = c
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in all {
            c.update_indices(None, Some(&v), &k);
        }
    }

    pub fn len(&self) -> usize {
        self.lock.read().unwrap().items.len()
    }
}

struct Reader {
    map: Arc<ThreadSafeMap>,
    keys: Vec<String>,
    namespaces: Vec<String>,
}

impl ReadSide for Reader {
    fn get(&self, i: usize) -> bool {
        self.map.get(&self.keys[i]).is_some()
    }

    fn peek(&self, i: usize) -> usize {
        self.map
            .with(&self.keys[i], |o| o.resource_version().len())
            .unwrap_or(0)
    }

    fn get_batch(&self, keys: &[usize]) -> usize {
        self.map
            .get_all(keys.iter().map(|&i| self.keys[i].as_str()))
    }

    fn by_namespace(&self, ns: usize) -> usize {
        self.map.by_index("namespace", &self.namespaces[ns]).len()
    }
}

struct W(Arc<ThreadSafeMap>);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        for p in pos..pos + n {
            let obj = w.update(p).1;
            // MetaNamespaceKeyFunc: the key string is built per call.
            self.0.update(obj.key().to_string(), obj.clone());
        }
    }
}

/// A filled map (through `Replace`, as a reflector's first list does).
pub fn filled(w: &Workload, indexes: Indexes) -> Arc<ThreadSafeMap> {
    let map = ThreadSafeMap::new(
        indexes
            .funcs()
            .into_iter()
            .map(|(n, f)| (n.to_owned(), f))
            .collect(),
    );
    map.replace(
        w.objects
            .iter()
            .map(|o| (o.key().to_string(), o.clone()))
            .collect(),
    );
    Arc::new(map)
}

/// The candidate's name in reports.
pub const NAME: &str = "client-go threadSafeMap port";

pub fn build(w: &Arc<Workload>, indexes: Indexes) -> Candidate {
    let map = filled(w, indexes);
    Candidate {
        name: NAME,
        reader: Arc::new(Reader {
            map: map.clone(),
            keys: w.keys.iter().map(|k| k.to_string()).collect(),
            namespaces: w.namespaces.clone(),
        }),
        writer: Box::new(W(map)),
    }
}
