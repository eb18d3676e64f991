//! [`ObjectKey`]: an object's cache key (`namespace/name`) and the hash it carries.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock};

/// A hash map keyed by [`ObjectKey`] with the fast seeded hasher the store already uses
/// (foldhash), for the DeltaFIFO and the distributor. SipHash showed in the processing
/// thread's profile (`perf record`, e2e-inproc); the end-to-end figures moved by less than
/// their noise.
pub(crate) type KeyMap<V> = std::collections::HashMap<ObjectKey, V, foldhash::fast::RandomState>;

/// The set twin of [`KeyMap`].
pub(crate) type KeySet = std::collections::HashSet<ObjectKey, foldhash::fast::RandomState>;

/// A cache key: `namespace/name`, or `name` for cluster-scoped objects (client-go
/// `MetaNamespaceKeyFunc`). Cheap to clone (one shared allocation).
///
/// A key carries the hash of its text ([`key_hash`]), computed once when it is built: a store
/// lookup by an `ObjectKey` starts probing its table without reading the key's text first
/// (in a large store that text is a cache miss of its own). Equality, ordering and `Hash`
/// are those of the text (so `Borrow<str>` lookups in std maps work).
///
/// A decoded object's key is the start of its metadata's own packed text (which begins with
/// `namespace/name`), shared rather than copied: no allocation of its own.
#[derive(Clone)]
pub struct ObjectKey {
    /// The key, or text that starts with it (see `tag`).
    text: Arc<str>,
    /// The top [`HASH_BITS`] bits of the text's foldhash in the low bits, the key's length in
    /// `text` above them (0: all of `text`). One word for both keeps the key 24 bytes, so a
    /// shared key costs `Object` nothing (its `Arc` is a 192-byte block).
    tag: u64,
}

/// Bits of the foldhash a key keeps ([`key_hash`] spreads them over 64 again).
const HASH_BITS: u32 = 48;
const HASH_MASK: u64 = (1 << HASH_BITS) - 1;
/// Longest key that can share a longer text (its length must fit the tag's top bits).
const SHARED_MAX: usize = (1 << (64 - HASH_BITS)) - 1;

/// The process-wide seeded hasher of key texts ([`key_hash`]).
static KEY_HASHER: LazyLock<foldhash::fast::RandomState> =
    LazyLock::new(foldhash::fast::RandomState::default);

/// The hash of a key's text that [`ObjectKey`] caches and the store's key tables use: foldhash
/// with one random seed per process (not stable across processes; never sent anywhere).
pub fn key_hash(text: &str) -> u64 {
    spread(hash_bits(text))
}

/// The [`HASH_BITS`] bits of `text`'s foldhash that a key keeps.
fn hash_bits(text: &str) -> u64 {
    KEY_HASHER.hash_one(text) >> (64 - HASH_BITS)
}

/// 48 kept bits spread over 64 (an odd multiplier: a bijection, whose low bits, which pick a
/// table bucket, and top bits, hashbrown's tag, both vary with the kept bits).
fn spread(bits: u64) -> u64 {
    bits.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.text, &other.text) && self.tag == other.tag)
            || ((self.tag ^ other.tag) & HASH_MASK == 0 && self.as_str() == other.as_str())
    }
}

impl Eq for ObjectKey {}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for ObjectKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl ObjectKey {
    /// Builds the key of `name` in `namespace` (empty namespace = cluster-scoped). One
    /// allocation (the shared key) for keys of up to [`ObjectKey::INLINE`] bytes, which covers
    /// every valid Kubernetes name (namespace ≤ 63 bytes, name ≤ 253 bytes).
    pub fn new(namespace: &str, name: &str) -> Self {
        if namespace.is_empty() {
            return ObjectKey::wrap(Arc::from(name));
        }
        let len = namespace.len() + 1 + name.len();
        if len <= Self::INLINE {
            let mut buf = [0u8; Self::INLINE];
            buf[..namespace.len()].copy_from_slice(namespace.as_bytes());
            buf[namespace.len()] = b'/';
            buf[namespace.len() + 1..len].copy_from_slice(name.as_bytes());
            // Two UTF-8 strings joined by '/' are UTF-8; the check cannot fail.
            if let Ok(s) = std::str::from_utf8(&buf[..len]) {
                return ObjectKey::wrap(Arc::from(s));
            }
        }
        let mut s = String::with_capacity(len);
        s.push_str(namespace);
        s.push('/');
        s.push_str(name);
        ObjectKey::wrap(Arc::from(s))
    }

    fn wrap(text: Arc<str>) -> Self {
        ObjectKey {
            tag: hash_bits(&text),
            text,
        }
    }

    /// The key that is the first `len` bytes of `text`, sharing it when `len` is a char
    /// boundary short enough for the tag (every valid Kubernetes key is), else a copy.
    pub(crate) fn prefix_of(text: &Arc<str>, len: usize) -> Self {
        match text.get(..len) {
            Some(_) if len == text.len() => ObjectKey::wrap(text.clone()),
            // A tag length of 0 means all of `text`: an empty key is a copy.
            Some(key) if (1..=SHARED_MAX).contains(&len) => ObjectKey {
                tag: hash_bits(key) | (len as u64) << HASH_BITS,
                text: text.clone(),
            },
            Some(key) => ObjectKey::from_raw(key),
            None => ObjectKey::from_raw(""),
        }
    }

    /// The hash of the key's text, [`key_hash`] (from the cached bits: one multiplication).
    pub fn hash_value(&self) -> u64 {
        spread(self.tag & HASH_MASK)
    }

    /// Longest `namespace/name` key [`ObjectKey::new`] builds without a temporary `String`.
    pub const INLINE: usize = 320;

    /// Wraps an already formatted key (`namespace/name` or `name`) without checking it.
    pub fn from_raw(key: &str) -> Self {
        ObjectKey::wrap(Arc::from(key))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        match (self.tag >> HASH_BITS) as usize {
            0 => &self.text,
            // Checked when the key was made; `get` keeps a bad length from panicking anyway.
            len => self.text.get(..len).unwrap_or_default(),
        }
    }

    /// The namespace part: text before the first `/`, or `""` for cluster-scoped keys
    /// (client-go `SplitMetaNamespaceKey`).
    pub fn namespace(&self) -> &str {
        match self.as_str().split_once('/') {
            Some((ns, _)) => ns,
            None => "",
        }
    }

    /// The name part: text after the first `/`, or the whole key.
    pub fn name(&self) -> &str {
        match self.as_str().split_once('/') {
            Some((_, name)) => name,
            None => self.as_str(),
        }
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::borrow::Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        ObjectKey::from_raw(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_key_shares_the_text_and_equals_a_copied_one() {
        let text: Arc<str> = Arc::from("shop/web-0generateuid-142");
        let shared = ObjectKey::prefix_of(&text, "shop/web-0".len());
        let copied = ObjectKey::new("shop", "web-0");
        assert_eq!(shared.as_str(), "shop/web-0");
        assert_eq!(shared.as_str().as_ptr(), text.as_ptr());
        assert_eq!((shared.namespace(), shared.name()), ("shop", "web-0"));
        assert_eq!(shared, copied);
        assert_eq!(shared.hash_value(), copied.hash_value());
        assert_eq!(shared.hash_value(), key_hash("shop/web-0"));
        assert_eq!(shared.cmp(&copied), std::cmp::Ordering::Equal);
        assert_ne!(shared, ObjectKey::prefix_of(&text, "shop/web".len()));
        assert_eq!(format!("{shared} {shared:?}"), r#"shop/web-0 "shop/web-0""#);
    }

    #[test]
    fn prefix_keys_at_the_edges_are_copies_or_whole() {
        let text: Arc<str> = Arc::from("ab");
        // Empty: a tag length of 0 means the whole text, so it must be a copy.
        assert_eq!(ObjectKey::prefix_of(&text, 0).as_str(), "");
        assert_eq!(ObjectKey::prefix_of(&text, 2).as_str(), "ab");
        // Out of range or not on a char boundary: empty rather than a panic.
        assert_eq!(ObjectKey::prefix_of(&text, 3).as_str(), "");
        let e: Arc<str> = Arc::from("é");
        assert_eq!(ObjectKey::prefix_of(&e, 1).as_str(), "");
        // Longer than the tag holds: a copy.
        let long: Arc<str> = Arc::from("x".repeat(SHARED_MAX + 2));
        let key = ObjectKey::prefix_of(&long, SHARED_MAX + 1);
        assert_eq!(key.as_str().len(), SHARED_MAX + 1);
        assert_ne!(key.as_str().as_ptr(), long.as_ptr());
    }
}
