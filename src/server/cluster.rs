//! The resources every cluster has, added to what a server's simulators serve so that clients
//! find what they look for around their own objects: `namespaces` (the simulators' `ns-N`
//! and the four a new cluster has) and `events` (empty, for controllers to record to and
//! `kubectl describe` to read). Both are JSON simulators without a flood, written to through
//! the API like the others.

use bytes::Bytes;
use serde_json::json;

use super::{ServerConfig, ServerError};
use crate::object::{self, Object};
use crate::sim::{SimConfig, SimServer, Templates};

/// Namespaces of a new cluster.
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-node-lease", "kube-public", "kube-system"];

fn json_object(v: serde_json::Value) -> Result<Object, ServerError> {
    object::decode(Bytes::from(v.to_string())).map_err(|e| ServerError::Builtin(e.to_string()))
}

/// A Namespace named `name`, as a real server stores it.
fn namespace(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// The simulators of `namespaces` and `events` that `served` lacks (by plural), for a
/// cluster whose simulators use `ns-0` … `ns-{n-1}` (the largest
/// [`SimConfig::namespaces`] among them).
///
/// # Errors
/// [`ServerError::Builtin`] (not for these fixed objects).
pub(crate) fn builtin(
    served: &[(SimServer, ServerConfig)],
) -> Result<Vec<(SimServer, ServerConfig)>, ServerError> {
    let err = |e: &dyn std::fmt::Display| ServerError::Builtin(e.to_string());
    let has = |plural: &str| {
        served
            .iter()
            .any(|(s, _)| s.gvk().group.is_empty() && s.config().resource == plural)
    };
    let mut out = Vec::new();
    if !has("namespaces") {
        let n = served
            .iter()
            .filter(|(s, _)| {
                s.config()
                    .templates
                    .objects()
                    .iter()
                    .any(|o| !o.namespace().is_empty())
            })
            .map(|(s, _)| s.config().namespaces)
            .max()
            .unwrap_or(0);
        let templates = Templates::from_objects(vec![json_object(namespace("default"))?])
            .map_err(|e| err(&e))?;
        let sim = SimServer::new(SimConfig::new(templates).resource("namespaces"))
            .map_err(|e| err(&e))?;
        let names = SYSTEM_NAMESPACES
            .iter()
            .map(|s| (*s).to_owned())
            .chain((0..n).map(|i| format!("ns-{i}")));
        for name in names {
            let obj = json_object(namespace(&name))?;
            sim.create_object("", &obj).map_err(|e| err(&e))?;
        }
        out.push((sim, ServerConfig::default()));
    }
    if !has("events") {
        let template = json_object(json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "template", "namespace": "default"},
            "involvedObject": {},
            "reason": "",
            "message": "",
            "source": {},
            "type": "Normal",
        }))?;
        let templates = Templates::from_objects(vec![template]).map_err(|e| err(&e))?;
        let sim = SimServer::new(SimConfig::new(templates)).map_err(|e| err(&e))?;
        out.push((sim, ServerConfig::default()));
    }
    Ok(out)
}
