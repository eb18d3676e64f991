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

    /// The resource's discovery entries: itself (every verb but `deletecollection`), its
    /// `status` subresource, and `scale` for the scalable apps kinds.
    fn api_resources(&self) -> Vec<Value> {
        let mut r = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        });
        if !self.short_names.is_empty() {
            r["shortNames"] = json!(self.short_names);
        }
        let sub = |name: &str, group: Option<(&str, &str, &str)>| {
            let mut e = json!({
                "name": format!("{}/{name}", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            });
            if let Some((g, v, k)) = group {
                e["group"] = g.into();
                e["version"] = v.into();
                e["kind"] = k.into();
            }
            e
        };
        let mut out = vec![r, sub("status", None)];
        if self.group == "apps"
            && matches!(
                self.plural.as_str(),
                "deployments" | "replicasets" | "statefulsets"
            )
        {
            out.push(sub("scale", Some(("autoscaling", "v1", "Scale"))));
        }
        out
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

/// `/apis`: one group per non-core group served, with its versions in the order first
/// served (the first is the preferred one).
pub(crate) fn api_groups(resources: &[&ServedResource]) -> Value {
    let mut names: Vec<&str> = Vec::new();
    for r in resources {
        if !r.group.is_empty() && !names.contains(&r.group.as_str()) {
            names.push(&r.group);
        }
    }
    let groups: Vec<Value> = names.iter().map(|g| api_group(g, resources)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`: the versions of `group` served.
pub(crate) fn api_group(group: &str, resources: &[&ServedResource]) -> Value {
    let mut versions: Vec<Value> = Vec::new();
    for r in resources.iter().filter(|r| r.group == group) {
        let v = json!({"groupVersion": r.group_version(), "version": r.version});
        if !versions.contains(&v) {
            versions.push(v);
        }
    }
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": preferred,
    })
}

/// `/api/v1` or `/apis/<group>/<version>`: the resources served there.
pub(crate) fn resource_list(group_version: &str, resources: &[&ServedResource]) -> Value {
    let resources: Vec<Value> = resources
        .iter()
        .filter(|r| r.group_version() == group_version)
        .flat_map(|r| r.api_resources())
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}
