//! Index functions and the key sets behind each index value (client-go `tools/cache/index.go`).

use std::collections::BTreeMap;
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

    /// Touches the start of what [`Builtin::same_values`] reads of `obj` (the fields this index
    /// is computed from: the namespace's length, the first and last labels, the first owner's
    /// UID, the UID) and returns something of it: a read-ahead, so that the cache misses of
    /// several objects overlap (see `Version::warm`).
    pub(crate) fn touch(self, obj: &Object) -> usize {
        match self {
            Builtin::Namespace => obj.namespace().len(),
            Builtin::Labels => {
                let labels = &obj.meta().labels;
                let mut it = labels.iter();
                match (it.next(), it.next_back()) {
                    (Some((k, v)), Some((k2, v2))) => first(k) ^ first(v) ^ first(k2) ^ first(v2),
                    (Some((k, v)), None) => first(k) ^ first(v),
                    _ => labels.len(),
                }
            }
            Builtin::OwnerUid => obj
                .meta()
                .owner_references
                .first()
                .map_or(0, |o| first(&o.uid)),
            Builtin::Uid => first(obj.uid()),
            Builtin::Custom => 0,
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

/// The first byte of `s` (0 when empty): a read of its text, for read-ahead passes.
pub(crate) fn first(s: &str) -> usize {
    s.as_bytes().first().map_or(0, |&b| usize::from(b))
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

/// Position of an item in a store buffer's slab (see `version.rs`): the same number in both
/// buffers of a store, so index entries and logged changes name items by it.
pub(crate) type Slot = u32;

/// Sets above this many slots move to a B-tree.
const FEW_MAX: usize = 256;
/// B-tree sets at or below this many slots move back to a sorted vector (hysteresis, so that a
/// set oscillating around one size does not convert on every write).
const FEW_MIN: usize = 128;

/// The items indexed under one value, as slots sorted by their items' keys. Never empty: the
/// value is removed from its index when its last item goes.
///
/// Three shapes, because most index values hold one item (UID, owner) or a few hundred at most
/// (a namespace), and a B-tree node costs hundreds of bytes:
/// - `One`: a single slot, no allocation;
/// - `Few`: a vector of at most [`FEW_MAX`] slots in key order (4 bytes each; an insertion
///   finds its place by binary search over the items' keys and moves at most that many);
/// - `Many`: a B-tree from key to slot, O(log n) per insert/remove.
///
/// Reading a set never touches a key: `by_index` goes from slot to object directly. Methods
/// that need keys take `key_of`, the buffer's slot → key lookup.
#[derive(Clone, Debug)]
pub(crate) enum SlotSet {
    One(Slot),
    Few(Vec<Slot>),
    Many(BTreeMap<ObjectKey, Slot>),
}

/// No position to report or to use as a hint (a `Many` set, or nothing changed).
pub(crate) const NO_POS: u32 = u32::MAX;

impl SlotSet {
    /// Adds `slot`, whose item's key is `key` (no-op when present). `hint` is where the same
    /// insertion went in an identical set (from the other buffer's log) together with that
    /// set's length before it, or `None`. Returns the position and the length before, to log
    /// as the hint for the other buffer (`(NO_POS, 0)` when there is none).
    pub(crate) fn insert<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        hint: Option<(u32, u32)>,
        key_of: impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> (u32, u32) {
        match self {
            SlotSet::One(s) => {
                if *s == slot {
                    return (NO_POS, 0);
                }
                let (v, pos) = if key_of(*s) < Some(key) {
                    (vec![*s, slot], 1)
                } else {
                    (vec![slot, *s], 0)
                };
                *self = SlotSet::Few(v);
                (pos, 1)
            }
            SlotSet::Few(slots) => {
                let len = slots.len();
                let pos = match hint {
                    Some((pos, hint_len)) if hint_len as usize == len && (pos as usize) <= len => {
                        pos as usize
                    }
                    _ => {
                        let Err(pos) = slots.binary_search_by(|&s| key_of(s).cmp(&Some(key)))
                        else {
                            return (NO_POS, 0);
                        };
                        pos
                    }
                };
                if len < FEW_MAX {
                    slots.insert(pos, slot);
                    (pos as u32, len as u32)
                } else {
                    let mut map: BTreeMap<ObjectKey, Slot> = slots
                        .iter()
                        .filter_map(|&s| key_of(s).map(|k| (k.clone(), s)))
                        .collect();
                    map.insert(key.clone(), slot);
                    *self = SlotSet::Many(map);
                    (NO_POS, 0)
                }
            }
            SlotSet::Many(map) => {
                if !map.contains_key(key) {
                    map.insert(key.clone(), slot);
                }
                (NO_POS, 0)
            }
        }
    }

    /// Removes `slot` (whose item's key is `key`). `hint` is the position the same slot had in
    /// an identical set, or [`NO_POS`]. Returns the position it had (to log as the other
    /// buffer's hint; [`NO_POS`] for a `Many` set or when absent) and whether the set would now
    /// be empty, in which case `self` is left unchanged and the caller must drop the whole set.
    pub(crate) fn remove(&mut self, slot: Slot, key: &ObjectKey, hint: u32) -> (u32, bool) {
        match self {
            SlotSet::One(s) => (NO_POS, *s == slot),
            SlotSet::Few(slots) => {
                let pos = match slots.get(hint as usize) {
                    Some(&s) if s == slot => hint as usize,
                    _ => match slots.iter().position(|&s| s == slot) {
                        Some(pos) => pos,
                        None => return (NO_POS, false),
                    },
                };
                if slots.len() == 2 {
                    *self = SlotSet::One(slots[1 - pos]);
                } else {
                    slots.remove(pos);
                    if slots.capacity() > 2 * slots.len() + 4 {
                        slots.shrink_to_fit();
                    }
                }
                (pos as u32, false)
            }
            SlotSet::Many(map) => {
                if map.get(key) != Some(&slot) {
                    return (NO_POS, false);
                }
                if map.len() == 1 {
                    return (NO_POS, true);
                }
                map.remove(key);
                if map.len() <= FEW_MIN {
                    let slots: Vec<Slot> = std::mem::take(map).into_values().collect();
                    *self = SlotSet::Few(slots);
                }
                (NO_POS, false)
            }
        }
    }

    /// Whether `slot` (whose item's key is `key`) is in the set.
    pub(crate) fn contains(&self, slot: Slot, key: &ObjectKey) -> bool {
        match self {
            SlotSet::One(s) => *s == slot,
            SlotSet::Few(slots) => slots.contains(&slot),
            SlotSet::Many(map) => map.get(key) == Some(&slot),
        }
    }

    /// Number of slots (at least 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            SlotSet::One(_) => 1,
            SlotSet::Few(slots) => slots.len(),
            SlotSet::Many(map) => map.len(),
        }
    }

    /// The slots in ascending key order.
    pub(crate) fn iter(&self) -> SlotSetIter<'_> {
        match self {
            SlotSet::One(s) => SlotSetIter::Slice(std::slice::from_ref(s).iter()),
            SlotSet::Few(slots) => SlotSetIter::Slice(slots.iter()),
            SlotSet::Many(map) => SlotSetIter::Tree(map.values()),
        }
    }
}

/// Iterator over a [`SlotSet`], in key order.
pub(crate) enum SlotSetIter<'a> {
    Slice(std::slice::Iter<'a, Slot>),
    Tree(std::collections::btree_map::Values<'a, ObjectKey, Slot>),
}

impl Iterator for SlotSetIter<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        match self {
            SlotSetIter::Slice(it) => it.next().copied(),
            SlotSetIter::Tree(it) => it.next().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: usize) -> ObjectKey {
        ObjectKey::from_raw(&format!("ns/k{i:04}"))
    }

    #[test]
    fn slotset_grows_and_shrinks_through_all_shapes() {
        // Slot i holds key k(perm(i)): slot order differs from key order.
        let n = 600;
        let keys: Vec<ObjectKey> = (0..n).map(|i| k((i * 7919) % n)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let mut set = SlotSet::One(0);
        let mut model = std::collections::BTreeMap::from([(keys[0].clone(), 0u32)]);
        let mut seen_many = false;
        for i in (1..n).map(|i| ((i * 17) % (n - 1)) + 1) {
            let s = i as Slot;
            set.insert(s, &keys[i], None, key_of);
            set.insert(s, &keys[i], None, key_of); // idempotent
            model.insert(keys[i].clone(), s);
            seen_many |= matches!(set, SlotSet::Many(_));
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                model.values().copied().collect::<Vec<_>>()
            );
            assert_eq!(set.len(), model.len());
        }
        assert!(seen_many);
        assert_eq!(set.remove(9999, &k(9999), NO_POS), (NO_POS, false));
        let all: Vec<(ObjectKey, Slot)> = model.iter().map(|(k, &s)| (k.clone(), s)).collect();
        for (n, (key, s)) in all.iter().enumerate() {
            let last = n + 1 == all.len();
            assert_eq!(set.remove(*s, key, NO_POS).1, last);
            if !last {
                model.remove(key);
                assert!(!set.contains(*s, key));
                assert_eq!(
                    set.iter().collect::<Vec<_>>(),
                    model.values().copied().collect::<Vec<_>>()
                );
            }
        }
        assert!(matches!(set, SlotSet::One(_)));
    }

    #[test]
    fn slotset_hints_replay_the_same_positions() {
        let keys: Vec<ObjectKey> = (0..50).map(|i| k((i * 31) % 50)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let (mut a, mut b) = (SlotSet::One(0), SlotSet::One(0));
        for s in 1..50u32 {
            let hint = a.insert(s, &keys[s as usize], None, key_of);
            let hint = (hint.0 != NO_POS).then_some(hint);
            b.insert(s, &keys[s as usize], hint, |_| None);
        }
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
        for s in (0..49u32).step_by(3) {
            let (pos, _) = a.remove(s, &keys[s as usize], NO_POS);
            assert_ne!(pos, NO_POS);
            assert_eq!(b.remove(s, &keys[s as usize], pos), (pos, false));
        }
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
    }

    #[test]
    fn normalize_sorts_and_dedups() {
        let v: IndexValues = smallvec!["b".into(), "a".into(), "b".into()];
        assert_eq!(normalize(v).as_slice(), ["a", "b"]);
    }
}
