//! Protobuf → JSON for objects the simulator stamped from protobuf templates, so one server
//! answers both `Accept: application/vnd.kubernetes.protobuf` and `application/json` (kubectl,
//! kube-rs and every JSON client) with the same objects.
//!
//! A protobuf object cannot be written as JSON without its schema. The simulator's objects are
//! a fixture's fields with fresh metadata, and the fixtures come in pairs (`core.v1.Pod.pb` and
//! `core.v1.Pod.json` describe the same object), so each template's non-metadata fields are
//! taken once from its JSON twin and each object's metadata is rendered from its decoded
//! [`ObjectMeta`]: a byte comparison and a copy, the fast path for a flood of template copies.
//! An object whose fields match no template (a varied Pod, a client's own spec) is converted
//! by the Kubernetes schema ([`super::proto_json`]).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use serde_json::{Map, Value};

use super::deployment_parts;
use super::proto_json;
use crate::object::varint::{self, VarintError};
use crate::object::{
    self, DecodeError, Encoding, GroupVersionKind, Object, ObjectMeta, StrMapRef, Time, WatchEvent,
};
use crate::sim::Templates;
use crate::sim::json_rest;
use crate::wire::meta::ManagedFieldsEntry;

/// Why a JSON form could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TranscodeError {
    /// The twin list does not pair one JSON object with each template.
    #[error("{templates} templates but {twins} JSON twins")]
    Count {
        /// Templates.
        templates: usize,
        /// Twins.
        twins: usize,
    },
    /// A twin is not a JSON object of the template's kind.
    #[error("twin {index} is {found}, expected a JSON {expected}")]
    Mismatch {
        /// Position of the twin.
        index: usize,
        /// The twin's kind and encoding.
        found: String,
        /// The template's kind.
        expected: String,
    },
    /// The object's fields other than metadata match no template.
    #[error("no JSON form known for {0} (its fields match no template)")]
    Unknown(String),
    /// Bytes did not decode or encode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The object matches no template and the Kubernetes schema did not convert it.
    #[error("no JSON form for {key}: {reason}")]
    Schema {
        /// The object's key.
        key: String,
        /// Why the schema's conversion failed.
        reason: String,
    },
}

/// Template `rest` (protobuf top-level fields but metadata) → the twin's JSON members.
#[derive(Debug)]
struct Twin {
    rest_pb: Bytes,
    /// `,"spec":...,"status":...` (or empty).
    rest_json: Bytes,
    /// The same members parsed, to recognize them in a client's JSON (in any member order).
    rest_value: Map<String, Value>,
    /// The template without metadata: given a client's metadata, its protobuf form.
    stripped: Object,
    /// For Deployments: the fields but metadata and the per-object parts, re-encoded
    /// ([`super::deployment_parts::split`]), to recognize a Deployment scaled, selecting its
    /// own app, or with a status a controller wrote.
    deployment_key: Option<Vec<u8>>,
}

/// Renders protobuf objects of one simulator as JSON documents (see the module docs).
#[derive(Debug, Clone)]
pub struct JsonTranscoder {
    gvk: Arc<GroupVersionKind>,
    /// `{"kind":..,"apiVersion":..,"metadata":`.
    head: Bytes,
    twins: Arc<HashMap<u64, Vec<Twin>>>,
    hasher: foldhash::fast::FixedState,
}

impl JsonTranscoder {
    /// Pairs `templates[i]` (protobuf) with `twins[i]` (the same object in JSON).
    ///
    /// # Errors
    /// [`TranscodeError::Count`], [`TranscodeError::Mismatch`], [`TranscodeError::Decode`].
    pub fn new(templates: &Templates, twins: &[Object]) -> Result<Self, TranscodeError> {
        if templates.len() != twins.len() {
            return Err(TranscodeError::Count {
                templates: templates.len(),
                twins: twins.len(),
            });
        }
        let gvk = templates.gvk().clone();
        let hasher = foldhash::fast::FixedState::with_seed(0x6a73_6f6e);
        let mut map: HashMap<u64, Vec<Twin>> = HashMap::new();
        for (index, (t, j)) in templates.objects().iter().zip(twins).enumerate() {
            if j.encoding() != Encoding::Json
                || t.encoding() != Encoding::Protobuf
                || j.gvk().kind != gvk.kind
            {
                return Err(TranscodeError::Mismatch {
                    index,
                    found: format!("{} ({:?})", j.gvk(), j.encoding()),
                    expected: format!("{gvk} (template {:?})", t.encoding()),
                });
            }
            let stripped = t.with_meta(ObjectMeta::default())?;
            let rest_pb = rest_of(&stripped.raw()?)?;
            let mut doc: Map<String, Value> =
                serde_json::from_slice(&j.raw()?).map_err(|e| DecodeError::json(&e, 0))?;
            let rest_json = json_rest(doc.clone())?;
            for k in ["apiVersion", "kind", "metadata"] {
                doc.remove(k);
            }
            let deployment_key = is_deployment(&gvk)
                .then(|| deployment_parts::split(&stripped).map(|(k, _)| k))
                .transpose()?;
            map.entry(hasher.hash_one(&rest_pb[..]))
                .or_default()
                .push(Twin {
                    rest_pb,
                    rest_json,
                    rest_value: doc,
                    stripped,
                    deployment_key,
                });
        }
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":",
            Value::from(gvk.kind.as_str()),
            Value::from(gvk.api_version())
        );
        Ok(JsonTranscoder {
            gvk,
            head: Bytes::from(head),
            twins: Arc::new(map),
            hasher,
        })
    }

    /// A transcoder without twins: every protobuf object is converted by the Kubernetes
    /// schema (a protobuf simulator served without `ServerConfig::json_twins`).
    pub fn schema_only(gvk: Arc<GroupVersionKind>) -> Self {
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":",
            Value::from(gvk.kind.as_str()),
            Value::from(gvk.api_version())
        );
        JsonTranscoder {
            gvk,
            head: Bytes::from(head),
            twins: Arc::new(HashMap::new()),
            hasher: foldhash::fast::FixedState::with_seed(0x6a73_6f6e),
        }
    }

    /// The JSON document of `obj`: JSON objects as they are; protobuf objects as
    /// `kind`, `apiVersion`, the metadata rendered from [`Object::meta`] (`managedFields`
    /// included) and the template twin's other members.
    ///
    /// # Errors
    /// [`TranscodeError::Unknown`] for a protobuf object not stamped from a known template.
    pub fn to_json(&self, obj: &Object) -> Result<Bytes, TranscodeError> {
        if obj.encoding() == Encoding::Json {
            return Ok(obj.raw()?);
        }
        let rest = rest_of(&obj.raw()?)?;
        let exact = self
            .twins
            .get(&self.hasher.hash_one(&rest[..]))
            .and_then(|v| v.iter().find(|t| t.rest_pb == rest));
        let rest_json = match exact {
            Some(twin) => twin.rest_json.clone(),
            None => match self.deployment_json(obj) {
                Ok(r) => r,
                Err(TranscodeError::Unknown(_)) => return schema_json(obj),
                Err(e) => return Err(e),
            },
        };
        let meta = meta_json(obj.meta())?;
        let mut out = Vec::with_capacity(self.head.len() + meta.len() + rest_json.len() + 1);
        if obj.gvk() == &*self.gvk {
            out.extend_from_slice(&self.head);
        } else {
            out.extend_from_slice(
                format!(
                    "{{\"kind\":{},\"apiVersion\":{},\"metadata\":",
                    Value::from(obj.gvk().kind.as_str()),
                    Value::from(obj.gvk().api_version())
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(&meta);
        out.extend_from_slice(&rest_json);
        out.push(b'}');
        Ok(Bytes::from(out))
    }

    /// The JSON members of a Deployment whose fields but status are a template's: the twin's,
    /// with the object's own status.
    fn deployment_json(&self, obj: &Object) -> Result<Bytes, TranscodeError> {
        let unknown = || TranscodeError::Unknown(obj.key().to_string());
        if !is_deployment(obj.gvk()) {
            return Err(unknown());
        }
        let (key, parts) = deployment_parts::split(obj)?;
        let twin = self
            .twins
            .values()
            .flatten()
            .find(|t| t.deployment_key.as_ref() == Some(&key))
            .ok_or_else(unknown)?;
        let mut doc = twin.rest_value.clone();
        deployment_parts::put_json(&mut doc, &parts);
        Ok(json_rest(doc)?)
    }

    /// The protobuf form of a client's JSON object of this kind whose members but `metadata`
    /// are one template's twin's (in any order: a metadata-only patch or update, a create of
    /// a template's copy): that template's protobuf fields with the JSON object's metadata
    /// (without `managedFields`, which would have to be re-encoded).
    ///
    /// # Errors
    /// [`TranscodeError::Unknown`] when the members match no template.
    pub fn to_protobuf(&self, obj: &Object) -> Result<Object, TranscodeError> {
        if obj.encoding() == Encoding::Protobuf {
            return Ok(obj.clone());
        }
        let mut doc: Map<String, Value> =
            serde_json::from_slice(&obj.raw()?).map_err(|e| DecodeError::json(&e, 0))?;
        for k in ["apiVersion", "kind", "metadata"] {
            doc.remove(k);
        }
        let mut meta = obj.meta().to_fields();
        meta.managed_fields.clear();
        let meta = ObjectMeta::from(meta);
        if let Some(twin) = self.twins.values().flatten().find(|t| t.rest_value == doc) {
            return Ok(twin.stripped.with_meta(meta)?);
        }
        // A Deployment with its own parts: the template's fields, the parts converted.
        let unknown = || TranscodeError::Unknown(obj.key().to_string());
        if !is_deployment(obj.gvk()) {
            return Err(unknown());
        }
        let parts = deployment_parts::take_json(&mut doc);
        let twin = self
            .twins
            .values()
            .flatten()
            .find(|t| {
                let mut r = t.rest_value.clone();
                deployment_parts::take_json(&mut r);
                r == doc
            })
            .ok_or_else(unknown)?;
        let mut d: k8s_pb::api::apps::v1::Deployment = twin.stripped.decode()?;
        d.metadata = None;
        deployment_parts::put_pb(&mut d, parts);
        let raw = d.encode_to_vec();
        let typed = object::decode(object::encode_envelope(&self.gvk, &raw))?;
        Ok(typed.with_meta(meta)?)
    }

    /// Appends `event` as one JSON watch line (`{"type":..,"object":..}\n`).
    ///
    /// # Errors
    /// As [`JsonTranscoder::to_json`].
    pub fn watch_line(&self, event: &WatchEvent, out: &mut Vec<u8>) -> Result<(), TranscodeError> {
        let obj = match event {
            WatchEvent::Error(_) => return Ok(object::encode_watch_line(event, out)?),
            WatchEvent::Bookmark(o) if o.encoding() == Encoding::Protobuf => {
                let end = o.meta().annotations().get("k8s.io/initial-events-end");
                let b = WatchEvent::bookmark(
                    o.gvk_arc().clone(),
                    o.resource_version(),
                    end.is_some_and(|v| v == "true"),
                    Encoding::Json,
                );
                return Ok(object::encode_watch_line(&b, out)?);
            }
            WatchEvent::Added(o)
            | WatchEvent::Modified(o)
            | WatchEvent::Deleted(o)
            | WatchEvent::Bookmark(o) => o,
        };
        let doc = self.to_json(obj)?;
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(event.event_type().as_str().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&doc);
        out.extend_from_slice(b"}\n");
        Ok(())
    }
}

/// `obj` as JSON by the Kubernetes schema.
fn schema_json(obj: &Object) -> Result<Bytes, TranscodeError> {
    proto_json::object_to_json(obj).map_err(|e| TranscodeError::Schema {
        key: obj.key().to_string(),
        reason: e.to_string(),
    })
}

/// Whether `gvk` is `apps/v1` Deployment.
fn is_deployment(gvk: &GroupVersionKind) -> bool {
    gvk.group == "apps" && gvk.kind == "Deployment"
}

/// The top-level fields after a leading `metadata` field (field 1) of a bare protobuf message.
fn rest_of(raw: &Bytes) -> Result<Bytes, DecodeError> {
    let missing = DecodeError::Missing {
        what: "leading metadata field",
        offset: 0,
    };
    if raw.first() != Some(&0x0a) {
        return Err(missing);
    }
    let (len, n) = varint::read(&raw[1..]).map_err(|e| match e {
        VarintError::Truncated => DecodeError::Truncated {
            offset: raw.len() as u64,
            context: "metadata length",
        },
        VarintError::Overflow => DecodeError::BadVarint { offset: 1 },
    })?;
    let i = 1 + n;
    let end = (i as u64).saturating_add(len);
    if end > raw.len() as u64 {
        return Err(DecodeError::Truncated {
            offset: raw.len() as u64,
            context: "metadata",
        });
    }
    Ok(raw.slice(end as usize..))
}

/// `metadata` as Kubernetes writes it in JSON (members in upstream order, empty ones left
/// out, protobuf `managedFields` entries rendered with their `fieldsV1` JSON).
pub(crate) fn meta_json(m: &ObjectMeta) -> Result<Vec<u8>, TranscodeError> {
    let mut o = Map::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            o.insert(k.to_owned(), Value::from(v));
        }
    };
    put("name", m.name());
    put("generateName", m.generate_name());
    put("namespace", m.namespace());
    put("uid", m.uid());
    put("resourceVersion", m.resource_version());
    if let Some(g) = m.generation() {
        o.insert("generation".into(), g.into());
    }
    let time = |t: &Time| Value::from(t.to_rfc3339());
    if let Some(t) = &m.creation_timestamp() {
        o.insert("creationTimestamp".into(), time(t));
    }
    if let Some(t) = &m.deletion_timestamp() {
        o.insert("deletionTimestamp".into(), time(t));
    }
    if let Some(s) = m.deletion_grace_period_seconds() {
        o.insert("deletionGracePeriodSeconds".into(), s.into());
    }
    let map = |m: StrMapRef<'_>| {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.to_string(), Value::from(v)))
                .collect(),
        )
    };
    if !m.labels().is_empty() {
        o.insert("labels".into(), map(m.labels()));
    }
    if !m.annotations().is_empty() {
        o.insert("annotations".into(), map(m.annotations()));
    }
    if !m.owner_references().is_empty() {
        let refs = m
            .owner_references()
            .map(|r| {
                let mut e = Map::new();
                e.insert("apiVersion".into(), r.api_version.into());
                e.insert("kind".into(), r.kind.into());
                e.insert("name".into(), r.name.into());
                e.insert("uid".into(), r.uid.into());
                if let Some(c) = r.controller {
                    e.insert("controller".into(), c.into());
                }
                if let Some(b) = r.block_owner_deletion {
                    e.insert("blockOwnerDeletion".into(), b.into());
                }
                Value::Object(e)
            })
            .collect();
        o.insert("ownerReferences".into(), Value::Array(refs));
    }
    if !m.finalizers().is_empty() {
        o.insert(
            "finalizers".into(),
            m.finalizers().map(Value::from).collect(),
        );
    }
    if !m.managed_fields().is_empty() {
        let mut entries = Vec::with_capacity(m.managed_fields().len());
        for raw in m.managed_fields() {
            entries.push(managed_entry(raw)?);
        }
        o.insert("managedFields".into(), Value::Array(entries));
    }
    serde_json::to_vec(&o).map_err(|e| DecodeError::json(&e, 0).into())
}

/// One protobuf `ManagedFieldsEntry` as JSON; `fieldsV1` holds JSON bytes on the wire.
fn managed_entry(raw: &Bytes) -> Result<Value, TranscodeError> {
    let e = ManagedFieldsEntry::decode(raw.clone()).map_err(DecodeError::from)?;
    let mut o = Map::new();
    let put = |o: &mut Map<String, Value>, k: &str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            o.insert(k.to_owned(), v.into());
        }
    };
    put(&mut o, "manager", e.manager);
    put(&mut o, "operation", e.operation);
    put(&mut o, "apiVersion", e.api_version);
    let time = e.time.map(|t| {
        Time {
            seconds: t.seconds.unwrap_or_default(),
            nanos: t.nanos.unwrap_or_default(),
        }
        .to_rfc3339()
    });
    put(&mut o, "time", time);
    put(&mut o, "fieldsType", e.fields_type);
    if let Some(raw) = e.fields_v1.and_then(|f| f.raw) {
        let v: Value = if raw.is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?
        };
        o.insert("fieldsV1".into(), v);
    }
    put(&mut o, "subresource", e.subresource);
    Ok(Value::Object(o))
}
