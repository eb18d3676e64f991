//! The discovery documents kubectl and client libraries read before any request: `/version`,
//! `/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`. Legacy (not
//! aggregated) discovery in JSON: clients that ask for aggregated discovery
//! (`as=APIGroupDiscoveryList`) fall back to it when the answer is a plain document, as they do
//! with servers before Kubernetes 1.26. Upstream: `apimachinery/pkg/apis/meta/v1/types.go`
//! (`APIVersions`, `APIGroupList`, `APIResourceList`), `apimachinery/pkg/version/types.go`.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// What the server serves, as discovery describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedResource {
    /// API group (`""` = core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural name, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Namespaced (`true`) or cluster-scoped.
    pub namespaced: bool,
    /// Short names, e.g. `po`.
    pub short_names: Vec<String>,
}

impl ServedResource {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn api_resource(&self) -> Value {
        let mut r = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["get", "list", "watch"],
        });
        if !self.short_names.is_empty() {
            r["shortNames"] = json!(self.short_names);
        }
        r
    }
}

/// `/version`: a Kubernetes version that current clients accept without skew warnings.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-informer-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(crate) fn api_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}],
    })
}

/// `/apis`: the served resource's group, when it is not the core group.
pub(crate) fn api_groups(r: &ServedResource) -> Value {
    let groups = if r.group.is_empty() {
        vec![]
    } else {
        vec![api_group(r)]
    };
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub(crate) fn api_group(r: &ServedResource) -> Value {
    let v = json!({"groupVersion": r.group_version(), "version": r.version});
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": r.group,
        "versions": [v.clone()],
        "preferredVersion": v,
    })
}

/// `/api/v1` or `/apis/<group>/<version>`: the served resource when it belongs there.
pub(crate) fn resource_list(group_version: &str, r: &ServedResource) -> Value {
    let resources = if group_version == r.group_version() {
        vec![r.api_resource()]
    } else {
        vec![]
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}
