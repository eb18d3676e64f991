//! [`ApiResource`]: which collection a request goes to, and the request paths and query strings
//! of list and watch. Upstream: the REST paths of `k8s.io/apiserver/pkg/endpoints/installer.go`
//! (`/api/v1/namespaces/{ns}/pods`, `/apis/{group}/{version}/{resource}`), query parameters
//! of `apimachinery/pkg/apis/meta/v1/types.go` (`ListOptions`).

use std::fmt::Write as _;

use crate::reflector::{ListOptions, WatchOptions};

/// One resource (collection) of the Kubernetes API, as the client addresses it.
///
/// # Examples
/// ```
/// use informer::client::ApiResource;
/// let pods = ApiResource::core("v1", "pods", "Pod").in_namespace("kube-system");
/// assert_eq!(pods.collection_path(), "/api/v1/namespaces/kube-system/pods");
/// let deployments = ApiResource::new("apps", "v1", "deployments", "Deployment");
/// assert_eq!(deployments.collection_path(), "/apis/apps/v1/deployments");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// API group; `""` for the core group (`/api/v1`).
    pub group: String,
    /// Version within the group, e.g. `v1`.
    pub version: String,
    /// The plural resource name in the path, e.g. `pods`.
    pub resource: String,
    /// The kind of the items, e.g. `Pod` (informational: the wire carries it).
    pub kind: String,
    /// Namespace to restrict requests to; `None` = all namespaces (or a cluster-scoped
    /// resource).
    pub namespace: Option<String>,
    /// Whether the server can answer in protobuf. Built-in kinds can; custom resources and
    /// most aggregated APIs speak JSON only (`apiextensions-apiserver` has no protobuf
    /// serializer). When set, requests accept protobuf first and JSON second; either answer is
    /// decoded.
    pub protobuf: bool,
    /// Ask for metadata only: the server answers `meta.k8s.io/v1` `PartialObjectMetadata`
    /// objects (and lists of them) instead of whole objects (controller-runtime's metadata
    /// informers, client-go's metadata client). A server that cannot converts nothing and
    /// sends whole objects, which decode the same way.
    pub metadata_only: bool,
}

impl ApiResource {
    /// A resource of `group`/`version`; protobuf is offered when the group is a built-in one
    /// (see [`is_builtin_group`]).
    pub fn new(group: &str, version: &str, resource: &str, kind: &str) -> Self {
        ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            kind: kind.to_owned(),
            namespace: None,
            protobuf: is_builtin_group(group),
            metadata_only: false,
        }
    }

    /// The resource of a kube-rs type (a k8s-openapi kind, a `#[derive(CustomResource)]`
    /// struct): group, version, plural and kind from its `kube::Resource`, asked for as JSON
    /// (those types are serde types; see [`Object::deserialize`]).
    ///
    /// [`Object::deserialize`]: crate::object::Object::deserialize
    ///
    /// # Examples
    /// ```
    /// use informer::client::ApiResource;
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// let r = ApiResource::of::<Deployment>();
    /// assert_eq!(r.collection_path(), "/apis/apps/v1/deployments");
    /// assert_eq!(r.accept(), "application/json");
    /// ```
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self::new(
            &K::group(&()),
            &K::version(&()),
            &K::plural(&()),
            &K::kind(&()),
        )
        .with_protobuf(false)
    }

    /// A resource of the core group (`/api/<version>`), e.g. `core("v1", "pods", "Pod")`.
    pub fn core(version: &str, resource: &str, kind: &str) -> Self {
        Self::new("", version, resource, kind)
    }

    /// The same resource restricted to `namespace` (empty = all namespaces).
    #[must_use]
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespace = (!namespace.is_empty()).then(|| namespace.to_owned());
        self
    }

    /// Sets [`ApiResource::protobuf`] (turn it off to force JSON for a built-in kind).
    #[must_use]
    pub fn with_protobuf(mut self, protobuf: bool) -> Self {
        self.protobuf = protobuf;
        self
    }

    /// The same resource, asked for metadata only ([`ApiResource::metadata_only`]). Protobuf
    /// is offered for every group then: `PartialObjectMetadata` has a protobuf form even for
    /// custom resources. The objects' metadata is decoded either way ([`Object::meta`]); for
    /// serde reads (kube's `PartialObjectMeta<K>` through [`TypedLister::serde`]) ask for
    /// JSON with [`with_protobuf(false)`](Self::with_protobuf) after this.
    ///
    /// [`Object::meta`]: crate::object::Object::meta
    /// [`TypedLister::serde`]: crate::TypedLister::serde
    ///
    /// # Examples
    /// ```
    /// use informer::client::ApiResource;
    /// let secrets = ApiResource::core("v1", "secrets", "Secret").metadata_only();
    /// assert!(secrets.watch_accept().starts_with(
    ///     "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    /// ));
    /// assert!(secrets.list_accept().contains("as=PartialObjectMetadataList"));
    /// ```
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        self.metadata_only = true;
        self.protobuf = true;
        self
    }

    /// The `Accept` header of list requests: [`accept`](Self::accept), or for
    /// [`metadata_only`](Self::metadata_only) `PartialObjectMetadataList` in protobuf, then
    /// in JSON, then plain JSON (what client-go's metadata client sends).
    pub fn list_accept(&self) -> String {
        self.conversion_accept("PartialObjectMetadataList")
    }

    /// The `Accept` header of watch requests: as [`list_accept`](Self::list_accept) with
    /// `PartialObjectMetadata` (watch events carry single objects).
    pub fn watch_accept(&self) -> String {
        self.conversion_accept("PartialObjectMetadata")
    }

    fn conversion_accept(&self, kind: &str) -> String {
        if !self.metadata_only {
            return self.accept().to_owned();
        }
        let json = format!("application/json;as={kind};g=meta.k8s.io;v=v1");
        if self.protobuf {
            format!(
                "application/vnd.kubernetes.protobuf;as={kind};g=meta.k8s.io;v=v1,{json},application/json"
            )
        } else {
            format!("{json},application/json")
        }
    }

    /// `apiVersion`: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path: `/api/v1[/namespaces/{ns}]/pods`,
    /// `/apis/{group}/{version}[/namespaces/{ns}]/{resource}`.
    pub fn collection_path(&self) -> String {
        let mut p = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let Some(ns) = &self.namespace {
            let _ = write!(p, "/namespaces/{ns}");
        }
        p.push('/');
        p.push_str(&self.resource);
        p
    }

    /// The `Accept` header of list and watch requests: protobuf first for built-in kinds, JSON
    /// only otherwise (what client-go sends with `ContentType: application/vnd.kubernetes.protobuf`
    /// and `AcceptContentTypes` including JSON).
    pub fn accept(&self) -> &'static str {
        if self.protobuf {
            "application/vnd.kubernetes.protobuf, application/json"
        } else {
            "application/json"
        }
    }

    /// Path and query of one list page.
    pub fn list_uri(&self, opts: &ListOptions) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(rv) = &opts.resource_version {
            q.append_pair("resourceVersion", rv);
        }
        if let Some(m) = &opts.resource_version_match {
            q.append_pair("resourceVersionMatch", m);
        }
        if let Some(l) = opts.limit {
            q.append_pair("limit", &l.to_string());
        }
        if let Some(c) = opts.continue_token.as_deref().filter(|c| !c.is_empty()) {
            q.append_pair("continue", c);
        }
        selectors(
            &mut q,
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        );
        with_query(self.collection_path(), q.finish())
    }

    /// Path and query of a watch: `watch=1`, `resourceVersion`, `allowWatchBookmarks`,
    /// `timeoutSeconds` (whole seconds, at least 1), and for streaming lists
    /// `sendInitialEvents=true&resourceVersionMatch=NotOlderThan`.
    pub fn watch_uri(&self, opts: &WatchOptions) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("watch", "1");
        q.append_pair("resourceVersion", &opts.resource_version);
        if opts.allow_watch_bookmarks {
            q.append_pair("allowWatchBookmarks", "true");
        }
        if let Some(t) = opts.timeout {
            q.append_pair("timeoutSeconds", &t.as_secs().max(1).to_string());
        }
        if opts.send_initial_events {
            q.append_pair("sendInitialEvents", "true");
            q.append_pair("resourceVersionMatch", "NotOlderThan");
        }
        selectors(
            &mut q,
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        );
        with_query(self.collection_path(), q.finish())
    }
}

fn selectors(
    q: &mut form_urlencoded::Serializer<'_, String>,
    label: Option<&str>,
    field: Option<&str>,
) {
    if let Some(l) = label.filter(|s| !s.is_empty()) {
        q.append_pair("labelSelector", l);
    }
    if let Some(f) = field.filter(|s| !s.is_empty()) {
        q.append_pair("fieldSelector", f);
    }
}

fn with_query(path: String, query: String) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

/// Whether `group` is served by kube-apiserver itself (and so speaks protobuf): the core group,
/// groups without a dot (`apps`, `batch`, `policy`, `autoscaling`), and `*.k8s.io` groups
/// (`networking.k8s.io`, `rbac.authorization.k8s.io`). Custom resource groups must contain a
/// dot and may not use the `k8s.io` suffixes without an API approval, so they answer `false`.
pub fn is_builtin_group(group: &str) -> bool {
    group.is_empty() || !group.contains('.') || group.ends_with(".k8s.io")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn paths_and_queries() {
        let r = ApiResource::new("example.com", "v1", "widgets", "Widget").in_namespace("team-a");
        assert!(!r.protobuf);
        assert_eq!(r.accept(), "application/json");
        let uri = r.list_uri(&ListOptions {
            resource_version: Some("0".into()),
            limit: Some(500),
            continue_token: Some("x+y/z".into()),
            label_selector: Some("app in (a,b),!tier".into()),
            ..Default::default()
        });
        assert_eq!(
            uri,
            "/apis/example.com/v1/namespaces/team-a/widgets?resourceVersion=0&limit=500&continue=x%2By%2Fz&labelSelector=app+in+%28a%2Cb%29%2C%21tier"
        );
        let w = ApiResource::core("v1", "pods", "Pod").watch_uri(&WatchOptions {
            resource_version: "42".into(),
            allow_watch_bookmarks: true,
            timeout: Some(Duration::from_millis(300)),
            send_initial_events: true,
            field_selector: Some("spec.nodeName=n1".into()),
            ..Default::default()
        });
        assert_eq!(
            w,
            "/api/v1/pods?watch=1&resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&fieldSelector=spec.nodeName%3Dn1"
        );
        assert!(is_builtin_group("rbac.authorization.k8s.io"));
        assert!(is_builtin_group("apps"));
        assert!(!is_builtin_group("cert-manager.io"));
    }
}
