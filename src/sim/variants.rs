//! The edits that make the state templates ([`Templates::deployments`],
//! [`Templates::pod_states`]) coherent objects, in both encodings side by side (the protobuf
//! variant and its JSON twin must stay the same object), and the twins themselves.
//!
//! - A Deployment variant has `spec.replicas` from [`DEPLOYMENT_REPLICAS`], a valid selector
//!   (`app: app`; a simulator rewrites it to the object's own app, [`for_app`]), a
//!   `RollingUpdate` strategy, not paused, and a status that says its first generation rolled
//!   out (every replica updated, ready and available; `Available` and `Progressing`).
//! - A Pod state has the phase and conditions of [`POD_STATES`] and container statuses to
//!   match: waiting in `ContainerCreating` while Pending, running and ready once Running.
//!
//! [`Templates::deployments`]: super::Templates::deployments
//! [`Templates::pod_states`]: super::Templates::pod_states

use std::path::Path;

use k8s_pb::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, DeploymentStrategy,
};
use k8s_pb::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, Pod, PodCondition,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use serde_json::{Value, json};

use super::SimError;
use crate::object::{self, Object};

/// `spec.replicas` of the [`super::Templates::deployments`] variants, in order.
pub const DEPLOYMENT_REPLICAS: [i32; 4] = [1, 2, 3, 4];

/// The states of the [`super::Templates::pod_states`] variants, in order: `(status.phase, conditions
/// as (type, status))`. They are the four states the real Pod recorded in
/// `real/pulumi-watch-recordings/pod/createSuccess.json` goes through from creation to ready
/// (condition times, reasons and messages left out).
pub const POD_STATES: [(&str, &[(&str, &str)]); 4] = [
    ("Pending", &[]),
    ("Pending", &[("PodScheduled", "True")]),
    (
        "Pending",
        &[
            ("Initialized", "True"),
            ("Ready", "False"),
            ("ContainersReady", "False"),
            ("PodScheduled", "True"),
        ],
    ),
    (
        "Running",
        &[
            ("Initialized", "True"),
            ("Ready", "True"),
            ("ContainersReady", "True"),
            ("PodScheduled", "True"),
        ],
    ),
];

/// The JSON twin of [`super::HEAD_DEPLOYMENT`].
pub const HEAD_DEPLOYMENT_JSON: &str = "k8s-testdata/HEAD/apps.v1.Deployment.json";
/// The JSON twin of [`super::ETCD_POD`].
pub const ETCD_POD_JSON: &str = "real/auger-etcd-real-protobuf/json__pod.json";

/// When the Pod states' containers started (the simulator's own epoch plus 10 s).
const STARTED_AT: i64 = 1_700_000_010;

/// The label a Deployment template selects on, before [`for_app`].
const APP: &str = "app";

/// Deployment variant `i`, protobuf.
pub(crate) fn deployment_pb(d: &mut Deployment, i: usize) {
    let r = DEPLOYMENT_REPLICAS[i];
    let spec = d.spec.get_or_insert_with(Default::default);
    spec.replicas = Some(r);
    spec.paused = Some(false);
    spec.strategy = Some(DeploymentStrategy {
        r#type: Some("RollingUpdate".into()),
        rolling_update: None,
    });
    set_app_pb(d, APP);
    let condition = |t: &str, reason: &str| DeploymentCondition {
        r#type: Some(t.into()),
        status: Some("True".into()),
        reason: Some(reason.into()),
        ..DeploymentCondition::default()
    };
    d.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(r),
        updated_replicas: Some(r),
        ready_replicas: Some(r),
        available_replicas: Some(r),
        conditions: vec![
            condition("Available", "MinimumReplicasAvailable"),
            condition("Progressing", "NewReplicaSetAvailable"),
        ],
        ..DeploymentStatus::default()
    });
}

/// Deployment variant `i`, JSON (the same object as [`deployment_pb`]).
pub(crate) fn deployment_json(d: &mut Value, i: usize) {
    let r = DEPLOYMENT_REPLICAS[i];
    d["spec"]["replicas"] = r.into();
    d["spec"]["paused"] = false.into();
    d["spec"]["strategy"] = json!({"type": "RollingUpdate"});
    set_app_json(d, APP);
    let condition = |t: &str, reason: &str| json!({"type": t, "status": "True", "reason": reason});
    d["status"] = json!({
        "observedGeneration": 1,
        "replicas": r,
        "updatedReplicas": r,
        "readyReplicas": r,
        "availableReplicas": r,
        "conditions": [
            condition("Available", "MinimumReplicasAvailable"),
            condition("Progressing", "NewReplicaSetAvailable"),
        ],
    });
}

fn set_app_pb(d: &mut Deployment, app: &str) {
    let spec = d.spec.get_or_insert_with(Default::default);
    spec.selector = Some(LabelSelector {
        match_labels: [("app".to_owned(), app.to_owned())].into_iter().collect(),
        match_expressions: Vec::new(),
    });
    let template = spec.template.get_or_insert_with(Default::default);
    let meta = template.metadata.get_or_insert_with(Default::default);
    meta.labels = [("app".to_owned(), app.to_owned())].into_iter().collect();
}

fn set_app_json(d: &mut Value, app: &str) {
    d["spec"]["selector"] = json!({"matchLabels": {"app": app}});
    d["spec"]["template"]["metadata"]["labels"] = json!({"app": app});
}

/// `template` (a Deployment of either encoding) selecting the Pods of `app` (`app-N`), as the
/// simulator's Deployment `app-N` does: its selector and Pod template labels. Other kinds are
/// returned as they are.
///
/// # Errors
/// When the template does not decode as a Deployment.
pub(crate) fn for_app(template: &Object, app: &str) -> Result<Object, SimError> {
    let gvk = template.gvk();
    if gvk.group != "apps" || gvk.kind != "Deployment" {
        return Ok(template.clone());
    }
    Ok(match template.encoding() {
        crate::object::Encoding::Protobuf => {
            use prost::Message as _;
            let mut d: Deployment = template.decode()?;
            set_app_pb(&mut d, app);
            object::decode(object::encode_envelope(gvk, &d.encode_to_vec()))?
        }
        crate::object::Encoding::Json => {
            let mut d = template.to_json_value()?;
            set_app_json(&mut d, app);
            object::decode(d.to_string().into())?
        }
    })
}

/// Pod state `i`, protobuf.
pub(crate) fn pod_state_pb(p: &mut Pod, i: usize) {
    let (phase, conditions) = POD_STATES[i];
    let status = p.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_owned());
    status.conditions = conditions
        .iter()
        .map(|(t, s)| PodCondition {
            r#type: Some((*t).to_owned()),
            status: Some((*s).to_owned()),
            ..PodCondition::default()
        })
        .collect();
    let ready = conditions.contains(&("Ready", "True"));
    let running = phase == "Running";
    for c in &mut status.container_statuses {
        c.ready = Some(ready);
        c.started = Some(running);
        c.restart_count = Some(0);
        c.last_state = Some(ContainerState::default());
        c.state = Some(if running {
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time {
                        seconds: Some(STARTED_AT),
                        nanos: Some(0),
                    }),
                }),
                ..ContainerState::default()
            }
        } else {
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ContainerCreating".into()),
                    message: None,
                }),
                ..ContainerState::default()
            }
        });
    }
}

/// Pod state `i`, JSON (the same object as [`pod_state_pb`]).
pub(crate) fn pod_state_json(p: &mut Value, i: usize) {
    let (phase, conditions) = POD_STATES[i];
    let status = &mut p["status"];
    status["phase"] = phase.into();
    status["conditions"] = conditions
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s}))
        .collect();
    let ready = conditions.contains(&("Ready", "True"));
    let running = phase == "Running";
    if let Some(cs) = status["containerStatuses"].as_array_mut() {
        for c in cs {
            c["ready"] = ready.into();
            c["started"] = running.into();
            c["restartCount"] = 0.into();
            c["lastState"] = json!({});
            c["state"] = if running {
                let t = crate::object::Time {
                    seconds: STARTED_AT,
                    nanos: 0,
                };
                json!({"running": {"startedAt": t.to_rfc3339()}})
            } else {
                json!({"waiting": {"reason": "ContainerCreating"}})
            };
        }
    }
}

/// The JSON file `path` under `dir` edited `n` ways by `edit`.
pub(crate) fn json_variants(
    dir: &Path,
    path: &str,
    n: usize,
    edit: impl Fn(&mut Value, usize),
) -> Result<Vec<Object>, SimError> {
    let path = dir.join(path);
    let bytes = std::fs::read(&path).map_err(|source| SimError::Io {
        path: path.clone(),
        source,
    })?;
    let template = |source| SimError::Template {
        path: path.clone(),
        source,
    };
    let doc: Value = serde_json::from_slice(&bytes)
        .map_err(|e| template(crate::object::DecodeError::json(&e, 0)))?;
    (0..n)
        .map(|i| {
            let mut d = doc.clone();
            edit(&mut d, i);
            object::decode(d.to_string().into()).map_err(template)
        })
        .collect()
}
