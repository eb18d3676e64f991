//! Borrowed views of an [`ObjectMeta`](super::ObjectMeta)'s packed strings: [`StrMapRef`]
//! (labels, annotations), [`OwnerRef`]s ([`OwnerRefs`]) and [`Finalizers`].

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::meta_fields::OwnerReference;
use super::text::StrMap;

/// Number of single strings (namespace, name, generateName, uid, resourceVersion, in that
/// order) at the start of an [`ObjectMeta`](super::ObjectMeta)'s packed strings. A `/` lies
/// between a non-empty namespace and the name, so that the text starts with the object's key.
pub(crate) const SINGLE_STRINGS: usize = 5;
/// Positions of the single strings.
pub(crate) const NAMESPACE: usize = 0;
pub(crate) const NAME: usize = 1;
pub(crate) const GENERATE_NAME: usize = 2;
pub(crate) const UID: usize = 3;
pub(crate) const RESOURCE_VERSION: usize = 4;

/// Bits of an owner reference's flags word: `controller` present, and its value.
pub(crate) const OWNER_CONTROLLER_SET: u32 = 1;
pub(crate) const OWNER_CONTROLLER: u32 = 2;
/// Bits of an owner reference's flags word: `blockOwnerDeletion` present, and its value.
pub(crate) const OWNER_BLOCKS_SET: u32 = 4;
pub(crate) const OWNER_BLOCKS: u32 = 8;

/// Strings packed back to back: the first [`SINGLE_STRINGS`] in `text`, string `i` ending at
/// `single[i]` and starting where string `i - 1` ends (the name one byte later when the
/// namespace is not empty: the key's `/`); the others in `tail`, string `i` ending at
/// `ends[i - SINGLE_STRINGS]` and starting where the previous one ends (the first at
/// `tail_start`). A decoded object's `tail` is its `text` (`tail_start` the end of the single
/// strings); a compact one's is shared with other objects ([`MetaTails`](super::MetaTails)).
/// Words of `ends` past the strings hold other data (owner flags).
#[derive(Clone, Copy)]
pub(crate) struct Pieces<'a> {
    text: &'a str,
    single: &'a [u32; SINGLE_STRINGS],
    tail: &'a str,
    tail_start: u32,
    ends: &'a [u32],
}

impl<'a> Pieces<'a> {
    pub(crate) fn new(
        text: &'a str,
        single: &'a [u32; SINGLE_STRINGS],
        tail: &'a str,
        tail_start: u32,
        ends: &'a [u32],
    ) -> Self {
        Pieces {
            text,
            single,
            tail,
            tail_start,
            ends,
        }
    }

    /// String `i`; empty when `i` or its ends are out of range (never for packed metadata).
    pub(crate) fn get(self, i: usize) -> &'a str {
        let (text, start, end) = match i.checked_sub(SINGLE_STRINGS) {
            None => {
                let start = match i.checked_sub(1) {
                    None => 0,
                    Some(NAMESPACE) => {
                        let ns = self.single[NAMESPACE];
                        ns + u32::from(ns > 0)
                    }
                    Some(j) => self.single[j],
                };
                (self.text, start, self.single[i])
            }
            Some(j) => {
                let Some(&end) = self.ends.get(j) else {
                    return "";
                };
                let start = j.checked_sub(1).map_or(self.tail_start, |k| self.ends[k]);
                (self.tail, start, end)
            }
        };
        text.get(start as usize..end as usize).unwrap_or("")
    }

    /// Word `i` of the ends (0 when out of range).
    pub(crate) fn word(self, i: usize) -> u32 {
        match i.checked_sub(SINGLE_STRINGS) {
            None => self.single[i],
            Some(j) => self.ends.get(j).copied().unwrap_or(0),
        }
    }
}

/// A borrowed string-to-string map in key order, keys unique: `metadata.labels` or
/// `metadata.annotations` of an [`ObjectMeta`](super::ObjectMeta) (Go `map[string]string`), or
/// a view of a [`StrMap`]. Cheap to copy; lookups by key are a binary search.
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
    /// `len` pairs of strings from `first`: key, value, key, value, …
    Packed {
        pieces: Pieces<'a>,
        first: usize,
        len: usize,
    },
}

impl<'a> StrMapRef<'a> {
    pub(crate) fn packed(pieces: Pieces<'a>, first: usize, len: usize) -> Self {
        StrMapRef {
            repr: Repr::Packed { pieces, first, len },
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Map(m) => m.len(),
            Repr::Packed { len, .. } => len,
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
            Repr::Packed { pieces, first, .. } => {
                (pieces.get(first + 2 * i), pieces.get(first + 2 * i + 1))
            }
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        match self.repr {
            Repr::Map(m) => m.get(key).map(|v| &**v),
            Repr::Packed { len, .. } => {
                let (mut lo, mut hi) = (0, len);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let (k, v) = self.entry(mid);
                    match k.cmp(key) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Some(v),
                    }
                }
                None
            }
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
#[derive(Clone)]
pub struct OwnerRefs<'a> {
    pieces: Pieces<'a>,
    /// Index of the first reference's first string, and of its flags word.
    first: usize,
    flags: usize,
    front: usize,
    back: usize,
}

impl<'a> OwnerRefs<'a> {
    pub(crate) fn new(pieces: Pieces<'a>, first: usize, flags: usize, len: usize) -> Self {
        OwnerRefs {
            pieces,
            first,
            flags,
            front: 0,
            back: len,
        }
    }

    /// `true` when no reference is left.
    pub fn is_empty(&self) -> bool {
        self.front == self.back
    }

    fn at(&self, i: usize) -> OwnerRef<'a> {
        let s = |j: usize| self.pieces.get(self.first + 4 * i + j);
        let flags = self.pieces.word(self.flags + i);
        let flag = |set: u32, on: u32| (flags & set != 0).then_some(flags & on != 0);
        OwnerRef {
            api_version: s(0),
            kind: s(1),
            name: s(2),
            uid: s(3),
            controller: flag(OWNER_CONTROLLER_SET, OWNER_CONTROLLER),
            block_owner_deletion: flag(OWNER_BLOCKS_SET, OWNER_BLOCKS),
        }
    }
}

impl<'a> Iterator for OwnerRefs<'a> {
    type Item = OwnerRef<'a>;

    fn next(&mut self) -> Option<OwnerRef<'a>> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        Some(self.at(self.front - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for OwnerRefs<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.at(self.back))
    }
}

impl ExactSizeIterator for OwnerRefs<'_> {}

impl fmt::Debug for OwnerRefs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

/// Iterator over an [`ObjectMeta`](super::ObjectMeta)'s finalizers, in wire order.
#[derive(Clone)]
pub struct Finalizers<'a> {
    pieces: Pieces<'a>,
    first: usize,
    front: usize,
    back: usize,
}

impl<'a> Finalizers<'a> {
    pub(crate) fn new(pieces: Pieces<'a>, first: usize, len: usize) -> Self {
        Finalizers {
            pieces,
            first,
            front: 0,
            back: len,
        }
    }

    /// `true` when no finalizer is left.
    pub fn is_empty(&self) -> bool {
        self.front == self.back
    }
}

impl<'a> Iterator for Finalizers<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        Some(self.pieces.get(self.first + self.front - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Finalizers<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.pieces.get(self.first + self.back))
    }
}

impl ExactSizeIterator for Finalizers<'_> {}

impl fmt::Debug for Finalizers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

impl Serialize for Finalizers<'_> {
    /// As a sequence of strings.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.clone())
    }
}
