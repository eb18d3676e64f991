//! [`Str`] and [`StrMap`]: the string and string-map types of
//! [`super::ObjectMetaFields`], the editable form of an object's metadata.

use std::fmt;
use std::ops::Index;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable UTF-8 string held in a [`bytes::Bytes`] (the `bytestring` crate's
/// `ByteString`): the string type of [`super::ObjectMetaFields`] (cloning one bumps a
/// reference count; nothing is copied). Build one from text with
/// `"name".into()` or `String::into()` (which copies, resp. takes over, the text); read it as a
/// `&str` through `Deref`. Ordering, equality and hashing are those of the text (`Borrow<str>`),
/// and it compares equal to `&str` and `String`. Built only through checked conversions:
/// `TryFrom<Bytes>` fails on invalid UTF-8.
pub type Str = bytestring::ByteString;

/// A string-to-string map kept as a vector of `(key, value)` pairs sorted by key, keys unique:
/// the type of `metadata.labels` and `metadata.annotations` (Go `map[string]string`,
/// upstream `apimachinery/pkg/apis/meta/v1/types.go`).
///
/// It reads like a `BTreeMap<Str, Str>` (lookups by `&str` in O(log n), iteration in key
/// order, `map["key"]`) but costs one allocation however many entries it holds. Inserting is O(n); maps of
/// Kubernetes objects hold a handful of entries. Serializes as a JSON object.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrMap {
    entries: Vec<(Str, Str)>,
}

impl StrMap {
    /// An empty map (no allocation).
    pub const fn new() -> Self {
        StrMap {
            entries: Vec::new(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` when the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Str> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The stored key and value of `key`, if present.
    pub fn get_key_value(&self, key: &str) -> Option<(&Str, &Str)> {
        self.find(key).ok().map(|i| {
            let (k, v) = &self.entries[i];
            (k, v)
        })
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it replaces, if any.
    pub fn insert(&mut self, key: Str, value: Str) -> Option<Str> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value, if it was present.
    pub fn remove(&mut self, key: &str) -> Option<Str> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Removes every entry (keeps the allocation).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Keeps only the entries for which `keep(key, value)` is `true`.
    pub fn retain(&mut self, mut keep: impl FnMut(&Str, &Str) -> bool) {
        self.entries.retain(|(k, v)| keep(k, v));
    }

    /// Entry `i` in key order; `i < len()`.
    pub(crate) fn entry(&self, i: usize) -> (&Str, &Str) {
        let (k, v) = &self.entries[i];
        (k, v)
    }

    /// Entries in key order.
    pub fn iter(&self) -> StrMapIter<'_> {
        StrMapIter(self.entries.iter())
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Str> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Str> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Appends an entry without keeping the order; [`StrMap::finish`] must follow before the
    /// map is read. Decoders use the pair to build a map in one pass.
    pub(crate) fn push_unordered(&mut self, key: Str, value: Str) {
        self.entries.push((key, value));
    }

    /// Restores the invariant after [`StrMap::push_unordered`]: sorts by key (stable) and keeps
    /// the last value of a repeated key (protobuf and Go JSON map semantics: last one wins).
    /// O(n) when the entries already arrive sorted and unique (the API server sorts map keys).
    pub(crate) fn finish(&mut self) {
        if self.entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return;
        }
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Str, Str)> = Vec::with_capacity(self.entries.len());
        for e in self.entries.drain(..) {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        self.entries = out;
    }
}

impl fmt::Debug for StrMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Index<&str> for StrMap {
    type Output = Str;

    /// The value of `key`.
    ///
    /// # Panics
    /// When `key` is absent (as `BTreeMap`'s `Index`); use [`StrMap::get`] otherwise.
    fn index(&self, key: &str) -> &Str {
        match self.get(key) {
            Some(v) => v,
            None => panic!("key {key:?} not in StrMap"),
        }
    }
}

impl<K: Into<Str>, V: Into<Str>> FromIterator<(K, V)> for StrMap {
    /// Collects pairs in any order; of a repeated key the last value wins.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = StrMap::new();
        m.extend(iter);
        m
    }
}

impl<K: Into<Str>, V: Into<Str>> Extend<(K, V)> for StrMap {
    /// Inserts every pair; of a repeated key the last value wins.
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.entries.push((k.into(), v.into()));
        }
        self.finish();
    }
}

/// Iterator over a [`StrMap`]'s entries in key order, as `(&key, &value)`.
#[derive(Clone, Debug)]
pub struct StrMapIter<'a>(std::slice::Iter<'a, (Str, Str)>);

impl<'a> Iterator for StrMapIter<'a> {
    type Item = (&'a Str, &'a Str);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for StrMapIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl ExactSizeIterator for StrMapIter<'_> {}

impl<'a> IntoIterator for &'a StrMap {
    type Item = (&'a Str, &'a Str);
    type IntoIter = StrMapIter<'a>;

    fn into_iter(self) -> StrMapIter<'a> {
        self.iter()
    }
}

impl IntoIterator for StrMap {
    type Item = (Str, Str);
    type IntoIter = std::vec::IntoIter<(Str, Str)>;

    /// The entries in key order, by value.
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl Serialize for StrMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            m.serialize_entry(&**k, &**v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for StrMap {
    /// Reads a JSON object of strings (of a repeated key the last value wins).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrMap, A::Error> {
                let mut m = StrMap::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    m.push_unordered(k.into(), v.into());
                }
                m.finish();
                Ok(m)
            }
        }
        d.deserialize_map(V)
    }
}
