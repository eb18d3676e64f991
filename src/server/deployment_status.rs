//! `apps/v1` `DeploymentStatus` between protobuf and JSON, so that a protobuf server's
//! Deployments keep a JSON form after a controller writes their status (the one part of a
//! template's Deployment that controllers rewrite; [`super::JsonTranscoder`] takes the rest
//! from the template's twin). Field names and formats as upstream's `types.go` JSON tags.

use k8s_pb::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_pb::apimachinery::pkg::apis::meta::v1::Time as PbTime;
use prost::Message;
use serde_json::{Map, Value};

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

/// A protobuf Deployment's fields but metadata and status, re-encoded (a key that equal
/// specs share however their bytes were written), and its status.
///
/// # Errors
/// When the object does not decode as a Deployment.
pub(crate) fn split(obj: &Object) -> Result<(Vec<u8>, Option<DeploymentStatus>), DecodeError> {
    let mut d: Deployment = obj.decode()?;
    d.metadata = None;
    let status = d.status.take();
    Ok((d.encode_to_vec(), status))
}
