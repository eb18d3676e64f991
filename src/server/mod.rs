//! `informer serve`: the simulated API server ([`SimServer`]) on a real socket (hyper 1,
//! HTTP/1.1), speaking enough of the Kubernetes HTTP API for clients written by others
//! (kubectl, kube-rs, client-go) and for [`crate::client::HttpListerWatcher`]. [`serve`] says
//! what is served.

mod api;
mod cluster;
mod control;
mod deployment_parts;
mod discovery;
mod fields;
mod filter;
mod get;
mod list;
mod negotiate;
mod patch;
mod proto_json;
mod request;
mod response;
mod router;
mod stats;
mod table;
mod transcode;
mod watch;
mod write;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

pub use discovery::ServedResource;
pub use stats::ServerStats;
pub use transcode::{JsonTranscoder, TranscodeError};

use api::Api;
use response::DropConnection;
use router::Router;

use crate::object::{GroupVersionKind, Object};
use crate::sim::{SimError, SimServer};

/// How the simulator's resource is presented over HTTP.
#[derive(Clone, Debug, Default)]
pub struct ServerConfig {
    /// The resource as discovery shows it. Default: from the simulator (its
    /// [`crate::sim::SimConfig::resource`] plural, the templates' kind, namespaced when the
    /// templates have a namespace; short name `po` for pods).
    pub resource: Option<ServedResource>,
    /// JSON twins of the simulator's protobuf templates (same order): JSON clients get a
    /// template copy's JSON by a byte comparison and a copy. `None`: every object is converted
    /// by the Kubernetes schema (kinds it does not know are served to protobuf clients only;
    /// JSON simulators need none).
    pub json_twins: Option<Vec<Object>>,
}

impl ServerConfig {
    /// Sets [`ServerConfig::json_twins`].
    #[must_use]
    pub fn json_twins(mut self, twins: Vec<Object>) -> Self {
        self.json_twins = Some(twins);
        self
    }

    /// Sets [`ServerConfig::resource`].
    #[must_use]
    pub fn resource(mut self, resource: ServedResource) -> Self {
        self.resource = Some(resource);
        self
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The JSON twins do not fit the templates.
    #[error("JSON twins: {0}")]
    Twins(#[from] TranscodeError),
    /// [`serve_many`] was given no simulator.
    #[error("no resource to serve")]
    NoResources,
    /// Two simulators would serve the same `group/version/plural`.
    #[error("two simulators serve {0}")]
    DuplicateResource(String),
    /// The built-in `namespaces` or `events` could not be made (a bug).
    #[error("built-in resources: {0}")]
    Builtin(String),
    /// Binding or configuring the socket failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The resource a simulator serves, as discovery describes it by default.
pub fn served_resource(sim: &SimServer) -> ServedResource {
    let gvk = sim.gvk();
    let plural = sim.config().resource.clone();
    let namespaced = sim
        .config()
        .templates
        .objects()
        .iter()
        .any(|o| !o.namespace().is_empty());
    let short_names = match (gvk.group.as_str(), plural.as_str()) {
        ("", "pods") => vec!["po".to_owned()],
        ("", "nodes") => vec!["no".to_owned()],
        ("", "configmaps") => vec!["cm".to_owned()],
        ("", "namespaces") => vec!["ns".to_owned()],
        ("", "events") => vec!["ev".to_owned()],
        ("", "services") => vec!["svc".to_owned()],
        ("apps", "deployments") => vec!["deploy".to_owned()],
        _ => vec![],
    };
    ServedResource {
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        singular: gvk.kind.to_lowercase(),
        kind: gvk.kind.clone(),
        plural,
        namespaced,
        short_names,
    }
}

/// A running HTTP server. Dropping the handle leaves it running until its runtime stops;
/// [`ServerHandle::shutdown`] stops it and closes every connection.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    hold: tokio::sync::watch::Sender<bool>,
    stats: Arc<ServerStats>,
    task: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: what to give kubectl's `--server` or [`crate::client::ClientOptions`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's counters.
    pub fn stats(&self) -> &Arc<ServerStats> {
        &self.stats
    }

    /// While `true`, watch responses are sent (status and headers) but their body is held
    /// before the first byte; the simulator's watcher is already registered at its start
    /// resourceVersion. Releasing (`false`) lets every held stream go. For benchmarks that
    /// prepare a backlog of events and then measure how fast clients drain it.
    pub fn hold_watches(&self, hold: bool) {
        self.hold.send_replace(hold);
    }

    /// Stops accepting, closes every connection (open watches end abruptly) and waits for the
    /// accept loop to finish.
    ///
    /// # Cancel safety
    /// Cancel safe: the stop is signalled before the first await.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        self.hold.send_replace(false);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.stop.send_replace(true);
        }
    }
}

/// Serves `sim` over HTTP on `addr` (`127.0.0.1:0` for any free port). The accept loop and
/// one task per connection run on the current tokio runtime.
///
/// # What is served
///
/// - discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>`,
///   `/apis/<group>/<version>` (legacy documents in JSON; clients asking for aggregated
///   discovery fall back to them), `/healthz`, `/livez`, `/readyz`;
/// - the simulator's resource (or each of several simulators' resources, [`serve_many`]),
///   cluster-wide and per namespace
///   (`/api/v1[/namespaces/<ns>]/pods[/<name>]`, `/apis/<group>/<version>/...`): get, list
///   with `limit`/`continue`, `resourceVersion` and `resourceVersionMatch`, watch (`watch=1` or
///   the legacy `/watch/` prefix) with `allowWatchBookmarks`, `timeoutSeconds` and streaming
///   lists (`sendInitialEvents=true&resourceVersionMatch=NotOlderThan`); label selectors
///   (every operator of `labels.Parse`) and the field selectors the real server supports for
///   the kind (`metadata.name`, `metadata.namespace` on namespaced resources; for Pods also
///   `spec.nodeName`, `spec.restartPolicy`, `spec.schedulerName`, `spec.serviceAccountName`,
///   `spec.hostNetwork`, `status.phase`, `status.podIP`, `status.nominatedNodeName`; the
///   fields of Events, Namespaces, Nodes, Secrets and ReplicaSets), on lists and watches; a
///   watch sees an object that starts or stops matching as ADDED or DELETED, as from a real
///   server's watch cache; other fields are a 400 `field label not supported`;
/// - writes, with the simulator's rules ([`SimServer::create_object`],
///   [`SimServer::replace_object`], [`SimServer::delete_object`]): `POST` to a collection,
///   `PUT`, `PATCH` (JSON merge, JSON patch, strategic merge: see `patch.rs`) and `DELETE`
///   (`DeleteOptions` preconditions) of an object, its `status` subresource, and the `scale`
///   subresource of Deployments, ReplicaSets and StatefulSets (`autoscaling/v1` `Scale`);
///   bodies in protobuf or JSON whatever the simulator keeps (converted by the Kubernetes
///   schema, `proto_json.rs`; 400 naming the field for a value of the wrong type, 415 for a
///   kind the schema does not know), up to 3 MiB (413 beyond); `dryRun` and server-side apply
///   are refused;
/// - `namespaces` (the simulators' and a new cluster's four) and `events` (empty), writable,
///   unless a simulator serves them;
/// - protobuf or JSON by the `Accept` header; a protobuf simulator answers JSON through its
///   templates' JSON twins or the Kubernetes schema ([`JsonTranscoder`]); `Table` requests
///   (kubectl's `get`) get a Table with upstream's columns for Pods, Deployments, Namespaces
///   and Events (Name and Age for others), `PartialObjectMetadata` requests the metadata-only
///   form;
/// - errors as `Status` bodies with the HTTP code: 410 Expired for lists and continue tokens
///   older than the history window (watches get an ERROR event 410, as from a real server),
///   504 with `ResourceVersionTooLarge`, 400, 404, 405, 406, 409 (AlreadyExists, Conflict), 413,
///   415, 422;
/// - simulator control, outside the Kubernetes API: `POST /informer/v1/flood?events=N` makes
///   N changes (honouring flow control) and answers the resulting resourceVersion;
///   `POST /informer/v1/faults?fault=list:410&fault=stream:reset@5` arms one-shot faults
///   ([`crate::sim::Fault`]); `POST /informer/v1/rate?rate=R` sets the rate of the flood
///   driver ([`drive`], `informer serve --rate`), `POST /informer/v1/pause` and
///   `/informer/v1/resume` stop and restart it; `GET /informer/v1/stats` (with the driver's
///   `rate` and `paused`); each with `resource=<plural>` to pick one of several resources.
///
/// Simulator faults reach clients as a real server's failures would: error answers as
/// `Status` responses, `refused` as a connection closed without an answer, stream faults
/// (close, ERROR 410, corrupt or oversized frames, stall, reset) on the wire as the simulator
/// produces them (a reset cuts the HTTP response mid-body). Watches that this layer re-encodes
/// (other encoding, filtered) cut the response instead of forwarding a corrupt frame.
///
/// # Errors
/// [`ServerError::Bind`]; [`ServerError::Twins`] when the JSON twins do not fit.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub async fn serve(
    sim: SimServer,
    config: ServerConfig,
    addr: SocketAddr,
) -> Result<ServerHandle, ServerError> {
    serve_many(vec![(sim, config)], addr).await
}

/// Serves several simulators on one address, one resource each (e.g. the Deployments and the
/// Pods of one simulated cluster, [`crate::sim::Templates::deployments`] and
/// [`crate::sim::Templates::pod_states`]): discovery lists them all, each resource's paths go
/// to its simulator, and the control endpoints take `resource=<plural>` (default: the first
/// one). Otherwise as [`serve`].
///
/// Each resource keeps its own simulator's resourceVersion sequence, where a real API server
/// draws every resource's versions from one etcd revision; an informer compares versions only
/// within its own resource (as client-go's reflector does), so it works the same. The
/// simulators share the server's counters ([`ServerHandle::stats`]) and its hold on new watch
/// streams ([`ServerHandle::hold_watches`]).
///
/// # Errors
/// [`ServerError::NoResources`] for an empty list; [`ServerError::DuplicateResource`] when two
/// simulators would serve the same group, version and plural; those of [`serve`].
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub async fn serve_many(
    resources: Vec<(SimServer, ServerConfig)>,
    addr: SocketAddr,
) -> Result<ServerHandle, ServerError> {
    if resources.is_empty() {
        return Err(ServerError::NoResources);
    }
    let mut resources = resources;
    let builtin = cluster::builtin(&resources)?;
    resources.extend(builtin);
    let (hold, _) = tokio::sync::watch::channel(false);
    let stats = Arc::new(ServerStats::default());
    let mut apis: Vec<Api> = Vec::with_capacity(resources.len());
    for (sim, config) in resources {
        let json = match &config.json_twins {
            Some(twins) => Some(JsonTranscoder::new(&sim.config().templates, twins)?),
            // Without twins, JSON clients of a protobuf simulator get its objects converted by
            // the Kubernetes schema, for the kinds it knows.
            None if sim.encoding() == crate::object::Encoding::Protobuf
                && proto_json::message_for(sim.gvk()).is_some() =>
            {
                Some(JsonTranscoder::schema_only(sim.gvk().clone()))
            }
            None => None,
        };
        let resource = config
            .resource
            .clone()
            .unwrap_or_else(|| served_resource(&sim));
        if apis.iter().any(|a| {
            (&a.resource.group, &a.resource.version, &a.resource.plural)
                == (&resource.group, &resource.version, &resource.plural)
        }) {
            return Err(ServerError::DuplicateResource(format!(
                "{}/{}",
                resource.group_version(),
                resource.plural
            )));
        }
        let list_gvk = {
            let g = sim.gvk();
            GroupVersionKind::new(&g.group, &g.version, &format!("{}List", g.kind))
        };
        apis.push(Api {
            sim,
            resource,
            json,
            hold: hold.clone(),
            stats: stats.clone(),
            list_gvk,
            namespaces: None,
        });
    }
    let namespaces = apis
        .iter()
        .find(|a| a.resource.group.is_empty() && a.resource.plural == "namespaces")
        .map(|a| a.sim.clone());
    for a in &mut apis {
        a.namespaces.clone_from(&namespaces);
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    let (stop, mut stop_rx) = tokio::sync::watch::channel(false);
    let api = Arc::new(Router {
        apis,
        stats: stats.clone(),
        addr: local,
    });
    let task = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                () = stopped(&mut stop_rx) => break,
                accepted = listener.accept() => {
                    let Ok((tcp, _)) = accepted else {
                        // Out of file descriptors and the like: wait a little, go on.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = tcp.set_nodelay(true);
                    let api = api.clone();
                    conns.spawn(async move {
                        let svc = service_fn(move |req| {
                            let api = api.clone();
                            async move {
                                let r = api.handle(req).await;
                                if r.extensions().get::<DropConnection>().is_some() {
                                    // hyper closes the connection without an answer.
                                    return Err(std::io::Error::other("simulated connection failure"));
                                }
                                Ok(r)
                            }
                        });
                        // A client going away mid-response is normal for watches.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), svc)
                            .await;
                    });
                }
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    });
    Ok(ServerHandle {
        addr: local,
        stop,
        hold,
        stats,
        task: Some(task),
    })
}

/// Resolves once the stop flag is set (or its sender is gone).
async fn stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Changes objects at `rate` events per second until cancelled (`informer serve --rate`):
/// sets the simulator's rate ([`SimServer::set_rate`]) and runs its driver
/// ([`SimServer::drive`]), which the control endpoints can then pause, resume and re-rate.
///
/// # Errors
/// The simulator's [`SimError`].
///
/// # Cancel safety
/// Cancel safe: changes are made in whole batches.
pub async fn drive(sim: &SimServer, rate: f64) -> Result<(), SimError> {
    sim.set_rate(rate);
    sim.drive().await
}
