//! Where a flood's changes are made and its truth read: the simulator in this process (built
//! from the flags), or a running `informer serve` reached over HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use informer::client::{ApiResource, ClientOptions, HttpListerWatcher, discover};
use informer::object::{Object, decode_list};
use informer::reflector::{ListOptions, ListerWatcher};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{FloodMix, SimConfig, SimServer, Truth};

use super::args::{Accept, FloodArgs};
use crate::cli::sim_args::{fixtures_dir, load_templates};

/// Where the flood's changes are made and its truth read.
pub(super) enum Source {
    /// The simulator in this process.
    Local(SimServer),
    /// A running `informer serve`: changes through `POST /informer/v1/flood`, truth from an
    /// exact list at the store's resourceVersion.
    Remote(Box<Remote>),
}

/// A running `informer serve` reached over HTTP.
pub(super) struct Remote {
    client: kube::Client,
    lw: HttpListerWatcher,
}

impl Source {
    /// The simulator, when it is in this process.
    pub(super) fn local(&self) -> Option<&SimServer> {
        match self {
            Source::Local(sim) => Some(sim),
            Source::Remote(_) => None,
        }
    }

    /// The server's current resourceVersion.
    pub(super) async fn resource_version(&self) -> Result<u64, String> {
        match self {
            Source::Local(sim) => Ok(sim.resource_version()),
            Source::Remote(r) => {
                let v = control(&r.client, http::Method::GET, "/informer/v1/stats").await?;
                Ok(v["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0))
            }
        }
    }

    /// Makes `n` changes; the resourceVersion of the last.
    pub(super) async fn flood(&self, n: u64) -> Result<u64, String> {
        match self {
            Source::Local(sim) => sim.flood(n).await.map_err(|e| e.to_string()),
            Source::Remote(r) => {
                let path = format!("/informer/v1/flood?events={n}");
                let v = control(&r.client, http::Method::POST, &path).await?;
                v["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("POST {path}: no resourceVersion in {v}"))
            }
        }
    }

    /// The server's objects at `rv` (remote) or now (local).
    pub(super) async fn truth(&self, rv: u64) -> Result<Truth, String> {
        match self {
            Source::Local(sim) => Ok(sim.truth()),
            Source::Remote(r) => {
                let mut opts = ListOptions {
                    resource_version: Some(rv.to_string()),
                    resource_version_match: Some("Exact".into()),
                    limit: Some(500),
                    ..Default::default()
                };
                let mut objects = BTreeMap::new();
                loop {
                    let page = r.lw.list(&opts).await.map_err(|e| e.to_string())?;
                    let list = decode_list(page).map_err(|e| e.to_string())?;
                    for o in list.items {
                        objects.insert(o.key(), Arc::new(o));
                    }
                    if list.continue_token.is_empty() {
                        break;
                    }
                    opts.continue_token = Some(list.continue_token);
                    opts.resource_version = None;
                    opts.resource_version_match = None;
                }
                Ok(Truth {
                    resource_version: rv,
                    objects,
                })
            }
        }
    }
}

/// A request to the simulator's control endpoints; the JSON answer.
async fn control(
    client: &kube::Client,
    method: http::Method,
    path: &str,
) -> Result<serde_json::Value, String> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    let resp = client.send(req).await.map_err(|e| format!("{path}: {e}"))?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "{path}: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{path}: {e}"))
}

/// The simulator of an in-process flood, and the JSON twins of its templates.
pub(super) fn build_sim(args: &FloodArgs) -> Result<(SimServer, Option<Vec<Object>>), String> {
    let dir = fixtures_dir(args.fixtures.as_ref())?;
    let (templates, twins) = load_templates(args.template, args.format, &dir)?;
    let objects = args.objects as usize;
    let (create, update, delete) = args.mix.unwrap_or_else(|| {
        let rest = 100 - args.update_percent;
        (rest.div_ceil(2), args.update_percent, rest / 2)
    });
    let mix = FloodMix {
        target_objects: objects,
        create,
        update,
        delete,
    };
    let base = SimConfig::new(templates)
        .seed(args.seed)
        .mix(mix)
        .initial_objects(objects)
        .history_window(10_000)
        .flow_control(true)
        .update_template(args.template.update_template())
        .extra_labels(args.labels)
        .extra_annotations(args.annotations)
        .too_large_retry_after(args.fault_retry_after.unwrap_or(1));
    let sim = SimServer::new(args.sim.apply(base)).map_err(|e| e.to_string())?;
    args.sim.arm(&sim);
    Ok((sim, twins))
}

/// A flood over HTTP: the server (in this process on a loopback port, or the one `--server`
/// names), the informer's lister-watcher to it.
pub(super) struct HttpSource {
    pub(super) source: Source,
    pub(super) lw: HttpListerWatcher,
    /// `http URL (ACCEPT)`.
    pub(super) label: String,
    /// The server this process started, to shut down at the end.
    pub(super) handle: Option<ServerHandle>,
}

impl HttpSource {
    /// Starts the server unless `--server` is given, and connects to it.
    pub(super) fn connect(
        args: &FloodArgs,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Self, String> {
        let mut handle: Option<ServerHandle> = None;
        let (url, local) = match &args.server {
            Some(url) => (url.clone(), None),
            None => {
                let (sim, twins) = build_sim(args)?;
                let mut sc = ServerConfig::default();
                // A varied Pod's fields match no template: it has no JSON twin.
                if let Some(t) = twins.filter(|_| !args.sim.vary) {
                    sc = sc.json_twins(t);
                }
                let h = runtime
                    .block_on(serve(
                        sim.clone(),
                        sc,
                        "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
                    ))
                    .map_err(|e| e.to_string())?;
                let url = h.url();
                handle = Some(h);
                (url, Some(sim))
            }
        };
        let client = runtime
            .block_on(
                ClientOptions {
                    server: Some(url.clone()),
                    ..Default::default()
                }
                .client(),
            )
            .map_err(|e| e.to_string())?;
        let resource: ApiResource = runtime
            .block_on(discover(&client, "pods"))
            .map_err(|e| e.to_string())?
            .resource
            .with_protobuf(args.accept == Accept::Protobuf);
        let lw = HttpListerWatcher::new(client.clone(), resource);
        let source = match local {
            Some(sim) => Source::Local(sim),
            None => Source::Remote(Box::new(Remote {
                client,
                lw: lw.clone(),
            })),
        };
        Ok(HttpSource {
            source,
            lw,
            label: format!("http {} ({:?})", url, args.accept),
            handle,
        })
    }
}
