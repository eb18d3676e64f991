//! The store's previous design, kept here as a candidate: a line of immutable versions, each S
//! shards of imbl persistent hash maps (HAMT) plus persistent index maps (value → key set),
//! published through one `ArcSwap`. A batch clones the current version (S + indexes pointer
//! copies), changes the clone (path copying: every touched HAMT node is copied, which clones
//! every entry in it: two reference-count increments per sibling entry) and swaps it in.
//! Snapshots are free (an `Arc` of the version); writes are O(batch × log n) node copies.

use std::hash::BuildHasher;
use std::sync::Arc;

use arc_swap::ArcSwap;
use imbl::shared_ptr::DefaultSharedPtr;
use imbl::{GenericHashMap, OrdSet};
use informer::object::{Object, ObjectKey};
use informer::store::{IndexFunc, IndexValues};

use super::{Candidate, Indexes, ReadSide, Workload, WriteSide};

type Hasher = foldhash::fast::RandomState;
type ItemMap = GenericHashMap<ObjectKey, Arc<Object>, Hasher, DefaultSharedPtr>;
type ValueMap = GenericHashMap<Arc<str>, KeySet, Hasher, DefaultSharedPtr>;

const FEW_MAX: usize = 16;
const FEW_MIN: usize = 8;

#[derive(Clone)]
enum KeySet {
    One(ObjectKey),
    Few(Arc<[ObjectKey]>),
    Many(OrdSet<ObjectKey>),
}

impl KeySet {
    fn insert(&mut self, key: &ObjectKey) {
        match self {
            KeySet::One(k) => {
                if k != key {
                    let mut v = vec![k.clone(), key.clone()];
                    v.sort();
                    *self = KeySet::Few(v.into());
                }
            }
            KeySet::Few(keys) => {
                let Err(pos) = keys.binary_search(key) else {
                    return;
                };
                if keys.len() < FEW_MAX {
                    let mut v = keys.to_vec();
                    v.insert(pos, key.clone());
                    *keys = v.into();
                } else {
                    let mut set: OrdSet<ObjectKey> = keys.iter().cloned().collect();
                    set.insert(key.clone());
                    *self = KeySet::Many(set);
                }
            }
            KeySet::Many(set) => {
                set.insert(key.clone());
            }
        }
    }

    /// `true` when the set would become empty (left unchanged).
    fn remove(&mut self, key: &ObjectKey) -> bool {
        match self {
            KeySet::One(k) => k == key,
            KeySet::Few(keys) => {
                let Ok(pos) = keys.binary_search(key) else {
                    return false;
                };
                if keys.len() == 2 {
                    *self = KeySet::One(keys[1 - pos].clone());
                } else {
                    let mut v = keys.to_vec();
                    v.remove(pos);
                    *keys = v.into();
                }
                false
            }
            KeySet::Many(set) => {
                set.remove(key);
                if set.len() <= FEW_MIN {
                    *self = KeySet::Few(set.iter().cloned().collect::<Vec<_>>().into());
                }
                false
            }
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = &ObjectKey> + '_> {
        match self {
            KeySet::One(k) => Box::new(std::iter::once(k)),
            KeySet::Few(keys) => Box::new(keys.iter()),
            KeySet::Many(set) => Box::new(set.iter()),
        }
    }
}

#[derive(Clone)]
struct Version {
    hasher: Hasher,
    shards: Box<[ItemMap]>,
    funcs: Arc<[(&'static str, IndexFunc)]>,
    indexes: Box<[ValueMap]>,
}

fn norm(mut v: IndexValues) -> IndexValues {
    v.sort_unstable();
    v.dedup();
    v
}

impl Version {
    fn shard_of(&self, key: &str) -> usize {
        let n = self.shards.len();
        (((self.hasher.hash_one(key) >> 32) * n as u64) >> 32) as usize
    }

    fn get(&self, key: &str) -> Option<&Arc<Object>> {
        self.shards[self.shard_of(key)].get(key)
    }

    fn by_index(&self, name: &str, value: &str) -> Vec<Arc<Object>> {
        let Some(pos) = self.funcs.iter().position(|(n, _)| *n == name) else {
            return Vec::new();
        };
        match self.indexes[pos].get(value) {
            Some(set) => set
                .iter()
                .filter_map(|k| self.get(k.as_str()).cloned())
                .collect(),
            None => Vec::new(),
        }
    }

    fn upsert(&mut self, obj: Arc<Object>) {
        let key = obj.key();
        let shard = self.shard_of(key.as_str());
        let old = self.shards[shard].get(key.as_str()).cloned();
        for (i, (_, func)) in self.funcs.iter().enumerate() {
            let map = &mut self.indexes[i];
            let new = norm(func(&obj).unwrap_or_default());
            let gone = old
                .as_ref()
                .map(|o| norm(func(o).unwrap_or_default()))
                .unwrap_or_default();
            for v in gone.iter().filter(|v| !new.contains(v)) {
                // Look first: `get_mut` copies the path even when nothing changes.
                if map.get(v.as_str()).is_some() {
                    let empty = map
                        .get_mut(v.as_str())
                        .map(|s| s.remove(&key))
                        .unwrap_or(false);
                    if empty {
                        map.remove(v.as_str());
                    }
                }
            }
            for v in new.iter().filter(|v| !gone.contains(v)) {
                match map.get_mut(v.as_str()) {
                    Some(set) => set.insert(&key),
                    None => {
                        map.insert(Arc::from(v.as_str()), KeySet::One(key.clone()));
                    }
                }
            }
        }
        self.shards[shard].insert(key, obj);
    }
}

/// The store: readers load the current version; the writer builds the next one.
pub struct ImblStore {
    current: ArcSwap<Version>,
}

impl ImblStore {
    pub fn new(indexes: Indexes, shards: usize) -> Self {
        let hasher = Hasher::default();
        let funcs: Arc<[(&'static str, IndexFunc)]> = indexes.funcs().into();
        ImblStore {
            current: ArcSwap::from_pointee(Version {
                shards: (0..shards)
                    .map(|_| ItemMap::with_hasher(hasher.clone()))
                    .collect(),
                indexes: funcs
                    .iter()
                    .map(|_| ValueMap::with_hasher(hasher.clone()))
                    .collect(),
                hasher,
                funcs,
            }),
        }
    }

    /// Applies a batch as one version (the writer's side; one writer at a time).
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
    store: Arc<ImblStore>,
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

struct W(Arc<ImblStore>);

impl WriteSide for W {
    fn write(&mut self, w: &Workload, pos: usize, n: usize) {
        self.0.apply((pos..pos + n).map(|p| w.update(p).1.clone()));
    }
}

pub fn filled(w: &Workload, indexes: Indexes) -> Arc<ImblStore> {
    let s = ImblStore::new(indexes, 16);
    s.apply(w.objects.iter().cloned());
    Arc::new(s)
}

/// The candidate's name in reports.
pub const NAME: &str = "imbl HAMT versions (previous)";

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
