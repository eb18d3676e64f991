//! Index functions and the store's index definitions (client-go `tools/cache/index.go`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use smallvec::{SmallVec, smallvec};

use crate::object::Object;

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
///     Ok(obj.meta().labels().get("node").map(|n| smallvec![n.to_string()]).unwrap_or_default())
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
                .labels()
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
                .owner_references()
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
                let labels = &obj.meta().labels();
                let mut it = labels.iter();
                match (it.next(), it.next_back()) {
                    (Some((k, v)), Some((k2, v2))) => first(k) ^ first(v) ^ first(k2) ^ first(v2),
                    (Some((k, v)), None) => first(k) ^ first(v),
                    _ => labels.len(),
                }
            }
            Builtin::OwnerUid => obj
                .meta()
                .owner_references()
                .next()
                .map_or(0, |o| first(o.uid)),
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
            Builtin::Labels => old.meta().labels() == new.meta().labels(),
            Builtin::OwnerUid => old
                .meta()
                .owner_references()
                .map(|o| o.uid)
                .eq(new.meta().owner_references().map(|o| o.uid)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_sorts_and_dedups() {
        let v: IndexValues = smallvec!["b".into(), "a".into(), "b".into()];
        assert_eq!(normalize(v).as_slice(), ["a", "b"]);
    }
}
