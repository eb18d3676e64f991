//! Index functions and the key sets behind each index value (client-go `tools/cache/index.go`).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

use smallvec::{SmallVec, smallvec};

use crate::object::{Object, ObjectKey};

/// Name of the built-in namespace index (client-go `cache.NamespaceIndex`). Every store has it;
/// its values are object namespaces, `""` for cluster-scoped objects.
pub const NAMESPACE_INDEX: &str = "namespace";

/// Conventional name for [`labels_index_func`].
pub const LABELS_INDEX: &str = "labels";

/// Conventional name for [`owner_uid_index_func`].
pub const OWNER_UID_INDEX: &str = "owner-uid";

/// Conventional name for [`uid_index_func`].
pub const UID_INDEX: &str = "uid";

/// The values an [`IndexFunc`] returns for one object: zero or more strings, kept inline when
/// there are at most two (the common case: one namespace, one owner, one UID).
pub type IndexValues = SmallVec<[String; 2]>;

/// Maps an object to the values it is indexed under (client-go `IndexFunc`).
///
/// The function must be a pure function of the object: the store calls it again on the stored
/// object when that object is updated or deleted, to find the values to remove. Duplicate
/// values are ignored. An `Err` rejects the whole write that called it (see
/// [`Writer::apply`](super::Writer::apply)); it never panics the store.
pub type IndexFunc = Arc<dyn Fn(&Object) -> Result<IndexValues, IndexError> + Send + Sync>;

/// Wraps a closure as an [`IndexFunc`] (saves the `Arc::new` and the type annotations).
///
/// # Examples
///
/// ```
/// use informer::store::{IndexValues, index_func};
/// use smallvec::smallvec;
///
/// // Index pods by node name, kept here in a label for the example.
/// let by_node = index_func(|obj| {
///     Ok(obj.meta().labels.get("node").map(|n| smallvec![n.to_string()]).unwrap_or_default())
/// });
/// # let _ = by_node;
/// ```
pub fn index_func<F>(f: F) -> IndexFunc
where
    F: Fn(&Object) -> Result<IndexValues, IndexError> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// Why an [`IndexFunc`] could not index an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct IndexError {
    message: String,
}

impl IndexError {
    /// An error with a human-readable reason.
    pub fn new(message: impl Into<String>) -> Self {
        IndexError {
            message: message.into(),
        }
    }

    /// The reason given by the index function.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The provided index functions, built once: the store recognises them (by pointer) and skips
/// calling them when an update leaves their input unchanged (see [`Builtin`]).
struct Builtins {
    namespace: IndexFunc,
    labels: IndexFunc,
    owner_uid: IndexFunc,
    uid: IndexFunc,
}

fn builtins() -> &'static Builtins {
    static B: OnceLock<Builtins> = OnceLock::new();
    B.get_or_init(|| Builtins {
        namespace: index_func(|obj| Ok(smallvec![obj.namespace().to_owned()])),
        labels: index_func(|obj| {
            Ok(obj
                .meta()
                .labels
                .iter()
                .map(|(k, v)| {
                    let mut s = String::with_capacity(k.len() + 1 + v.len());
                    s.push_str(k);
                    s.push('=');
                    s.push_str(v);
                    s
                })
                .collect())
        }),
        owner_uid: index_func(|obj| {
            Ok(obj
                .meta()
                .owner_references
                .iter()
                .map(|o| o.uid.to_string())
                .collect())
        }),
        uid: index_func(|obj| {
            Ok(if obj.uid().is_empty() {
                SmallVec::new()
            } else {
                smallvec![obj.uid().to_owned()]
            })
        }),
    })
}

/// The namespace index (client-go `MetaNamespaceIndexFunc`): one value, the object's
/// namespace (`""` for cluster-scoped objects). Built into every store as [`NAMESPACE_INDEX`].
pub fn namespace_index_func() -> IndexFunc {
    builtins().namespace.clone()
}

/// Indexes by label: one value `key=value` per label of the object. Query objects with label
/// `app=web` with `by_index(LABELS_INDEX, "app=web")`.
pub fn labels_index_func() -> IndexFunc {
    builtins().labels.clone()
}

/// Indexes by owner: one value per `metadata.ownerReferences[].uid` (how controllers find the
/// objects they own, e.g. a ReplicaSet its Pods).
pub fn owner_uid_index_func() -> IndexFunc {
    builtins().owner_uid.clone()
}

/// Indexes by the object's own `metadata.uid` (no value when the UID is empty).
pub fn uid_index_func() -> IndexFunc {
    builtins().uid.clone()
}

/// Which provided index function an index uses, if any. The store never needs to call a
/// provided function to learn that an update leaves its values alone (it compares the inputs),
/// and provided functions never fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Namespace,
    Labels,
    OwnerUid,
    Uid,
    /// A caller's function: called on the old and the new object, may fail.
    Custom,
}

impl Builtin {
    fn of(func: &IndexFunc) -> Builtin {
        let b = builtins();
        if Arc::ptr_eq(func, &b.namespace) {
            Builtin::Namespace
        } else if Arc::ptr_eq(func, &b.labels) {
            Builtin::Labels
        } else if Arc::ptr_eq(func, &b.owner_uid) {
            Builtin::OwnerUid
        } else if Arc::ptr_eq(func, &b.uid) {
            Builtin::Uid
        } else {
            Builtin::Custom
        }
    }

    /// Whether the function is known to give `old` and `new`, stored under the same key, the
    /// same values.
    pub(crate) fn same_values(self, old: &Object, new: &Object) -> bool {
        match self {
            // Same key text `namespace/name` (or `name`) and same namespace length: the
            // namespaces are the same prefix of that text, without reading either.
            Builtin::Namespace => old.namespace().len() == new.namespace().len(),
            Builtin::Labels => old.meta().labels == new.meta().labels,
            Builtin::OwnerUid => old.meta().owner_references.iter().map(|o| &o.uid).eq(new
                .meta()
                .owner_references
                .iter()
                .map(|o| &o.uid)),
            Builtin::Uid => old.uid() == new.uid(),
            Builtin::Custom => false,
        }
    }
}

/// Sorts and deduplicates index values, so that old and new values can be merged in one pass.
pub(crate) fn normalize(mut values: IndexValues) -> IndexValues {
    if values.len() > 1 {
        values.sort_unstable();
        values.dedup();
    }
    values
}

/// One index definition: its name and function. Shared by every version of a store.
#[derive(Clone)]
pub(crate) struct IndexDef {
    pub(crate) name: Arc<str>,
    pub(crate) func: IndexFunc,
    pub(crate) builtin: Builtin,
}

impl IndexDef {
    pub(crate) fn new(name: impl Into<Arc<str>>, func: IndexFunc) -> Self {
        IndexDef {
            name: name.into(),
            builtin: Builtin::of(&func),
            func,
        }
    }
}

impl fmt::Debug for IndexDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexDef")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Sets above this many keys move to a B-tree.
const FEW_MAX: usize = 32;
/// B-tree sets at or below this many keys move back to a sorted vector (hysteresis, so that a
/// set oscillating around one size does not convert on every write).
const FEW_MIN: usize = 16;

/// The keys of the objects indexed under one value, sorted. Never empty: the value is removed
/// from its index when its last key goes.
///
/// Three shapes, because most index values hold one key (UID, owner) or a few (a small
/// namespace), and a B-tree node costs hundreds of bytes:
/// - `One`: a single key, no allocation beyond the key itself;
/// - `Few`: a sorted vector of at most [`FEW_MAX`] keys (insertion moves at most that many);
/// - `Many`: a B-tree set, O(log n) per insert/remove.
///
/// Keys are shared `Arc<str>`s: an index entry costs a pointer and a length, never a copy of the
/// key's text.
#[derive(Clone, Debug)]
pub(crate) enum KeySet {
    One(ObjectKey),
    Few(Vec<ObjectKey>),
    Many(BTreeSet<ObjectKey>),
}

impl KeySet {
    /// Adds `key` (no-op when present).
    pub(crate) fn insert(&mut self, key: &ObjectKey) {
        match self {
            KeySet::One(k) => match (*k).cmp(key) {
                std::cmp::Ordering::Equal => {}
                std::cmp::Ordering::Less => *self = KeySet::Few(vec![k.clone(), key.clone()]),
                std::cmp::Ordering::Greater => *self = KeySet::Few(vec![key.clone(), k.clone()]),
            },
            KeySet::Few(keys) => {
                let Err(pos) = keys.binary_search(key) else {
                    return;
                };
                if keys.len() < FEW_MAX {
                    keys.insert(pos, key.clone());
                } else {
                    let mut set: BTreeSet<ObjectKey> = std::mem::take(keys).into_iter().collect();
                    set.insert(key.clone());
                    *self = KeySet::Many(set);
                }
            }
            KeySet::Many(set) => {
                if !set.contains(key) {
                    set.insert(key.clone());
                }
            }
        }
    }

    /// Removes `key`; returns `true` when the set would now be empty, in which case `self` is
    /// left unchanged and the caller must drop the whole set.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> bool {
        match self {
            KeySet::One(k) => k == key,
            KeySet::Few(keys) => {
                let Ok(pos) = keys.binary_search(key) else {
                    return false;
                };
                if keys.len() == 2 {
                    *self = KeySet::One(keys[1 - pos].clone());
                } else {
                    keys.remove(pos);
                    if keys.capacity() > 2 * keys.len() + 4 {
                        keys.shrink_to_fit();
                    }
                }
                false
            }
            KeySet::Many(set) => {
                if set.len() == 1 {
                    return set.contains(key);
                }
                set.remove(key);
                if set.len() <= FEW_MIN {
                    let v: Vec<ObjectKey> = std::mem::take(set).into_iter().collect();
                    *self = KeySet::Few(v);
                }
                false
            }
        }
    }

    /// Whether `key` is in the set.
    pub(crate) fn contains(&self, key: &ObjectKey) -> bool {
        match self {
            KeySet::One(k) => k == key,
            KeySet::Few(keys) => keys.binary_search(key).is_ok(),
            KeySet::Many(set) => set.contains(key),
        }
    }

    /// Number of keys (at least 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            KeySet::One(_) => 1,
            KeySet::Few(keys) => keys.len(),
            KeySet::Many(set) => set.len(),
        }
    }

    /// The keys in ascending order.
    pub(crate) fn iter(&self) -> KeySetIter<'_> {
        match self {
            KeySet::One(k) => KeySetIter::Slice(std::slice::from_ref(k).iter()),
            KeySet::Few(keys) => KeySetIter::Slice(keys.iter()),
            KeySet::Many(set) => KeySetIter::Tree(set.iter()),
        }
    }
}

/// Iterator over a [`KeySet`], ascending.
pub(crate) enum KeySetIter<'a> {
    Slice(std::slice::Iter<'a, ObjectKey>),
    Tree(std::collections::btree_set::Iter<'a, ObjectKey>),
}

impl<'a> Iterator for KeySetIter<'a> {
    type Item = &'a ObjectKey;

    fn next(&mut self) -> Option<&'a ObjectKey> {
        match self {
            KeySetIter::Slice(it) => it.next(),
            KeySetIter::Tree(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: usize) -> ObjectKey {
        ObjectKey::from_raw(&format!("ns/k{i:03}"))
    }

    #[test]
    fn keyset_grows_and_shrinks_through_all_shapes() {
        let mut set = KeySet::One(k(50));
        let mut model = std::collections::BTreeSet::from([k(50)]);
        // Insert in a scrambled order up to 40 keys (passes One -> Few -> Many).
        for i in (0..40).map(|i| (i * 17) % 40) {
            set.insert(&k(i));
            set.insert(&k(i)); // idempotent
            model.insert(k(i));
            assert_eq!(
                set.iter().cloned().collect::<Vec<_>>(),
                model.iter().cloned().collect::<Vec<_>>()
            );
            assert_eq!(set.len(), model.len());
        }
        assert!(matches!(set, KeySet::Many(_)));
        assert!(!set.remove(&k(999)));
        let all: Vec<_> = model.iter().cloned().collect();
        for (n, key) in all.iter().enumerate() {
            let last = n + 1 == all.len();
            assert_eq!(set.remove(key), last);
            if !last {
                model.remove(key);
                assert!(!set.contains(key));
                assert_eq!(
                    set.iter().cloned().collect::<Vec<_>>(),
                    model.iter().cloned().collect::<Vec<_>>()
                );
            }
        }
        assert!(matches!(set, KeySet::One(_)));
    }

    #[test]
    fn normalize_sorts_and_dedups() {
        let v: IndexValues = smallvec!["b".into(), "a".into(), "b".into()];
        assert_eq!(normalize(v).as_slice(), ["a", "b"]);
    }
}
