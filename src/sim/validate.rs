//! What a real API server refuses with 422 Invalid before it stores a write, for the kinds
//! served here (upstream `apimachinery/pkg/api/validation` `ValidateObjectMeta`,
//! `pkg/apis/core/validation`, `pkg/apis/apps/validation`): object names, label keys and
//! values, the total size of annotations, the typed shape of the object (a field of the
//! wrong type, `spec.replicas: "abc"`), and a few rules of the kinds (non-negative replicas,
//! at least one container, a Deployment's selector immutable and matching its template).

use serde_json::Value;

use super::rest::Rest;
use super::status::invalid;
use crate::object::{
    ApiStatus, GroupVersionKind, ObjectMetaFields, is_dns_subdomain, is_label_key, is_label_value,
};

/// Most bytes of annotations (keys and values) an object may carry.
const MAX_ANNOTATIONS: usize = 256 * 1024;

fn bad(kind: &str, name: &str, field: &str, detail: String) -> ApiStatus {
    invalid(format!("{kind} \"{name}\" is invalid: {field}: {detail}"))
}

/// A lower-case RFC 1123 label (namespaces' names): at most 63 bytes, no dots.
fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns_subdomain(s)
}

/// Checks a write of `meta` and `rest` (and, for an update, the stored `old` rest) of kind
/// `gvk`.
///
/// # Errors
/// A 422 Invalid `Status` worded as upstream words it.
pub(crate) fn validate(
    gvk: &GroupVersionKind,
    meta: &ObjectMetaFields,
    rest: &Rest,
    old: Option<&Rest>,
) -> Result<(), ApiStatus> {
    let (kind, name) = (gvk.kind.as_str(), &*meta.name);
    let name_ok = if kind == "Namespace" {
        is_dns_label(name)
    } else {
        is_dns_subdomain(name)
    };
    if !name_ok {
        return Err(bad(
            kind,
            name,
            "metadata.name",
            format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 {} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                if kind == "Namespace" {
                    "label"
                } else {
                    "subdomain"
                }
            ),
        ));
    }
    for (k, v) in meta.labels.iter() {
        if !is_label_key(k) {
            return Err(bad(
                kind,
                name,
                "metadata.labels",
                format!(
                    "Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                ),
            ));
        }
        if !is_label_value(v) {
            return Err(bad(
                kind,
                name,
                "metadata.labels",
                format!(
                    "Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                ),
            ));
        }
    }
    let annotations: usize = meta
        .annotations
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if annotations > MAX_ANNOTATIONS {
        return Err(bad(
            kind,
            name,
            "metadata.annotations",
            format!("Too long: may not be more than {MAX_ANNOTATIONS} bytes"),
        ));
    }
    let Rest::Json(doc) = rest else {
        // Protobuf bodies were decoded as their kind already.
        return Ok(());
    };
    let doc = Value::Object(doc.clone());
    typed(gvk, &doc).map_err(|e| bad(kind, name, "body", e))?;
    match (gvk.group.as_str(), kind) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => {
            if doc
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .is_some_and(|r| r < 0)
            {
                return Err(bad(
                    kind,
                    name,
                    "spec.replicas",
                    "Invalid value: must be greater than or equal to 0".into(),
                ));
            }
            let selector = doc.pointer("/spec/selector");
            if let (Some(old), Some(sel)) = (old, selector)
                && let Rest::Json(old) = old
                && old
                    .get("spec")
                    .and_then(|s| s.get("selector"))
                    .is_some_and(|o| o != sel)
            {
                return Err(bad(
                    kind,
                    name,
                    "spec.selector",
                    "Invalid value: field is immutable".into(),
                ));
            }
            if let (Some(Value::Object(want)), Some(Value::Object(have))) = (
                selector.and_then(|s| s.get("matchLabels")),
                doc.pointer("/spec/template/metadata/labels"),
            ) && want.iter().any(|(k, v)| have.get(k) != Some(v))
            {
                return Err(bad(
                    kind,
                    name,
                    "spec.template.metadata.labels",
                    "Invalid value: `selector` does not match template `labels`".into(),
                ));
            }
        }
        ("", "Pod") => {
            let containers = doc.pointer("/spec/containers").and_then(Value::as_array);
            if containers.is_none_or(Vec::is_empty) {
                return Err(bad(kind, name, "spec.containers", "Required value".into()));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether `doc` reads as the typed object of `gvk` (for the kinds k8s-openapi knows here).
fn typed(gvk: &GroupVersionKind, doc: &Value) -> Result<(), String> {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core};
    fn check<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<(), String> {
        T::deserialize(doc).map(drop).map_err(|e| e.to_string())
    }
    // Only the fields but metadata are in `doc`: give them an empty metadata.
    match (gvk.group.as_str(), gvk.kind.as_str()) {
        ("", "Pod") => check::<core::PodSpec>(doc.get("spec").unwrap_or(&Value::Null))
            .and_then(|()| opt::<core::PodStatus>(doc.get("status"))),
        ("", "Namespace") => opt::<core::NamespaceSpec>(doc.get("spec"))
            .and_then(|()| opt::<core::NamespaceStatus>(doc.get("status"))),
        ("", "ConfigMap") => opt::<std::collections::BTreeMap<String, String>>(doc.get("data")),
        ("apps", "Deployment") => opt::<apps::DeploymentSpec>(doc.get("spec"))
            .and_then(|()| opt::<apps::DeploymentStatus>(doc.get("status"))),
        _ => Ok(()),
    }
    .map_err(|e| format!("the object does not decode as a {}: {e}", gvk.kind))
}

/// [`typed`] of an optional part.
fn opt<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Result<(), String> {
    match v {
        None | Some(Value::Null) => Ok(()),
        Some(v) => T::deserialize(v).map(drop).map_err(|e| e.to_string()),
    }
}
