//! Candidate: per-shard copy-on-write hash maps behind one `ArcSwap`. A version is a table of
//! `Arc`s to shard maps (items in [`ITEM_SHARDS`] shards; each index in [`INDEX_SHARDS`]
//! shards of value → `Arc` sorted key list). A batch copies the table, then copies each shard
//! it touches once (`Arc::make_mut`) and changes the copy; a touched key list is copied too.
//! Readers load the table and look up: one version across all shards, like the store's
//! contract asks. A write costs the table copy plus a whole shard copy per touched shard.

use std::hash::BuildHasher;
use std::sync::Arc;

use arc_swap::ArcSwap;
use hashbrown::HashMap;
use informer::object::{Object, ObjectKey};
use informer::store::IndexFunc;

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

type Hasher = foldhash::fast::RandomState;

/// Item shards (about 100 objects per shard at 100 000 objects).
pub const ITEM_SHARDS: usize = 1024;
/// Shards of each index.
pub const INDEX_SHARDS: usize = 64;

type Items = HashMap<ObjectKey, Arc<Object>, Hasher>;
type Values = HashMap<Arc<str>, Arc<Vec<ObjectKey>>, Hasher>;

#[derive(Clone)]
struct Version {
    hasher: Hasher,
    items: Vec<Arc<Items>>,
    funcs: Arc<[(&'static str, IndexFunc)]>,
    indexes: Vec<Vec<Arc<Values>>>,
}

impl Version {
    fn shard(&self, key: &str, n: usize) -> usize {
        (((self.hasher.hash_one(key) >> 32) * n as u64) >> 32) as usize
    }

    fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.items[self.shard(key, ITEM_SHARDS)].get(key)
    }

    fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        let Some(pos) = self.funcs.iter().position(|(n, _)| *n == name) else {
            return Vec::new();
        };
        match self.indexes[pos][self.shard(value, INDEX_SHARDS)].get(value) {
            Some(keys) => keys
                .iter()
                .filter_map(|k| self.get(k.as_str()).cloned())
                .collect(),
            None => Vec::new(),
        }
    }

    fn index_remove(&mut self, pos: usize, value: &str, key: &ObjectKey) {
        let s = self.shard(value, INDEX_SHARDS);
        let shard = Arc::make_mut(&mut self.indexes[pos][s]);
        if let Some(keys) = shard.get_mut(value)
            && let Ok(at) = keys.binary_search(key)
        {
            if keys.len() == 1 {
                shard.remove(value);
            } else {
                Arc::make_mut(keys).remove(at);
            }
        }
    }

    fn index_add(&mut self, pos: usize, value: &str, key: &ObjectKey) {
        let s = self.shard(value, INDEX_SHARDS);
        let shard = Arc::make_mut(&mut self.indexes[pos][s]);
        match shard.get_mut(value) {
            Some(keys) => {
                if let Err(at) = keys.binary_search(key) {
                    Arc::make_mut(keys).insert(at, key.clone());
                }
            }
            None => {
                shard.insert(Arc::from(value), Arc::new(vec![key.clone()]));
            }
        }
    }

    fn upsert(&mut self, obj: Arc<Object>) {
        let key = obj.key();
        let s = self.shard(key.as_str(), ITEM_SHARDS);
        let old = Arc::make_mut(&mut self.items[s]).insert(key.clone(), obj.clone());
        let funcs = self.funcs.clone();
        for (pos, (_, func)) in funcs.iter().enumerate() {
            let new = func(&obj).unwrap_or_default();
            let gone = old
                .as_ref()
                .map(|o| func(o).unwrap_or_default())
                .unwrap_or_default();
            for v in gone.iter().filter(|v| !new.contains(v)) {
                self.index_remove(pos, v, &key);
            }
            for v in new.iter().filter(|v| !gone.contains(v)) {
                self.index_add(pos, v, &key);
            }
        }
    }
}

/// The store.
pub struct CowShards {
    current: ArcSwap<Version>,
}

impl CowShards {
    pub fn new(indexes: Indexes) -> Self {
        let hasher = Hasher::default();
        let funcs: Arc<[(&'static str, IndexFunc)]> = indexes.funcs().into();
        CowShards {
            current: ArcSwap::from_pointee(Version {
                items: (0..ITEM_SHARDS)
                    .map(|_| Arc::new(Items::with_hasher(hasher.clone())))
                    .collect(),
                indexes: funcs
                    .iter()
                    .map(|_| {
                        (0..INDEX_SHARDS)
                            .map(|_| Arc::new(Values::with_hasher(hasher.clone())))
                            .collect()
                    })
                    .collect(),
                hasher,
                funcs,
            }),
        }
    }

    /// Applies a batch as one version (one writer at a time).
    pub fn apply(&self, objs: impl IntoIterator<Item = Arc<Object>>) {
        let mut next = Version::clone(&self.current.load());
        for o in objs {
            next.upsert(o);
        }
        self.current.store(Arc::new(next));
    }

    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        self.current.load().get(key).cloned()
    }

    /// Calls `f` with the object under `key`, borrowed (no reference count touched).
    pub fn with<R>(&self, key: &str, f: impl FnOnce(&Arc<Object>) -> R) -> Option<R> {
        self.current.load().get(key).map(f)
    }

    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        self.current.load().by_index(name, value)
    }
}

struct Reader {
    store: Arc<CowShards>,
    keys: Vec<ObjectKey>,
    namespaces: Vec<String>,
}

impl ReadSide for Reader {
    fn get(&self, i: usize) -> bool {
        self.store.get(self.keys[i].as_str()).is_some()
    }

    fn peek(&self, i: usize) -> usize {
        self.store
            .with(self.keys[i].as_str(), |o| o.resource_version().len())
            .unwrap_or(0)
    }

    fn by_namespace(&self, ns: usize) -> usize {
        self.store.by_index("namespace", &self.namespaces[ns]).len()
    }
}

struct W(Arc<CowShards>);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        self.0.apply((pos..pos + n).map(|p| w.update(p).1.clone()));
    }
}

pub fn filled(w: &Workload, indexes: Indexes) -> Arc<CowShards> {
    let s = CowShards::new(indexes);
    s.apply(w.objects.iter().cloned());
    Arc::new(s)
}

/// The candidate's name in reports.
pub const NAME: &str = "per-shard copy-on-write";

pub fn build(w: &Arc<Workload>, indexes: Indexes) -> Candidate {
    let s = filled(w, indexes);
    Candidate {
        name: NAME,
        reader: Arc::new(Reader {
            store: s.clone(),
            keys: w.keys.clone(),
            namespaces: w.namespaces.clone(),
        }),
        writer: Box::new(W(s)),
    }
}
