//! Finding a resource by the name a user types (`pods`, `po`, `deployments.apps`,
//! `deployments.v1.apps`, `widgets.example.com`) through the discovery documents, as
//! `kubectl get` resolves its argument. Upstream: `client-go/discovery/discovery_client.go`
//! (`ServerGroups`, `ServerResourcesForGroupVersion`), `client-go/restmapper`.

use http::Request;
use http::header::ACCEPT;
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResource, APIResourceList};
use kube::client::Body as KubeBody;

use super::ApiResource;
use super::http::chain;

/// Largest discovery document read (16 MiB).
const MAX_DISCOVERY_BYTES: usize = 16 << 20;

/// Why a resource could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A discovery request failed.
    #[error("GET {path}: {message}")]
    Request {
        /// The path asked for.
        path: String,
        /// What went wrong (transport error or HTTP status and body).
        message: String,
    },
    /// A discovery document did not parse.
    #[error("GET {path}: {source}")]
    Parse {
        /// The path asked for.
        path: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// No served resource has that name.
    #[error("the server doesn't have a resource type {0:?}")]
    NotFound(String),
    /// The resource cannot be listed and watched.
    #[error("resource {resource} does not support list and watch (verbs: {verbs:?})")]
    NotWatchable {
        /// The resource.
        resource: String,
        /// Its verbs.
        verbs: Vec<String>,
    },
}

/// A resolved resource: where it lives and whether it is namespaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// Group, version, plural name, kind (no namespace set).
    pub resource: ApiResource,
    /// Whether objects live in namespaces (`false`: cluster-scoped, e.g. nodes).
    pub namespaced: bool,
}

/// Resolves `name` (`RESOURCE`, `RESOURCE.GROUP` or `RESOURCE.VERSION.GROUP`; plural,
/// singular, short name or kind, case-insensitive) against the server's discovery documents:
/// `/api/v1` first for unqualified names, then the preferred version of each group in
/// `/apis` (or the named version).
///
/// # Errors
/// [`DiscoveryError::NotFound`] when nothing matches; [`DiscoveryError::NotWatchable`] when the
/// match has no `list`/`watch` verbs; request and parse errors.
pub async fn discover(
    client: &kube::Client,
    name: &str,
) -> Result<DiscoveredResource, DiscoveryError> {
    let lower = name.to_ascii_lowercase();
    let (resource, qualifier) = match lower.split_once('.') {
        Some((r, q)) => (r.to_owned(), Some(q.to_owned())),
        None => (lower.clone(), None),
    };
    if qualifier.is_none() {
        let list: APIResourceList = get_json(client, "/api/v1").await?;
        if let Some(found) = pick(&list, &resource, "", "v1")? {
            return Ok(found);
        }
    }
    let groups: APIGroupList = get_json(client, "/apis").await?;
    for g in &groups.groups {
        // `deployments.apps` names the group; `deployments.v1.apps` the version too.
        let version = match qualifier.as_deref() {
            None => None,
            Some(q) if q == g.name => None,
            Some(q) => match q.split_once('.') {
                Some((v, grp)) if grp == g.name => Some(v.to_owned()),
                _ => continue,
            },
        };
        let version = match version {
            Some(v) => v,
            None => match g.preferred_version.as_ref().or(g.versions.first()) {
                Some(v) => v.version.clone(),
                None => continue,
            },
        };
        let path = format!("/apis/{}/{}", g.name, version);
        let list: APIResourceList = get_json(client, &path).await?;
        if let Some(found) = pick(&list, &resource, &g.name, &version)? {
            return Ok(found);
        }
    }
    Err(DiscoveryError::NotFound(name.to_owned()))
}

fn matches(r: &APIResource, name: &str) -> bool {
    !r.name.contains('/')
        && (r.name == name
            || r.singular_name == name
            || r.kind.eq_ignore_ascii_case(name)
            || r.short_names.iter().flatten().any(|s| s == name))
}

fn pick(
    list: &APIResourceList,
    name: &str,
    group: &str,
    version: &str,
) -> Result<Option<DiscoveredResource>, DiscoveryError> {
    let Some(r) = list.resources.iter().find(|r| matches(r, name)) else {
        return Ok(None);
    };
    if !(r.verbs.iter().any(|v| v == "list") && r.verbs.iter().any(|v| v == "watch")) {
        return Err(DiscoveryError::NotWatchable {
            resource: r.name.clone(),
            verbs: r.verbs.clone(),
        });
    }
    Ok(Some(DiscoveredResource {
        resource: ApiResource::new(group, version, &r.name, &r.kind),
        namespaced: r.namespaced,
    }))
}

async fn get_json<T: serde::de::DeserializeOwned>(
    client: &kube::Client,
    path: &str,
) -> Result<T, DiscoveryError> {
    let err = |message: String| DiscoveryError::Request {
        path: path.to_owned(),
        message,
    };
    let req = Request::get(path)
        .header(ACCEPT, "application/json")
        .body(KubeBody::empty())
        .map_err(|e| err(e.to_string()))?;
    let resp = client.send(req).await.map_err(|e| err(chain(&e)))?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| err(chain(&e)))?;
        if let Ok(d) = frame.into_data() {
            if buf.len() + d.len() > MAX_DISCOVERY_BYTES {
                return Err(err(format!("document over {MAX_DISCOVERY_BYTES} bytes")));
            }
            buf.extend_from_slice(&d);
        }
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&buf[..buf.len().min(512)]).into_owned();
        return Err(err(format!("HTTP {status}: {text}")));
    }
    serde_json::from_slice(&buf).map_err(|source| DiscoveryError::Parse {
        path: path.to_owned(),
        source,
    })
}
