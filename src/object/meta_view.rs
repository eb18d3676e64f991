//! Borrowed views of an [`ObjectMeta`](super::ObjectMeta)'s repeated fields: [`StrMapRef`]
//! (labels, annotations) and [`OwnerRef`] (one owner reference).

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::meta_fields::OwnerReference;
use super::text::{Str, StrMap};

/// A borrowed string-to-string map in key order, keys unique: `metadata.labels` or
/// `metadata.annotations` of an [`ObjectMeta`](super::ObjectMeta) (Go `map[string]string`).
/// Cheap to copy; lookups by key are a binary search.
///
/// # Examples
/// ```
/// use informer::object::{ObjectMeta, ObjectMetaFields, StrMap};
/// let labels: StrMap = [("tier", "edge"), ("app", "web")].into_iter().collect();
/// let meta = ObjectMeta::from(ObjectMetaFields { labels, ..Default::default() });
/// assert_eq!(meta.labels().get("app"), Some("web"));
/// assert_eq!(meta.labels().iter().map(|(k, _)| k).collect::<Vec<_>>(), ["app", "tier"]);
/// ```
#[derive(Clone, Copy)]
pub struct StrMapRef<'a> {
    repr: Repr<'a>,
}

#[derive(Clone, Copy)]
enum Repr<'a> {
    Map(&'a StrMap),
}

impl<'a> StrMapRef<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Map(m) => m.len(),
        }
    }

    /// `true` when the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i` in key order; `i < len()`.
    fn entry(&self, i: usize) -> (&'a str, &'a str) {
        match self.repr {
            Repr::Map(m) => {
                let (k, v) = m.entry(i);
                (k, v)
            }
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        match self.repr {
            Repr::Map(m) => m.get(key).map(|v| &**v),
        }
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Entries in key order, as `(key, value)`.
    pub fn iter(&self) -> StrMapRefIter<'a> {
        StrMapRefIter {
            map: *self,
            front: 0,
            back: self.len(),
        }
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &'a str> + ExactSizeIterator + use<'a> {
        self.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &'a str> + ExactSizeIterator + use<'a> {
        self.iter().map(|(_, v)| v)
    }

    /// An owned copy of the map.
    pub fn to_map(&self) -> StrMap {
        self.iter().collect()
    }
}

impl<'a> From<&StrMapRef<'a>> for StrMapRef<'a> {
    fn from(m: &StrMapRef<'a>) -> Self {
        *m
    }
}

impl<'a> IntoIterator for &StrMapRef<'a> {
    type Item = (&'a str, &'a str);
    type IntoIter = StrMapRefIter<'a>;

    fn into_iter(self) -> StrMapRefIter<'a> {
        self.iter()
    }
}

impl<'a> From<&'a StrMap> for StrMapRef<'a> {
    fn from(m: &'a StrMap) -> Self {
        StrMapRef { repr: Repr::Map(m) }
    }
}

impl PartialEq for StrMapRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for StrMapRef<'_> {}

impl PartialEq<StrMap> for StrMapRef<'_> {
    fn eq(&self, other: &StrMap) -> bool {
        *self == StrMapRef::from(other)
    }
}

impl fmt::Debug for StrMapRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for StrMapRef<'a> {
    type Item = (&'a str, &'a str);
    type IntoIter = StrMapRefIter<'a>;

    fn into_iter(self) -> StrMapRefIter<'a> {
        self.iter()
    }
}

impl Serialize for StrMapRef<'_> {
    /// As a JSON object, in key order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Iterator over a [`StrMapRef`]'s entries in key order, as `(key, value)`.
#[derive(Clone)]
pub struct StrMapRefIter<'a> {
    map: StrMapRef<'a>,
    front: usize,
    back: usize,
}

impl<'a> Iterator for StrMapRefIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        Some(self.map.entry(self.front - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for StrMapRefIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.map.entry(self.back))
    }
}

impl ExactSizeIterator for StrMapRefIter<'_> {}

impl fmt::Debug for StrMapRefIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

/// One entry of `metadata.ownerReferences` (`meta.v1.OwnerReference`) of an
/// [`ObjectMeta`](super::ObjectMeta), borrowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OwnerRef<'a> {
    /// `apiVersion` of the owner, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// Kind of the owner, e.g. `ReplicaSet`.
    pub kind: &'a str,
    /// Name of the owner (same namespace as the owned object).
    pub name: &'a str,
    /// UID of the owner.
    pub uid: &'a str,
    /// `true` when this owner is the managing controller; `None` when absent on the wire.
    pub controller: Option<bool>,
    /// Whether the owner's deletion waits for this object; `None` when absent on the wire.
    pub block_owner_deletion: Option<bool>,
}

impl OwnerRef<'_> {
    /// An owned copy.
    pub fn to_owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.into(),
            kind: self.kind.into(),
            name: self.name.into(),
            uid: self.uid.into(),
            controller: self.controller,
            block_owner_deletion: self.block_owner_deletion,
        }
    }
}

impl<'a> From<&'a OwnerReference> for OwnerRef<'a> {
    fn from(o: &'a OwnerReference) -> Self {
        OwnerRef {
            api_version: &o.api_version,
            kind: &o.kind,
            name: &o.name,
            uid: &o.uid,
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        }
    }
}

/// Iterator over an [`ObjectMeta`](super::ObjectMeta)'s owner references, in wire order.
#[derive(Clone, Debug)]
pub struct OwnerRefs<'a>(std::slice::Iter<'a, OwnerReference>);

impl<'a> OwnerRefs<'a> {
    pub(super) fn new(refs: &'a [OwnerReference]) -> Self {
        OwnerRefs(refs.iter())
    }

    /// `true` when no reference is left.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

impl<'a> Iterator for OwnerRefs<'a> {
    type Item = OwnerRef<'a>;

    fn next(&mut self) -> Option<OwnerRef<'a>> {
        self.0.next().map(OwnerRef::from)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for OwnerRefs<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(OwnerRef::from)
    }
}

impl ExactSizeIterator for OwnerRefs<'_> {}

/// Iterator over an [`ObjectMeta`](super::ObjectMeta)'s finalizers, in wire order.
#[derive(Clone, Debug)]
pub struct Finalizers<'a>(std::slice::Iter<'a, Str>);

impl<'a> Finalizers<'a> {
    pub(super) fn new(finalizers: &'a [Str]) -> Self {
        Finalizers(finalizers.iter())
    }

    /// `true` when no finalizer is left.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

impl<'a> Iterator for Finalizers<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        self.0.next().map(|s| &**s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Finalizers<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|s| &**s)
    }
}

impl ExactSizeIterator for Finalizers<'_> {}

impl Serialize for Finalizers<'_> {
    /// As a sequence of strings.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.clone())
    }
}
