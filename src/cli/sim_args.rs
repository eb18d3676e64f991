//! The simulator's command-line flags shared by `informer serve` and `informer flood`: which
//! fixture objects are stamped from (with their JSON twins, for JSON clients of a protobuf
//! server), and the one place where server behaviour flags become a [`SimConfig`].

use std::path::{Path, PathBuf};

use informer::object::{self, Object};
use std::time::Duration;

use informer::sim::{ETCD_POD_JSON, Fault, SimConfig, SimServer, Templates, default_fixtures_dir};

/// The JSON twin of `k8s-testdata/HEAD/core.v1.Pod.pb`: the same round-trip object in JSON.
const HEAD_POD_JSON: &str = "k8s-testdata/HEAD/core.v1.Pod.json";

/// Which fixture objects are stamped from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Template {
    /// `k8s-testdata/HEAD/core.v1.Pod.pb`: every Pod field set (13.5 KB protobuf).
    HeadPod,
    /// The real Pod an API server stored in etcd (1.6 KB protobuf).
    EtcdPod,
    /// Both protobuf Pods, alternating.
    ProtobufPods,
    /// Seven real OpenShift Pods as JSON (8–33 KB each): the JSON path (JSON whatever
    /// `--format`).
    OpenshiftJson,
    /// The HEAD `apps.v1.Deployment` with `spec.replicas` 1 to 4 (12 KB protobuf), named
    /// `app-N` (one per namespace and app); updates scale them.
    Deployments,
    /// The real etcd Pod in the four states of a Pod becoming ready (1.5 KB protobuf), owned
    /// through a ReplicaSet by the Deployment `app-N` of its app; updates move it between
    /// states. With `deployments` and the same seed, a consistent cluster.
    PodStates,
    /// Every Pod fixture, picked at random per object, for a real size distribution: with
    /// `--format json` the HEAD Pod, the etcd Pod and the seven OpenShift Pods (1.5–33 KB);
    /// with `--format protobuf` the HEAD Pod and the etcd Pod (the OpenShift Pods exist only
    /// as JSON in the fixtures).
    Mixed,
}

impl Template {
    /// Whether updates move objects between the template's variants
    /// ([`SimConfig::update_template`]): the state templates.
    pub(crate) fn update_template(self) -> bool {
        matches!(self, Template::Deployments | Template::PodStates)
    }
}

/// The wire encoding the simulator serves (it serves its templates' encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Protobuf envelopes and length-prefixed watch frames.
    Protobuf,
    /// JSON documents and watch lines (the protobuf fixtures' JSON twins as templates).
    Json,
}

/// The fixtures directory: `--fixtures` or the default search.
pub(crate) fn fixtures_dir(flag: Option<&PathBuf>) -> Result<PathBuf, String> {
    match flag {
        Some(d) => Ok(d.clone()),
        None => default_fixtures_dir().map_err(|e| e.to_string()),
    }
}

/// The templates of `template` in `format`, and for protobuf templates their JSON twins (same
/// order).
pub(crate) fn load_templates(
    template: Template,
    format: Format,
    dir: &Path,
) -> Result<(Templates, Option<Vec<Object>>), String> {
    let twin = |p: &str| -> Result<Object, String> {
        let path = dir.join(p);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        object::decode(bytes.into()).map_err(|e| format!("{}: {e}", path.display()))
    };
    let openshift = || -> Result<Vec<Object>, String> {
        Ok(Templates::openshift_json(dir)
            .map_err(|e| e.to_string())?
            .objects()
            .to_vec())
    };
    let deployment_twins = || -> Result<Vec<Object>, String> {
        Templates::deployment_twins(dir).map_err(|e| e.to_string())
    };
    let pod_state_twins = || -> Result<Vec<Object>, String> {
        Templates::pod_state_twins(dir).map_err(|e| e.to_string())
    };
    if format == Format::Json {
        let objects = match template {
            Template::HeadPod => vec![twin(HEAD_POD_JSON)?],
            Template::EtcdPod => vec![twin(ETCD_POD_JSON)?],
            Template::ProtobufPods => vec![twin(HEAD_POD_JSON)?, twin(ETCD_POD_JSON)?],
            Template::OpenshiftJson => openshift()?,
            Template::Mixed => {
                let mut v = vec![twin(HEAD_POD_JSON)?, twin(ETCD_POD_JSON)?];
                v.extend(openshift()?);
                v
            }
            Template::Deployments => deployment_twins()?,
            Template::PodStates => pod_state_twins()?,
        };
        return Ok((
            Templates::from_objects(objects).map_err(|e| e.to_string())?,
            None,
        ));
    }
    let (templates, twins) = match template {
        Template::Mixed => (
            Templates::protobuf_pods(dir),
            Some(vec![twin(HEAD_POD_JSON)?, twin(ETCD_POD_JSON)?]),
        ),
        Template::HeadPod => (Templates::head_pod(dir), Some(vec![twin(HEAD_POD_JSON)?])),
        Template::EtcdPod => (Templates::etcd_pod(dir), Some(vec![twin(ETCD_POD_JSON)?])),
        Template::ProtobufPods => (
            Templates::protobuf_pods(dir),
            Some(vec![twin(HEAD_POD_JSON)?, twin(ETCD_POD_JSON)?]),
        ),
        Template::OpenshiftJson => (Templates::openshift_json(dir), None),
        Template::Deployments => (Templates::deployments(dir), Some(deployment_twins()?)),
        Template::PodStates => (Templates::pod_states(dir), Some(pod_state_twins()?)),
    };
    Ok((templates.map_err(|e| e.to_string())?, twins))
}

/// `n` JSON twins made from the JSON fixture at `path` by `edit(document, i)`: the same
/// edits [`Templates::deployments`] and [`Templates::pod_states`] make to the protobuf one.
/// Server behaviour flags. Each one left unset keeps the value of the command's base
/// configuration; [`SimFlags::apply`] is the only place that turns them into [`SimConfig`]
/// fields (fault switches belong here too).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct SimFlags {
    /// Events kept for watches (the watch cache window); older resourceVersions get 410.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub(crate) history_window: Option<u64>,
    /// Lossless flow control: never drop history a watcher still needs, slow the flood down
    /// instead (no real server does this; on by default for `flood`, off for `serve`).
    #[arg(long)]
    pub(crate) flow_control: Option<bool>,
    /// Namespaces objects are spread over (`ns-0`, `ns-1`, ...).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) namespaces: Option<u32>,
    /// Apps per namespace (`app-0`, `app-1`, ...): each app's Pods share a ReplicaSet, hence
    /// their labels, owner reference and `generateName` (default 50).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) apps: Option<u32>,
    /// A BOOKMARK every this many resourceVersions (0 = only idle bookmarks).
    #[arg(long)]
    pub(crate) bookmark_every: Option<u64>,
    /// Largest list page served, whatever `limit` asks for.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_page_size: Option<u32>,
    /// Largest watch chunk, in bytes: events are written together up to this size (default
    /// 64 KiB); 1 writes one event per chunk, as kube-apiserver does.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=(64 << 20)))]
    pub(crate) max_chunk_bytes: Option<u64>,
    /// Reject streaming lists (`sendInitialEvents`) with 422, as a server without WatchList.
    #[arg(long)]
    pub(crate) no_watch_list: bool,
    /// Give every Pod its own spec and status, varied as a real cluster's differ (node, Pod
    /// IP, images and tags, env values, container IDs, timestamps, container and volume
    /// counts), instead of its template's bytes (Pod templates only).
    #[arg(long)]
    pub(crate) vary: bool,
    /// Standing fault: every watch stream ends cleanly after this many events.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) watch_close_after: Option<u64>,
    /// Standing fault: lists (but quorum reads) are served this many resourceVersions behind.
    #[arg(long)]
    pub(crate) list_lag: Option<u64>,
    /// Standing fault: `continue` tokens expire (410) after this many seconds.
    #[arg(long, value_parser = super::duration::seconds)]
    pub(crate) continue_ttl: Option<f64>,
    /// A BOOKMARK every this many seconds on watches that allow them (0 = none but
    /// `--bookmark-every`).
    #[arg(long, value_parser = super::duration::seconds)]
    pub(crate) bookmark_interval: Option<f64>,
    /// One-shot faults armed at start, repeatable: `list:410`, `list:429:3`, `watch:500`,
    /// `watch:too-large`, `watch:refused`, `stream:close@100`, `stream:410`, `stream:corrupt`,
    /// `stream:oversized`, `stream:stall`, `stream:reset@10` (see `informer::sim::Fault`; more
    /// can be armed while serving with `POST /informer/v1/faults?fault=SPEC`). 410 and
    /// too-large answers wait for a list or watch at a resourceVersion, as a real server
    /// gives them only to those.
    #[arg(long = "fault", value_name = "SPEC")]
    pub(crate) faults: Vec<Fault>,
}

impl SimFlags {
    /// `base` with every flag that was given applied.
    pub(crate) fn apply(&self, mut cfg: SimConfig) -> SimConfig {
        if let Some(w) = self.history_window {
            cfg = cfg.history_window(w as usize);
        }
        if let Some(f) = self.flow_control {
            cfg = cfg.flow_control(f);
        }
        if let Some(n) = self.namespaces {
            cfg = cfg.namespaces(n);
        }
        if let Some(n) = self.apps {
            cfg = cfg.apps(n);
        }
        if let Some(b) = self.bookmark_every {
            cfg = cfg.bookmark_every(b);
        }
        if let Some(p) = self.max_page_size {
            cfg = cfg.max_page_size(Some(p));
        }
        if let Some(b) = self.max_chunk_bytes {
            cfg = cfg.max_chunk_bytes(b as usize);
        }
        if self.vary {
            cfg = cfg.vary(true);
        }
        if self.no_watch_list {
            cfg = cfg.watch_list(false);
        }
        if let Some(n) = self.watch_close_after {
            cfg = cfg.watch_close_after(Some(n));
        }
        if let Some(n) = self.list_lag {
            cfg = cfg.list_lag(n);
        }
        if let Some(t) = self.continue_ttl {
            cfg = cfg.continue_ttl(Some(Duration::from_secs_f64(t.max(0.0))));
        }
        if let Some(t) = self.bookmark_interval {
            cfg = cfg.bookmark_interval((t > 0.0).then(|| Duration::from_secs_f64(t)));
        }
        cfg
    }

    /// Arms the one-shot faults on `sim`.
    pub(crate) fn arm(&self, sim: &SimServer) {
        for f in &self.faults {
            sim.inject(*f);
        }
    }
}
