//! [`GroupVersionResource`] and the typed kinds the factory makes informers for ([`Resource`],
//! [`Scope`]).

use std::fmt;

/// Group, version and resource (plural, lower case) naming a REST resource, e.g.
/// `apps/v1/deployments` (apimachinery `schema.GroupVersionResource`). The core group is "".
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Resource, e.g. `pods`.
    pub resource: String,
}

impl GroupVersionResource {
    /// From its three parts.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        GroupVersionResource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// The resource of a typed kind.
    pub fn of<K: Resource>() -> Self {
        GroupVersionResource::new(K::GROUP, K::VERSION, K::RESOURCE)
    }
}

impl fmt::Display for GroupVersionResource {
    /// `group/version/resource`, or `version/resource` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for k8s_pb::NamespaceResourceScope {}
    impl Sealed for k8s_pb::ClusterResourceScope {}
    impl Sealed for k8s_openapi::NamespaceResourceScope {}
    impl Sealed for k8s_openapi::ClusterResourceScope {}
}

/// Whether a k8s-pb or k8s-openapi scope is namespaced (implemented for the namespace and
/// cluster scopes; subresources have no informers).
pub trait Scope: sealed::Sealed {
    /// `true` for namespaced resources.
    const NAMESPACED: bool;
}

impl Scope for k8s_pb::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_pb::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A typed kind the factory can make an informer for: its group, version, resource and scope.
/// Implemented for every k8s-pb kind (`k8s_pb::api::apps::v1::Deployment`, ...) from
/// `k8s_pb::Resource`.
pub trait Resource: prost::Message + Default + Send + Sync + 'static {
    /// API group ("" for core).
    const GROUP: &'static str;
    /// API version.
    const VERSION: &'static str;
    /// Kind, e.g. `Deployment`.
    const KIND: &'static str;
    /// Resource (URL path segment), e.g. `deployments`.
    const RESOURCE: &'static str;
    /// Namespaced or cluster-scoped.
    const NAMESPACED: bool;
}

impl<T> Resource for T
where
    T: k8s_pb::Resource + prost::Message + Default + Send + Sync + 'static,
    T::Scope: Scope,
{
    const GROUP: &'static str = <T as k8s_pb::Resource>::GROUP;
    const VERSION: &'static str = <T as k8s_pb::Resource>::VERSION;
    const KIND: &'static str = <T as k8s_pb::Resource>::KIND;
    const RESOURCE: &'static str = <T as k8s_pb::Resource>::URL_PATH_SEGMENT;
    const NAMESPACED: bool = <T::Scope as Scope>::NAMESPACED;
}
