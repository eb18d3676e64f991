//! Object metadata: the decoded `meta.v1.ObjectMeta` subset, keys and group/version/kind.

use std::fmt;

use bytes::Bytes;

use super::key::ObjectKey;
use super::meta_fields::ObjectMetaFields;
use super::meta_view::{Finalizers, OwnerRefs, StrMapRef};
use super::text::Str;
use super::time::Time;

/// The decoded `meta.v1.ObjectMeta` fields an informer needs (field numbers in
/// `../shared/fixtures/README.md`, upstream `apimachinery/pkg/apis/meta/v1/types.go`), read
/// through accessors: strings as `&str`, labels and annotations as a [`StrMapRef`], owner
/// references as [`OwnerRef`]s.
///
/// Absent strings read as empty strings, as in Go. `managedFields` is kept undecoded, one
/// protobuf message per entry (JSON input keeps the JSON array text as one entry).
///
/// Build one from [`ObjectMetaFields`] (`fields.into()`); copy one out, to edit it, with
/// [`ObjectMeta::to_fields`].
///
/// # Examples
/// ```
/// use informer::object::{ObjectMeta, ObjectMetaFields};
/// let meta = ObjectMeta::from(ObjectMetaFields {
///     name: "web-0".into(),
///     namespace: "shop".into(),
///     resource_version: "42".into(),
///     ..Default::default()
/// });
/// assert_eq!(meta.name(), "web-0");
/// assert_eq!(meta.resource_version_u64(), Some(42));
/// assert!(meta.labels().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    fields: ObjectMetaFields,
}

impl From<ObjectMetaFields> for ObjectMeta {
    fn from(fields: ObjectMetaFields) -> Self {
        ObjectMeta { fields }
    }
}

impl PartialEq<ObjectMetaFields> for ObjectMeta {
    fn eq(&self, other: &ObjectMetaFields) -> bool {
        self.fields == *other
    }
}

impl ObjectMeta {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.fields.name
    }

    /// `metadata.generateName`.
    pub fn generate_name(&self) -> &str {
        &self.fields.generate_name
    }

    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        &self.fields.namespace
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.fields.uid
    }

    /// `metadata.resourceVersion`: opaque to clients; an etcd revision on real servers.
    pub fn resource_version(&self) -> &str {
        &self.fields.resource_version
    }

    /// `metadata.generation`, `None` when absent.
    pub fn generation(&self) -> Option<i64> {
        self.fields.generation
    }

    /// `metadata.creationTimestamp`, `None` when absent.
    pub fn creation_timestamp(&self) -> Option<Time> {
        self.fields.creation_timestamp
    }

    /// `metadata.deletionTimestamp`: set once deletion has been requested.
    pub fn deletion_timestamp(&self) -> Option<Time> {
        self.fields.deletion_timestamp
    }

    /// `metadata.deletionGracePeriodSeconds`.
    pub fn deletion_grace_period_seconds(&self) -> Option<i64> {
        self.fields.deletion_grace_period_seconds
    }

    /// `metadata.labels`, in key order.
    pub fn labels(&self) -> StrMapRef<'_> {
        StrMapRef::from(&self.fields.labels)
    }

    /// `metadata.annotations`, in key order.
    pub fn annotations(&self) -> StrMapRef<'_> {
        StrMapRef::from(&self.fields.annotations)
    }

    /// `metadata.ownerReferences`, in wire order.
    pub fn owner_references(&self) -> OwnerRefs<'_> {
        OwnerRefs::new(&self.fields.owner_references)
    }

    /// `metadata.finalizers`, in wire order.
    pub fn finalizers(&self) -> Finalizers<'_> {
        Finalizers::new(&self.fields.finalizers)
    }

    /// `metadata.managedFields`, undecoded: one protobuf `ManagedFieldsEntry` per entry, or,
    /// from JSON, the whole JSON array as one entry.
    pub fn managed_fields(&self) -> &[Bytes] {
        &self.fields.managed_fields
    }

    /// An editable copy of the fields.
    pub fn to_fields(&self) -> ObjectMetaFields {
        self.fields.clone()
    }

    /// The fields, taken out.
    pub fn into_fields(self) -> ObjectMetaFields {
        self.fields
    }

    /// The object's cache key: `namespace/name`, or `name` when the namespace is empty
    /// (client-go `MetaNamespaceKeyFunc`, `tools/cache/store.go`).
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace(), self.name())
    }

    /// `resourceVersion` parsed as the unsigned integer real servers use (etcd revision).
    /// `None` when empty or not a decimal number.
    pub fn resource_version_u64(&self) -> Option<u64> {
        parse_resource_version(self.resource_version())
    }

    /// The same metadata with every string and managed-fields entry copied into its own
    /// allocation, so that it no longer keeps the buffer it was decoded from alive.
    pub fn detached(&self) -> ObjectMeta {
        let f = &self.fields;
        let own = |s: &Str| Str::from(&**s);
        ObjectMetaFields {
            name: own(&f.name),
            generate_name: own(&f.generate_name),
            namespace: own(&f.namespace),
            uid: own(&f.uid),
            resource_version: own(&f.resource_version),
            generation: f.generation,
            creation_timestamp: f.creation_timestamp,
            deletion_timestamp: f.deletion_timestamp,
            deletion_grace_period_seconds: f.deletion_grace_period_seconds,
            labels: f.labels.iter().map(|(k, v)| (own(k), own(v))).collect(),
            annotations: f
                .annotations
                .iter()
                .map(|(k, v)| (own(k), own(v)))
                .collect(),
            owner_references: self
                .owner_references()
                .map(|o| o.to_owner_reference())
                .collect(),
            finalizers: f.finalizers.iter().map(own).collect(),
            managed_fields: f
                .managed_fields
                .iter()
                .map(|b| Bytes::copy_from_slice(b))
                .collect(),
        }
        .into()
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
