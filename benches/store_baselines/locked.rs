//! The obvious Rust design: `parking_lot::RwLock` over a `HashMap` of items and the index maps
//! (value → set of keys), a batch applied under one write lock. Keys are the shared
//! `ObjectKey`s; index maintenance touches only the values that changed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use informer::object::{Object, ObjectKey};
use informer::store::IndexFunc;
use parking_lot::RwLock;

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

type Hasher = foldhash::fast::RandomState;

/// Items and indexes under one lock.
pub struct Locked {
    inner: RwLock<Inner>,
}

struct Inner {
    items: HashMap<ObjectKey, Arc<Object>, Hasher>,
    funcs: Vec<IndexFunc>,
    names: Vec<&'static str>,
    indexes: Vec<HashMap<String, HashSet<ObjectKey, Hasher>, Hasher>>,
}

impl Inner {
    fn upsert(&mut self, obj: Arc<Object>) {
        let key = obj.key();
        let old = self.items.insert(key.clone(), obj.clone());
        for (func, index) in self.funcs.iter().zip(self.indexes.iter_mut()) {
            let mut new = func(&obj).unwrap_or_default();
            new.sort_unstable();
            let mut gone = old
                .as_ref()
                .map(|o| func(o).unwrap_or_default())
                .unwrap_or_default();
            gone.sort_unstable();
            for v in gone.iter().filter(|v| !new.contains(v)) {
                if let Some(set) = index.get_mut(v.as_str()) {
                    set.remove(&key);
                    if set.is_empty() {
                        index.remove(v.as_str());
                    }
                }
            }
            for v in new.into_iter().filter(|v| !gone.contains(v)) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
    }
}

impl Locked {
    pub fn new(indexes: Indexes) -> Self {
        let funcs = indexes.funcs();
        Locked {
            inner: RwLock::new(Inner {
                items: HashMap::default(),
                names: funcs.iter().map(|(n, _)| *n).collect(),
                indexes: funcs.iter().map(|_| HashMap::default()).collect(),
                funcs: funcs.into_iter().map(|(_, f)| f).collect(),
            }),
        }
    }

    pub fn apply(&self, objs: impl IntoIterator<Item = Arc<Object>>) {
        let mut inner = self.inner.write();
        for o in objs {
            inner.upsert(o);
        }
    }

    /// Looks up every key under one read guard; how many were found (each cloned and dropped).
    pub fn get_all<'a>(&self, keys: impl Iterator<Item = &'a str>) -> usize {
        let inner = self.inner.read();
        keys.filter(|k| inner.items.get(*k).cloned().is_some())
            .count()
    }

    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Calls `f` with the object under `key`, borrowed (no reference count touched).
    pub fn with<R>(&self, key: &str, f: impl FnOnce(&Arc<Object>) -> R) -> Option<R> {
        self.inner.read().items.get(key).map(f)
    }

    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        let inner = self.inner.read();
        let Some(pos) = inner.names.iter().position(|n| *n == name) else {
            return Vec::new();
        };
        let Some(set) = inner.indexes[pos].get(value) else {
            return Vec::new();
        };
        set.iter()
            .filter_map(|k| inner.items.get(k).cloned())
            .collect()
    }
}

struct Reader {
    map: Arc<Locked>,
    keys: Vec<ObjectKey>,
    namespaces: Vec<String>,
}

impl ReadSide for Reader {
    fn get(&self, i: usize) -> bool {
        self.map.get(self.keys[i].as_str()).is_some()
    }

    fn peek(&self, i: usize) -> usize {
        self.map
            .with(self.keys[i].as_str(), |o| o.resource_version().len())
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

struct W(Arc<Locked>);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        self.0.apply((pos..pos + n).map(|p| w.update(p).1.clone()));
    }
}

pub fn filled(w: &Workload, indexes: Indexes) -> Arc<Locked> {
    let map = Locked::new(indexes);
    map.apply(w.objects.iter().cloned());
    Arc::new(map)
}

/// The candidate's name in reports.
pub const NAME: &str = "parking_lot RwLock<HashMap>";

pub fn build(w: &Arc<Workload>, indexes: Indexes) -> Candidate {
    let map = filled(w, indexes);
    Candidate {
        name: NAME,
        reader: Arc::new(Reader {
            map: map.clone(),
            keys: w.keys.clone(),
            namespaces: w.namespaces.clone(),
        }),
        writer: Box::new(W(map)),
    }
}
