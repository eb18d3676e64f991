//! The parts of an `apps/v1` Deployment that differ between Deployments stamped from one
//! template, between protobuf and JSON: `spec.replicas` (scaling), `spec.selector` and the
//! Pod template's labels (each simulated Deployment selects its own app), and `status` (what
//! a controller writes). A protobuf server's Deployments keep a JSON form through them:
//! [`super::JsonTranscoder`] takes everything else from the template's twin. Field names and
//! formats as upstream's `types.go` JSON tags.

use k8s_pb::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time as PbTime,
};
use prost::Message;
use serde_json::{Map, Value, json};

use crate::object::{DecodeError, Object, Time};

fn time_json(t: &Option<PbTime>) -> Option<Value> {
    let t = t.as_ref()?;
    let time = Time {
        seconds: t.seconds.unwrap_or(0),
        nanos: t.nanos.unwrap_or(0),
    };
    Some(time.to_rfc3339().into())
}

fn time_pb(v: Option<&Value>) -> Option<PbTime> {
    let t: jiff::Timestamp = v?.as_str()?.parse().ok()?;
    Some(PbTime {
        seconds: Some(t.as_second()),
        nanos: Some(t.subsec_nanosecond()),
    })
}

/// The JSON form of a protobuf `DeploymentStatus` (absent fields left out).
pub(crate) fn to_json(s: &DeploymentStatus) -> Value {
    let mut o = Map::new();
    let mut int = |k: &str, v: Option<i64>| {
        if let Some(v) = v {
            o.insert(k.to_owned(), v.into());
        }
    };
    int("observedGeneration", s.observed_generation);
    int("replicas", s.replicas.map(i64::from));
    int("updatedReplicas", s.updated_replicas.map(i64::from));
    int("readyReplicas", s.ready_replicas.map(i64::from));
    int("availableReplicas", s.available_replicas.map(i64::from));
    int("unavailableReplicas", s.unavailable_replicas.map(i64::from));
    int("terminatingReplicas", s.terminating_replicas.map(i64::from));
    int("collisionCount", s.collision_count.map(i64::from));
    if !s.conditions.is_empty() {
        let conditions = s
            .conditions
            .iter()
            .map(|c| {
                let mut m = Map::new();
                let mut put = |k: &str, v: Option<Value>| {
                    if let Some(v) = v {
                        m.insert(k.to_owned(), v);
                    }
                };
                put("type", c.r#type.clone().map(Value::from));
                put("status", c.status.clone().map(Value::from));
                put("lastUpdateTime", time_json(&c.last_update_time));
                put("lastTransitionTime", time_json(&c.last_transition_time));
                put("reason", c.reason.clone().map(Value::from));
                put("message", c.message.clone().map(Value::from));
                Value::Object(m)
            })
            .collect();
        o.insert("conditions".into(), Value::Array(conditions));
    }
    Value::Object(o)
}

/// The protobuf form of a JSON `DeploymentStatus` (unknown members ignored, as a
/// server's decoder drops them).
pub(crate) fn to_pb(v: &Value) -> DeploymentStatus {
    let int = |k: &str| v.get(k).and_then(Value::as_i64);
    let int32 = |k: &str| int(k).and_then(|n| i32::try_from(n).ok());
    let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    DeploymentStatus {
        observed_generation: int("observedGeneration"),
        replicas: int32("replicas"),
        updated_replicas: int32("updatedReplicas"),
        ready_replicas: int32("readyReplicas"),
        available_replicas: int32("availableReplicas"),
        unavailable_replicas: int32("unavailableReplicas"),
        terminating_replicas: int32("terminatingReplicas"),
        collision_count: int32("collisionCount"),
        conditions: v
            .get("conditions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| DeploymentCondition {
                        r#type: text(c, "type"),
                        status: text(c, "status"),
                        last_update_time: time_pb(c.get("lastUpdateTime")),
                        last_transition_time: time_pb(c.get("lastTransitionTime")),
                        reason: text(c, "reason"),
                        message: text(c, "message"),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// What differs between Deployments of one template (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Parts {
    replicas: Option<i32>,
    selector: Option<LabelSelector>,
    template_labels: std::collections::BTreeMap<String, String>,
    status: Option<DeploymentStatus>,
}

/// A protobuf Deployment's fields but metadata and its [`Parts`], re-encoded (a key that
/// Deployments of one template share however their bytes were written), and the parts.
///
/// # Errors
/// When the object does not decode as a Deployment.
pub(crate) fn split(obj: &Object) -> Result<(Vec<u8>, Parts), DecodeError> {
    let mut d: Deployment = obj.decode()?;
    d.metadata = None;
    let mut parts = Parts {
        status: d.status.take(),
        ..Parts::default()
    };
    if let Some(spec) = d.spec.as_mut() {
        parts.replicas = spec.replicas.take();
        parts.selector = spec.selector.take();
        if let Some(m) = spec.template.as_mut().and_then(|t| t.metadata.as_mut()) {
            parts.template_labels = std::mem::take(&mut m.labels);
        }
    }
    Ok((d.encode_to_vec(), parts))
}

/// The JSON of a protobuf label selector.
fn selector_json(s: &LabelSelector) -> Value {
    let mut o = Map::new();
    if !s.match_labels.is_empty() {
        o.insert("matchLabels".into(), json!(s.match_labels));
    }
    if !s.match_expressions.is_empty() {
        let e: Vec<Value> = s
            .match_expressions
            .iter()
            .map(|r| json!({"key": r.key, "operator": r.operator, "values": r.values}))
            .collect();
        o.insert("matchExpressions".into(), Value::Array(e));
    }
    Value::Object(o)
}

/// The protobuf of a JSON label selector.
fn selector_pb(v: &Value) -> LabelSelector {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    LabelSelector {
        match_labels: v
            .get("matchLabels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        match_expressions: v
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|r| LabelSelectorRequirement {
                        key: text(r, "key"),
                        operator: text(r, "operator"),
                        values: r
                            .get("values")
                            .and_then(Value::as_array)
                            .map(|vs| {
                                vs.iter()
                                    .filter_map(|x| x.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Writes `parts` into a Deployment's JSON members (`spec`, `status`; absent parts removed).
pub(crate) fn put_json(doc: &mut Map<String, Value>, parts: &Parts) {
    let spec = doc
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(spec) = spec {
        match parts.replicas {
            Some(r) => spec.insert("replicas".into(), r.into()),
            None => spec.remove("replicas"),
        };
        match &parts.selector {
            Some(s) => spec.insert("selector".into(), selector_json(s)),
            None => spec.remove("selector"),
        };
        if let Some(Value::Object(t)) = spec.get_mut("template") {
            let meta = t
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                if parts.template_labels.is_empty() {
                    meta.remove("labels");
                } else {
                    meta.insert("labels".into(), json!(parts.template_labels));
                }
            }
        }
    }
    match &parts.status {
        Some(s) => doc.insert("status".into(), to_json(s)),
        None => doc.remove("status"),
    };
}

/// Takes the [`Parts`] out of a Deployment's JSON members (the rest is then comparable with a
/// template's).
pub(crate) fn take_json(doc: &mut Map<String, Value>) -> Parts {
    let mut parts = Parts {
        status: doc.remove("status").map(|s| to_pb(&s)),
        ..Parts::default()
    };
    if let Some(Value::Object(spec)) = doc.get_mut("spec") {
        parts.replicas = spec
            .remove("replicas")
            .and_then(|r| r.as_i64())
            .and_then(|r| i32::try_from(r).ok());
        parts.selector = spec.remove("selector").map(|s| selector_pb(&s));
        if let Some(Value::Object(meta)) =
            spec.get_mut("template").and_then(|t| t.get_mut("metadata"))
            && let Some(Value::Object(labels)) = meta.remove("labels")
        {
            parts.template_labels = labels
                .into_iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or("").to_owned()))
                .collect();
        }
    }
    parts
}

/// Sets `parts` in a protobuf Deployment.
pub(crate) fn put_pb(d: &mut Deployment, parts: Parts) {
    let spec = d.spec.get_or_insert_with(Default::default);
    spec.replicas = parts.replicas;
    spec.selector = parts.selector;
    let template = spec.template.get_or_insert_with(Default::default);
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels = parts.template_labels;
    d.status = parts.status;
}
