//! dashmap: items in one `DashMap`, each index a `DashMap<value, HashSet<key>>`. Per-shard
//! `RwLock`s inside; one call per object; a reader can see an index entry before or after the
//! item it names (no atomicity across maps or across a batch).

use std::collections::HashSet;
use std::sync::Arc;

use dashmap::DashMap;
use informer::object::{Object, ObjectKey};
use informer::store::IndexFunc;

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

type Hasher = foldhash::fast::RandomState;

/// Items and indexes, each a dashmap.
pub struct Dash {
    items: DashMap<ObjectKey, Arc<Object>, Hasher>,
    names: Vec<&'static str>,
    funcs: Vec<IndexFunc>,
    indexes: Vec<DashMap<String, HashSet<ObjectKey, Hasher>, Hasher>>,
}

impl Dash {
    pub fn new(indexes: Indexes) -> Self {
        let funcs = indexes.funcs();
        Dash {
            items: DashMap::default(),
            names: funcs.iter().map(|(n, _)| *n).collect(),
            indexes: funcs.iter().map(|_| DashMap::default()).collect(),
            funcs: funcs.into_iter().map(|(_, f)| f).collect(),
        }
    }

    pub fn upsert(&self, obj: Arc<Object>) {
        let key = obj.key();
        let old = self.items.insert(key.clone(), obj.clone());
        for (func, index) in self.funcs.iter().zip(&self.indexes) {
            let new = func(&obj).unwrap_or_default();
            let gone = old
                .as_ref()
                .map(|o| func(o).unwrap_or_default())
                .unwrap_or_default();
            for v in gone.iter().filter(|v| !new.contains(v)) {
                index.remove_if_mut(v.as_str(), |_, set| {
                    set.remove(&key);
                    set.is_empty()
                });
            }
            for v in new.into_iter().filter(|v| !gone.contains(v)) {
                index.entry(v).or_default().insert(key.clone());
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        self.items.get(key).map(|r| r.value().clone())
    }

    /// Calls `f` with the object under `key`, borrowed (no reference count touched).
    pub fn with<R>(&self, key: &str, f: impl FnOnce(&Arc<Object>) -> R) -> Option<R> {
        self.items.get(key).map(|r| f(r.value()))
    }

    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        let Some(pos) = self.names.iter().position(|n| *n == name) else {
            return Vec::new();
        };
        let keys: Vec<ObjectKey> = match self.indexes[pos].get(value) {
            Some(set) => set.iter().cloned().collect(),
            None => return Vec::new(),
        };
        keys.iter().filter_map(|k| self.get(k.as_str())).collect()
    }
}

struct Reader {
    map: Arc<Dash>,
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

    fn by_namespace(&self, ns: usize) -> usize {
        self.map.by_index("namespace", &self.namespaces[ns]).len()
    }
}

struct W(Arc<Dash>);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        for p in pos..pos + n {
            self.0.upsert(w.update(p).1.clone());
        }
    }
}

pub fn filled(w: &Workload, indexes: Indexes) -> Arc<Dash> {
    let map = Dash::new(indexes);
    for o in &w.objects {
        map.upsert(o.clone());
    }
    Arc::new(map)
}

/// The candidate's name in reports.
pub const NAME: &str = "dashmap";

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
