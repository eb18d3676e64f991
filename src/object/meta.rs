//! Object metadata: the decoded `meta.v1.ObjectMeta` subset, keys and group/version/kind.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;

use super::text::{Str, StrMap};

/// A point in time as the API server encodes it (`meta.v1.Time`): seconds since the Unix epoch
/// plus nanoseconds. JSON carries it as an RFC 3339 string with second precision
/// (`2024-01-02T03:04:05Z`); protobuf as `{1 seconds, 2 nanos}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds since 1970-01-01T00:00:00Z; may be negative.
    pub seconds: i64,
    /// Nanoseconds within the second, `0..1_000_000_000` on well-formed input.
    pub nanos: i32,
}

impl Time {
    /// RFC 3339 in UTC with second precision, as Kubernetes writes times in JSON
    /// (`2008-01-01T01:01:01Z`). Out-of-range times print as `seconds=<n>`.
    pub fn to_rfc3339(&self) -> String {
        match jiff::Timestamp::from_second(self.seconds) {
            Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            Err(_) => format!("seconds={}", self.seconds),
        }
    }
}

/// One entry of `metadata.ownerReferences` (`meta.v1.OwnerReference`). Decoded strings are
/// slices of the received frame (see [`Str`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OwnerReference {
    /// `apiVersion` of the owner, e.g. `apps/v1`.
    pub api_version: Str,
    /// Kind of the owner, e.g. `ReplicaSet`.
    pub kind: Str,
    /// Name of the owner (same namespace as the owned object).
    pub name: Str,
    /// UID of the owner.
    pub uid: Str,
    /// `true` when this owner is the managing controller; `None` when absent on the wire.
    pub controller: Option<bool>,
    /// Whether the owner's deletion waits for this object; `None` when absent on the wire.
    pub block_owner_deletion: Option<bool>,
}

/// The decoded `meta.v1.ObjectMeta` fields an informer needs (field numbers in
/// `../shared/fixtures/README.md`, upstream `apimachinery/pkg/apis/meta/v1/types.go`).
///
/// Absent strings decode as empty strings, as in Go. Decoded strings ([`Str`], label and
/// annotation entries in a [`StrMap`]) are validated-UTF-8 slices of the input buffer, not
/// copies (JSON strings with escapes are the exception: they are unescaped into their own
/// bytes); build them from text with `"x".into()`. `managedFields` is kept undecoded: one
/// [`Bytes`] slice of the input per entry (decode one on demand with
/// `ManagedFieldsEntry`); JSON input keeps the JSON array text as one slice.
///
/// Holding a decoded `ObjectMeta` keeps the buffer it was decoded from alive, as the object's
/// raw bytes do; [`ObjectMeta::detached`] copies it out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// `metadata.name`.
    pub name: Str,
    /// `metadata.generateName`.
    pub generate_name: Str,
    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub namespace: Str,
    /// `metadata.uid`.
    pub uid: Str,
    /// `metadata.resourceVersion`: opaque to clients; an etcd revision on real servers.
    pub resource_version: Str,
    /// `metadata.generation`, `None` when absent.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`, `None` when absent.
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`: set once deletion has been requested.
    pub deletion_timestamp: Option<Time>,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `metadata.labels`.
    pub labels: StrMap,
    /// `metadata.annotations`.
    pub annotations: StrMap,
    /// `metadata.ownerReferences`, in wire order.
    pub owner_references: Vec<OwnerReference>,
    /// `metadata.finalizers`, in wire order.
    pub finalizers: Vec<Str>,
    /// `metadata.managedFields`, undecoded (see the type docs).
    pub managed_fields: Vec<Bytes>,
}

impl ObjectMeta {
    /// The object's cache key: `namespace/name`, or `name` when the namespace is empty
    /// (client-go `MetaNamespaceKeyFunc`, `tools/cache/store.go`).
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.name)
    }

    /// `resourceVersion` parsed as the unsigned integer real servers use (etcd revision).
    /// `None` when empty or not a decimal number.
    pub fn resource_version_u64(&self) -> Option<u64> {
        parse_resource_version(&self.resource_version)
    }

    /// The same metadata with every string and managed-fields entry copied into its own
    /// allocation, so that it no longer keeps the buffer it was decoded from alive.
    pub fn detached(&self) -> ObjectMeta {
        let own = |s: &Str| Str::from(&**s);
        ObjectMeta {
            name: own(&self.name),
            generate_name: own(&self.generate_name),
            namespace: own(&self.namespace),
            uid: own(&self.uid),
            resource_version: own(&self.resource_version),
            generation: self.generation,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            labels: self.labels.iter().map(|(k, v)| (own(k), own(v))).collect(),
            annotations: self
                .annotations
                .iter()
                .map(|(k, v)| (own(k), own(v)))
                .collect(),
            owner_references: self
                .owner_references
                .iter()
                .map(|o| OwnerReference {
                    api_version: own(&o.api_version),
                    kind: own(&o.kind),
                    name: own(&o.name),
                    uid: own(&o.uid),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
            finalizers: self.finalizers.iter().map(own).collect(),
            managed_fields: self
                .managed_fields
                .iter()
                .map(|b| Bytes::copy_from_slice(b))
                .collect(),
        }
    }
}

/// Parses a resourceVersion as a decimal `u64` (etcd revision). `None` when it is empty or not a
/// plain decimal number; Kubernetes only promises that resourceVersions are opaque strings, so
/// callers must treat `None` as "cannot be ordered".
pub fn parse_resource_version(rv: &str) -> Option<u64> {
    if rv.is_empty() {
        return None;
    }
    // One pass with checked arithmetic (a check for digits then `str::parse` read it twice;
    // the store's writer and many handlers parse one per event).
    rv.bytes().try_fold(0u64, |n, b| {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

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

/// Group, version and kind of an object (`schema.GroupVersionKind`). The core group is `""`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// API group, `""` for the core group (`v1`).
    pub group: String,
    /// API version within the group, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK from its three parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// Splits an `apiVersion` (`v1`, `apps/v1`) and pairs it with `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        GroupVersionKind::new(group, version, kind)
    }

    /// The `apiVersion` string: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is the GVK [`GroupVersionKind::from_api_version`] would build from
    /// `api_version` and `kind`, compared without allocating.
    pub fn matches_api_version(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.kind == kind && self.version == version && self.group == group
    }

    /// The item kind of a list kind: `PodList` → `Pod`; other kinds unchanged.
    pub fn item_of_list(&self) -> Self {
        let kind = self.kind.strip_suffix("List").unwrap_or(&self.kind);
        GroupVersionKind::new(&self.group, &self.version, kind)
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}.{}", self.version, self.kind)
        } else {
            write!(f, "{}.{}.{}", self.group, self.version, self.kind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_resource_version;

    #[test]
    fn resource_versions_parse_as_plain_decimal_u64_only() {
        assert_eq!(parse_resource_version("0"), Some(0));
        assert_eq!(parse_resource_version("007"), Some(7));
        assert_eq!(parse_resource_version("123456"), Some(123_456));
        assert_eq!(
            parse_resource_version("18446744073709551615"),
            Some(u64::MAX)
        );
        for bad in [
            "",
            "18446744073709551616",
            "+1",
            "-1",
            "12a",
            " 1",
            "1.5",
            "١",
        ] {
            assert_eq!(parse_resource_version(bad), None, "{bad:?}");
        }
    }
}
