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
#[derive(Clone)]
pub struct ObjectKey {
    text: Arc<str>,
    hash: u64,
}

/// The process-wide seeded hasher of key texts ([`key_hash`]).
static KEY_HASHER: LazyLock<foldhash::fast::RandomState> =
    LazyLock::new(foldhash::fast::RandomState::default);

/// The hash of a key's text that [`ObjectKey`] caches and the store's key tables use: foldhash
/// with one random seed per process (not stable across processes; never sent anywhere).
pub fn key_hash(text: &str) -> u64 {
    KEY_HASHER.hash_one(text)
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.text, &other.text) || (self.hash == other.hash && self.text == other.text)
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
        self.text.cmp(&other.text)
    }
}

impl std::hash::Hash for ObjectKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state)
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
            hash: key_hash(&text),
            text,
        }
    }

    /// The hash of the key's text, [`key_hash`] (cached: no work).
    pub fn hash_value(&self) -> u64 {
        self.hash
    }

    /// Longest `namespace/name` key [`ObjectKey::new`] builds without a temporary `String`.
    pub const INLINE: usize = 320;

    /// Wraps an already formatted key (`namespace/name` or `name`) without checking it.
    pub fn from_raw(key: &str) -> Self {
        ObjectKey::wrap(Arc::from(key))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The namespace part: text before the first `/`, or `""` for cluster-scoped keys
    /// (client-go `SplitMetaNamespaceKey`).
    pub fn namespace(&self) -> &str {
        match self.text.split_once('/') {
            Some((ns, _)) => ns,
            None => "",
        }
    }

    /// The name part: text after the first `/`, or the whole key.
    pub fn name(&self) -> &str {
        match self.text.split_once('/') {
            Some((_, name)) => name,
            None => &self.text,
        }
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::borrow::Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        ObjectKey::from_raw(s)
    }
}
