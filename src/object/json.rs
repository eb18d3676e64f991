//! The JSON encoding (custom resources are JSON-only on real servers). Only `apiVersion`, `kind`
//! and `metadata` are decoded; the rest of the document is skipped by serde without building
//! values, and the object keeps the input's bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::DecodeError;
use super::meta::{GroupVersionKind, ObjectMeta, OwnerReference, Time};
use super::value::{Encoding, Object};

/// A `T` read only from a JSON object. serde's derived structs also accept a JSON array (the
/// fields by position: `["a"]` is an object named `a`); the API server (Go's `encoding/json`)
/// rejects an array where an object belongs, and so do we.
pub(crate) struct ObjectOnly<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(ObjectOnly)
    }
}

/// `deserialize_with` for an optional member that must be an object (or `null`).
pub(crate) fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(Option::<ObjectOnly<T>>::deserialize(d)?.map(|o| o.0))
}

/// `deserialize_with` for an array member whose elements must be objects.
pub(crate) fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    Ok(Vec::<ObjectOnly<T>>::deserialize(d)?
        .into_iter()
        .map(|o| o.0)
        .collect())
}

/// `deserialize_with` for an optional array member whose elements must be objects.
fn opt_objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Ok(Option::<Vec<ObjectOnly<T>>>::deserialize(d)?.map(|v| v.into_iter().map(|o| o.0).collect()))
}

/// `apiVersion`, `kind` and `metadata` of a JSON object.
#[derive(Deserialize)]
pub(crate) struct Head<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    pub(crate) api_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) metadata: Option<&'a RawValue>,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonMeta<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generate_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(
        default,
        deserialize_with = "opt_objects",
        skip_serializing_if = "Option::is_none"
    )]
    owner_references: Option<Vec<JsonOwnerRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finalizers: Option<Vec<String>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    managed_fields: Option<&'a RawValue>,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonOwnerRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    controller: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    block_owner_deletion: Option<bool>,
}

fn json_err(e: &serde_json::Error, base: u64) -> DecodeError {
    DecodeError::json(e, base)
}

/// Parses an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, fractional seconds allowed).
fn parse_time(s: &str) -> Result<Time, String> {
    let ts: jiff::Timestamp = s.parse().map_err(|e| format!("timestamp {s:?}: {e}"))?;
    Ok(Time {
        seconds: ts.as_second(),
        nanos: ts.subsec_nanosecond(),
    })
}

/// Decodes a JSON `metadata` member. `base` is its offset in the input, for error messages.
pub(crate) fn decode_meta(
    input: &Bytes,
    raw: &RawValue,
    base: u64,
) -> Result<ObjectMeta, DecodeError> {
    let ObjectOnly(m): ObjectOnly<JsonMeta<'_>> =
        serde_json::from_str(raw.get()).map_err(|e| json_err(&e, base))?;
    let time = |s: Option<String>| -> Result<Option<Time>, DecodeError> {
        s.map(|s| parse_time(&s))
            .transpose()
            .map_err(|message| DecodeError::Json {
                offset: base,
                line: 1,
                column: 1,
                message,
            })
    };
    Ok(ObjectMeta {
        name: m.name.unwrap_or_default(),
        generate_name: m.generate_name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        generation: m.generation,
        creation_timestamp: time(m.creation_timestamp)?,
        deletion_timestamp: time(m.deletion_timestamp)?,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|o| OwnerReference {
                api_version: o.api_version,
                kind: o.kind,
                name: o.name,
                uid: o.uid,
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.unwrap_or_default(),
        managed_fields: m
            .managed_fields
            .filter(|v| v.get() != "null")
            .map(|v| input.slice_ref(v.get().as_bytes()))
            .into_iter()
            .collect(),
    })
}

/// Offset of `part` inside `whole` (both from the same allocation).
pub(crate) fn offset_in(whole: &[u8], part: &[u8]) -> u64 {
    (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize) as u64
}

/// Decodes a JSON object document held in `input` (the object keeps `input` itself).
pub(crate) fn decode_object(input: &Bytes) -> Result<Object, DecodeError> {
    let ObjectOnly(head): ObjectOnly<Head<'_>> =
        serde_json::from_slice(input).map_err(|e| json_err(&e, 0))?;
    let gvk = GroupVersionKind::from_api_version(
        head.api_version.as_deref().unwrap_or(""),
        head.kind.as_deref().unwrap_or(""),
    );
    decode_with_head(input.clone(), Arc::new(gvk), head.metadata, 0)
}

/// Builds an object from a document whose head is already parsed. `raw` is the document,
/// `base` its offset in the outer input (for errors).
pub(crate) fn decode_with_head(
    raw: Bytes,
    gvk: Arc<GroupVersionKind>,
    metadata: Option<&RawValue>,
    base: u64,
) -> Result<Object, DecodeError> {
    let meta = match metadata {
        Some(m) if m.get() != "null" => {
            decode_meta(&raw, m, base + offset_in(&raw, m.get().as_bytes()))?
        }
        _ => ObjectMeta::default(),
    };
    Ok(Object::from_parts(gvk, meta, raw, Encoding::Json))
}

/// `metadata` as JSON. `managed_is_json` says whether `meta.managed_fields` holds one JSON array
/// (JSON objects) or protobuf entries, which cannot be rendered without their schema and are
/// left out.
fn meta_to_json(
    meta: &ObjectMeta,
    managed_is_json: bool,
) -> Result<serde_json::Value, DecodeError> {
    let managed: Option<Box<RawValue>> = match meta.managed_fields.as_slice() {
        [one] if managed_is_json => {
            Some(serde_json::from_slice::<Box<RawValue>>(one).map_err(|e| json_err(&e, 0))?)
        }
        _ => None,
    };
    let some = |s: &String| (!s.is_empty()).then(|| s.clone());
    let jm = JsonMeta {
        name: some(&meta.name),
        generate_name: some(&meta.generate_name),
        namespace: some(&meta.namespace),
        uid: some(&meta.uid),
        resource_version: some(&meta.resource_version),
        generation: meta.generation,
        creation_timestamp: meta.creation_timestamp.as_ref().map(Time::to_rfc3339),
        deletion_timestamp: meta.deletion_timestamp.as_ref().map(Time::to_rfc3339),
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        labels: (!meta.labels.is_empty()).then(|| meta.labels.clone()),
        annotations: (!meta.annotations.is_empty()).then(|| meta.annotations.clone()),
        owner_references: (!meta.owner_references.is_empty()).then(|| {
            meta.owner_references
                .iter()
                .map(|o| JsonOwnerRef {
                    api_version: o.api_version.clone(),
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                    uid: o.uid.clone(),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect()
        }),
        finalizers: (!meta.finalizers.is_empty()).then(|| meta.finalizers.clone()),
        managed_fields: managed.as_deref(),
    };
    serde_json::to_value(&jm).map_err(|e| json_err(&e, 0))
}

/// Re-encodes a JSON document with `metadata` replaced; other members keep their order.
pub(crate) fn replace_meta(raw: &Bytes, meta: &ObjectMeta) -> Result<Bytes, DecodeError> {
    let mut doc: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(raw).map_err(|e| json_err(&e, 0))?;
    doc.insert("metadata".to_owned(), meta_to_json(meta, true)?);
    let out = serde_json::to_vec(&doc).map_err(|e| json_err(&e, 0))?;
    Ok(Bytes::from(out))
}

/// Encodes a JSON document for an object: JSON objects as they are; protobuf objects cannot be
/// rendered as JSON without their schema, so only apiVersion/kind/metadata are written.
pub(crate) fn object_json(obj: &Object) -> Result<Bytes, DecodeError> {
    match obj.encoding() {
        Encoding::Json => Ok(obj.raw().clone()),
        Encoding::Protobuf => {
            let mut doc = serde_json::Map::new();
            doc.insert("apiVersion".into(), obj.gvk().api_version().into());
            doc.insert("kind".into(), obj.gvk().kind.clone().into());
            doc.insert("metadata".into(), meta_to_json(obj.meta(), false)?);
            Ok(Bytes::from(
                serde_json::to_vec(&doc).map_err(|e| json_err(&e, 0))?,
            ))
        }
    }
}
