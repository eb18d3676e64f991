//! [`ObjectMetaFields`]: `meta.v1.ObjectMeta` as plain, editable fields, the form an
//! [`ObjectMeta`](super::ObjectMeta) is built from and copied out to.

use bytes::Bytes;

use super::key::ObjectKey;
use super::text::{Str, StrMap};
use super::time::Time;

/// One entry of `metadata.ownerReferences` (`meta.v1.OwnerReference`), owned and editable
/// (read a cached object's through [`ObjectMeta::owner_references`](super::ObjectMeta::owner_references),
/// which hands out [`OwnerRef`](super::OwnerRef) views).
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

/// The `meta.v1.ObjectMeta` fields an informer keeps, as plain public fields (upstream
/// `apimachinery/pkg/apis/meta/v1/types.go`): what tests, transforms and the simulator build or
/// edit, then turn into an [`ObjectMeta`](super::ObjectMeta) with `.into()`; a cached object's
/// metadata comes back out with [`ObjectMeta::to_fields`](super::ObjectMeta::to_fields).
///
/// Absent strings are empty strings, as in Go. `managedFields` entries are kept undecoded, one
/// protobuf message (or, from JSON, the whole JSON array as one entry) each.
///
/// # Examples
/// ```
/// use informer::object::{ObjectMeta, ObjectMetaFields};
/// let meta: ObjectMeta = ObjectMetaFields {
///     name: "web-0".into(),
///     namespace: "shop".into(),
///     labels: [("app", "web")].into_iter().collect(),
///     ..Default::default()
/// }
/// .into();
/// assert_eq!(meta.key().as_str(), "shop/web-0");
/// assert_eq!(meta.labels().get("app"), Some("web"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMetaFields {
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

impl ObjectMetaFields {
    /// The cache key these fields give: `namespace/name`, or `name` when the namespace is empty
    /// (as [`ObjectMeta::key`](super::ObjectMeta::key)).
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.name)
    }
}
