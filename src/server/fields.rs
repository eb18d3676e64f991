//! The fields a `fieldSelector` may name, per resource, and their values in an object, as
//! kube-apiserver's registries define them (`pkg/registry/core/pod/strategy.go`
//! `ToSelectableFields`, and the same function of `core/event`, `core/namespace`,
//! `core/node`, `core/secret`, `apps/replicaset`; `apiserver/pkg/registry/generic`
//! `AddObjectMetaFieldsSet` for `metadata.name` and, on namespaced resources,
//! `metadata.namespace`).

use serde_json::Value;

use super::discovery::ServedResource;
use crate::object::{DecodeError, Encoding, Object};

/// The selectable fields of `resource` other than `metadata.*`.
fn kind_fields(resource: &ServedResource) -> &'static [&'static str] {
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "secrets") => &["type"],
        ("apps", "replicasets") => &["status.replicas"],
        _ => &[],
    }
}

/// A field a selector may name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// A field of the kind's own (`spec.nodeName`), by its selector name.
    Kind(&'static str),
}

impl Field {
    /// The field `name` of `resource`, or `None` when the server does not support it.
    pub(crate) fn of(resource: &ServedResource, name: &str) -> Option<Field> {
        match name {
            "metadata.name" => Some(Field::Name),
            "metadata.namespace" if resource.namespaced => Some(Field::Namespace),
            _ => kind_fields(resource)
                .iter()
                .find(|f| **f == name)
                .map(|f| Field::Kind(f)),
        }
    }

    /// Whether the field can change during an object's life (everything but name and
    /// namespace): a watch filtered on it sees objects enter and leave the selection.
    pub(crate) fn mutable(&self) -> bool {
        matches!(self, Field::Kind(_))
    }
}

/// The JSON path of a kind field in the object document, and how an absent value reads.
fn json_path(field: &str) -> (&'static [&'static str], &'static str) {
    match field {
        "spec.nodeName" => (&["spec", "nodeName"], ""),
        "spec.restartPolicy" => (&["spec", "restartPolicy"], ""),
        "spec.schedulerName" => (&["spec", "schedulerName"], ""),
        "spec.serviceAccountName" => (&["spec", "serviceAccountName"], ""),
        "spec.hostNetwork" => (&["spec", "hostNetwork"], "false"),
        "spec.unschedulable" => (&["spec", "unschedulable"], "false"),
        "status.phase" => (&["status", "phase"], ""),
        "status.podIP" => (&["status", "podIPs", "0", "ip"], ""),
        "status.nominatedNodeName" => (&["status", "nominatedNodeName"], ""),
        "status.replicas" => (&["status", "replicas"], "0"),
        "involvedObject.kind" => (&["involvedObject", "kind"], ""),
        "involvedObject.namespace" => (&["involvedObject", "namespace"], ""),
        "involvedObject.name" => (&["involvedObject", "name"], ""),
        "involvedObject.uid" => (&["involvedObject", "uid"], ""),
        "involvedObject.apiVersion" => (&["involvedObject", "apiVersion"], ""),
        "involvedObject.resourceVersion" => (&["involvedObject", "resourceVersion"], ""),
        "involvedObject.fieldPath" => (&["involvedObject", "fieldPath"], ""),
        "reason" => (&["reason"], ""),
        "reportingComponent" => (&["reportingComponent"], ""),
        "type" => (&["type"], ""),
        _ => (&[], ""),
    }
}

fn lookup<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a Value> {
    if path.is_empty() {
        return None;
    }
    path.iter().try_fold(doc, |v, seg| match v {
        Value::Array(a) => a.get(seg.parse::<usize>().ok()?),
        _ => v.get(seg),
    })
}

fn text(v: Option<&Value>, absent: &str) -> String {
    match v {
        None | Some(Value::Null) => absent.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// An object's values of the kind fields a filter names, computed once per object.
#[derive(Debug, Default)]
pub(crate) struct FieldValues {
    values: Vec<(&'static str, String)>,
}

impl FieldValues {
    /// The values of `fields` (kind fields only; others are ignored) in `obj`.
    ///
    /// # Errors
    /// When the object does not decode as its kind.
    pub(crate) fn of(obj: &Object, fields: &[&'static str]) -> Result<Self, DecodeError> {
        if fields.is_empty() {
            return Ok(FieldValues::default());
        }
        let doc = match obj.encoding() {
            Encoding::Json => obj.to_json_value()?,
            Encoding::Protobuf => protobuf_doc(obj)?,
        };
        let values = fields
            .iter()
            .map(|f| {
                if *f == "source" {
                    // The reporting component of an event of either API generation.
                    let c = text(lookup(&doc, &["source", "component"]), "");
                    let c = if c.is_empty() {
                        text(lookup(&doc, &["reportingComponent"]), "")
                    } else {
                        c
                    };
                    return (*f, c);
                }
                if *f == "status.podIP" {
                    // `podIPs[0]`, or the older single `podIP` (a server fills one from the
                    // other).
                    let ip = text(lookup(&doc, &["status", "podIPs", "0", "ip"]), "");
                    let ip = if ip.is_empty() {
                        text(lookup(&doc, &["status", "podIP"]), "")
                    } else {
                        ip
                    };
                    return (*f, ip);
                }
                let (path, absent) = json_path(f);
                (*f, text(lookup(&doc, path), absent))
            })
            .collect();
        Ok(FieldValues { values })
    }

    /// The value of kind field `f` (empty when it was not asked for).
    pub(crate) fn get(&self, f: &str) -> &str {
        self.values
            .iter()
            .find(|(k, _)| *k == f)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// The selectable parts of a protobuf object as a small JSON document (the kinds whose
/// fields can be selected; other kinds have none).
fn protobuf_doc(obj: &Object) -> Result<Value, DecodeError> {
    use k8s_pb::api::core::v1 as core;
    let gvk = obj.gvk();
    Ok(match (gvk.group.as_str(), gvk.kind.as_str()) {
        ("", "Pod") => {
            let p: core::Pod = obj.decode()?;
            let spec = p.spec.unwrap_or_default();
            let status = p.status.unwrap_or_default();
            serde_json::json!({
                "spec": {
                    "nodeName": spec.node_name,
                    "restartPolicy": spec.restart_policy,
                    "schedulerName": spec.scheduler_name,
                    "serviceAccountName": spec.service_account_name,
                    "hostNetwork": spec.host_network,
                },
                "status": {
                    "phase": status.phase,
                    "podIPs": status.pod_ips.iter().map(|i| serde_json::json!({"ip": i.ip})).collect::<Vec<_>>(),
                    "podIP": status.pod_ip,
                    "nominatedNodeName": status.nominated_node_name,
                },
            })
        }
        ("", "Event") => {
            let e: core::Event = obj.decode()?;
            let io = e.involved_object.unwrap_or_default();
            let component = e.source.and_then(|s| s.component);
            serde_json::json!({
                "involvedObject": {
                    "kind": io.kind, "namespace": io.namespace, "name": io.name, "uid": io.uid,
                    "apiVersion": io.api_version, "resourceVersion": io.resource_version,
                    "fieldPath": io.field_path,
                },
                "reason": e.reason,
                "reportingComponent": e.reporting_component,
                "source": {"component": component},
                "type": e.r#type,
            })
        }
        ("", "Namespace") => {
            let n: core::Namespace = obj.decode()?;
            serde_json::json!({"status": {"phase": n.status.and_then(|s| s.phase)}})
        }
        ("", "Node") => {
            let n: core::Node = obj.decode()?;
            serde_json::json!({"spec": {"unschedulable": n.spec.and_then(|s| s.unschedulable)}})
        }
        ("", "Secret") => {
            let s: core::Secret = obj.decode()?;
            serde_json::json!({"type": s.r#type})
        }
        ("apps", "ReplicaSet") => {
            let r: k8s_pb::api::apps::v1::ReplicaSet = obj.decode()?;
            serde_json::json!({"status": {"replicas": r.status.and_then(|s| s.replicas)}})
        }
        _ => Value::Null,
    })
}
