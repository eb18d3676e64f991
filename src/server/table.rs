//! `Table` answers (`meta.k8s.io/v1`), so that `kubectl get` prints the columns it prints
//! against a real cluster. Columns and cells follow upstream's printers
//! (`kubernetes/pkg/printers/internalversion/printers.go`: `printPod`, `printDeployment`,
//! `printNamespace`, `printEvent`; other kinds get the default Name and Age).

use bytes::Bytes;
use serde_json::{Value, json};

use super::api::Api;
use crate::object::{Encoding, Object};
use crate::reflector::ApiError;
use crate::sim::status::failure;

/// A column: name, type, and priority (1 = shown by `-o wide` only).
type Column = (&'static str, &'static str, u8);

fn columns(group: &str, plural: &str) -> &'static [Column] {
    match (group, plural) {
        ("", "pods") => &[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        ("apps", "deployments") => &[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("", "namespaces") => &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Age", "string", 0),
        ],
        ("", "events") => &[
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
        ],
        _ => &[("Name", "string", 0), ("Age", "string", 0)],
    }
}

/// `d` as kubectl shows ages (`45s`, `3m20s`, `5h`, `2d3h`, `3y20d`): the rules of upstream
/// `apimachinery/pkg/util/duration.HumanDuration`.
pub(crate) fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let (minutes, hours, days) = (secs / 60, secs / 3600, secs / 86_400);
    let with = |big: i64, unit: &str, small: i64, unit2: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{unit2}")
        }
    };
    match () {
        () if minutes < 10 => with(minutes, "m", secs % 60, "s"),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 => with(hours, "h", minutes % 60, "m"),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 24 * 8 => with(days, "d", hours % 24, "h"),
        () if hours < 24 * 365 * 2 => format!("{days}d"),
        () if hours < 24 * 365 * 8 => with(days / 365, "y", days % 365, "d"),
        () => format!("{}y", days / 365),
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn str_at<'a>(doc: &'a Value, path: &str) -> &'a str {
    doc.pointer(path).and_then(Value::as_str).unwrap_or("")
}

fn int_at(doc: &Value, path: &str) -> i64 {
    doc.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

fn age(doc: &Value) -> String {
    let created = str_at(doc, "/metadata/creationTimestamp");
    since(created)
}

/// The age of an RFC 3339 timestamp as kubectl shows it.
fn since(t: &str) -> String {
    match t.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(now_secs() - t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

fn pod_cells(doc: &Value) -> Vec<Value> {
    let statuses = doc
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = doc
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(statuses.len(), Vec::len);
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
        .count();
    let restarts: i64 = statuses.iter().map(|c| int_at(c, "/restartCount")).sum();
    let mut reason = str_at(doc, "/status/reason").to_owned();
    if reason.is_empty() {
        reason = str_at(doc, "/status/phase").to_owned();
    }
    for c in &statuses {
        let waiting = str_at(c, "/state/waiting/reason");
        let terminated = str_at(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_owned();
        } else if !terminated.is_empty() {
            reason = terminated.to_owned();
        }
    }
    if doc.pointer("/metadata/deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    let dash = |s: &str| {
        if s.is_empty() {
            "<none>".to_owned()
        } else {
            s.to_owned()
        }
    };
    vec![
        str_at(doc, "/metadata/name").into(),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts.to_string().into(),
        age(doc).into(),
        dash(str_at(doc, "/status/podIP")).into(),
        dash(str_at(doc, "/spec/nodeName")).into(),
        dash(str_at(doc, "/status/nominatedNodeName")).into(),
        "<none>".into(),
    ]
}

fn deployment_cells(doc: &Value) -> Vec<Value> {
    let containers = doc
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let join = |k: &str| {
        containers
            .iter()
            .map(|c| str_at(c, &format!("/{k}")).to_owned())
            .collect::<Vec<_>>()
            .join(",")
    };
    let selector = doc
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let desired = doc
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    vec![
        str_at(doc, "/metadata/name").into(),
        format!("{}/{desired}", int_at(doc, "/status/readyReplicas")).into(),
        int_at(doc, "/status/updatedReplicas").into(),
        int_at(doc, "/status/availableReplicas").into(),
        age(doc).into(),
        join("name").into(),
        join("image").into(),
        selector.into(),
    ]
}

fn event_cells(doc: &Value) -> Vec<Value> {
    let last = [
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .map(|p| str_at(doc, p))
    .find(|s| !s.is_empty())
    .unwrap_or("");
    let seen = since(last);
    let kind = str_at(doc, "/involvedObject/kind").to_lowercase();
    vec![
        seen.into(),
        str_at(doc, "/type").into(),
        str_at(doc, "/reason").into(),
        format!("{kind}/{}", str_at(doc, "/involvedObject/name")).into(),
        str_at(doc, "/message").into(),
    ]
}

impl Api {
    /// The object's JSON document for printing.
    fn print_doc(&self, o: &Object) -> Result<Value, ApiError> {
        let bytes = self.object_json(o)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::Status(failure(500, "InternalError", e.to_string())))
    }

    /// A `Table` of `items` (a list's, with its resourceVersion and continue token, or one
    /// object's), each row with the object's `PartialObjectMetadata`.
    ///
    /// # Errors
    /// When an object has no JSON form.
    pub(super) fn table(
        &self,
        items: &[&Object],
        rv: &str,
        token: &str,
        remaining: Option<i64>,
    ) -> Result<Bytes, ApiError> {
        let cols = columns(&self.resource.group, &self.resource.plural);
        let defs: Vec<Value> = cols
            .iter()
            .map(|(name, t, priority)| {
                let format = if *name == "Name" { "name" } else { "" };
                json!({"name": name, "type": t, "format": format, "description": "", "priority": priority})
            })
            .collect();
        let mut rows = Vec::with_capacity(items.len());
        for o in items {
            let doc = self.print_doc(o)?;
            let cells = match (self.resource.group.as_str(), self.resource.plural.as_str()) {
                ("", "pods") => pod_cells(&doc),
                ("apps", "deployments") => deployment_cells(&doc),
                ("", "namespaces") => vec![
                    str_at(&doc, "/metadata/name").into(),
                    str_at(&doc, "/status/phase").into(),
                    age(&doc).into(),
                ],
                ("", "events") => event_cells(&doc),
                _ => vec![str_at(&doc, "/metadata/name").into(), age(&doc).into()],
            };
            let partial = o.to_partial_object_metadata(Encoding::Json)?;
            let object: Value = serde_json::from_slice(&partial.raw()?)
                .map_err(|e| ApiError::Status(failure(500, "InternalError", e.to_string())))?;
            rows.push(json!({"cells": cells, "object": object}));
        }
        let mut meta = json!({"resourceVersion": rv});
        if !token.is_empty() {
            meta["continue"] = token.into();
        }
        if let Some(n) = remaining {
            meta["remainingItemCount"] = n.into();
        }
        let t = json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": defs,
            "rows": rows,
        });
        Ok(Bytes::from(t.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (45, "45s"),
            (119, "119s"),
            (200, "3m20s"),
            (540, "9m"),
            (3000, "50m"),
            (3 * 3600 + 600, "3h10m"),
            (20 * 3600, "20h"),
            (3 * 86_400 + 7200, "3d2h"),
            (40 * 86_400, "40d"),
            (3 * 365 * 86_400 + 20 * 86_400, "3y20d"),
            (10 * 365 * 86_400, "10y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }
}
