//! The JSON encoding (custom resources are JSON-only on real servers). Only `apiVersion`, `kind`
//! and `metadata` are decoded; the rest of the document is skipped by serde without building
//! values, and the object keeps the input's bytes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use thin_vec::ThinVec;

use super::DecodeError;
use super::encoding::Encoding;
use super::meta::{GroupVersionKind, ObjectMeta};
use super::meta_pack::{Counts, Packer, owner_flags};
use super::meta_scalars::MetaScalars;
use super::meta_view::StrMapRef;
use super::time::Time;
use super::value::Object;

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

/// A JSON string as serde_json hands it over: borrowed from the input when it holds no escape,
/// else unescaped into its own `String`.
/// The text of an optional string field (`""` when absent, as Go has it).
fn opt_str<'a>(s: &'a Option<JStr<'_>>) -> &'a str {
    s.as_ref().map_or("", |s| &s.0)
}

#[derive(Default)]
struct JStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for JStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<JStr<'de>, E> {
                Ok(JStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<JStr<'de>, E> {
                Ok(JStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<JStr<'de>, E> {
                Ok(JStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON object of strings, entries in document order.
struct JMap<'a>(Vec<(JStr<'a>, JStr<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for JMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = JMap<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JMap<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some(e) = map.next_entry::<JStr<'a>, JStr<'a>>()? {
                    out.push(e);
                }
                Ok(JMap(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// The `metadata` members we decode, as read (strings borrowed where possible).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonMeta<'a> {
    #[serde(default, borrow)]
    name: Option<JStr<'a>>,
    #[serde(default, borrow)]
    generate_name: Option<JStr<'a>>,
    #[serde(default, borrow)]
    namespace: Option<JStr<'a>>,
    #[serde(default, borrow)]
    uid: Option<JStr<'a>>,
    #[serde(default, borrow)]
    resource_version: Option<JStr<'a>>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default, borrow)]
    creation_timestamp: Option<JStr<'a>>,
    #[serde(default, borrow)]
    deletion_timestamp: Option<JStr<'a>>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default, borrow)]
    labels: Option<JMap<'a>>,
    #[serde(default, borrow)]
    annotations: Option<JMap<'a>>,
    #[serde(default, borrow, deserialize_with = "opt_objects")]
    owner_references: Option<Vec<JsonOwnerRef<'a>>>,
    #[serde(default, borrow)]
    finalizers: Option<Vec<JStr<'a>>>,
    #[serde(default, borrow)]
    managed_fields: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonOwnerRef<'a> {
    #[serde(default, borrow)]
    api_version: JStr<'a>,
    #[serde(default, borrow)]
    kind: JStr<'a>,
    #[serde(default, borrow)]
    name: JStr<'a>,
    #[serde(default, borrow)]
    uid: JStr<'a>,
    #[serde(default)]
    controller: Option<bool>,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

/// `metadata` as written (same members and order as [`JsonMeta`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonMetaOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generate_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<StrMapRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<StrMapRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner_references: Option<Vec<JsonOwnerRefOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finalizers: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    managed_fields: Option<&'a RawValue>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonOwnerRefOut<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    controller: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_owner_deletion: Option<bool>,
}

/// Map entries in key order, of a repeated key the last (Go's `json.Unmarshal` into a map).
fn sorted_entries(m: Option<JMap<'_>>) -> Vec<(JStr<'_>, JStr<'_>)> {
    let mut entries = m.map(|m| m.0).unwrap_or_default();
    if entries.windows(2).all(|w| w[0].0.0 < w[1].0.0) {
        return entries;
    }
    // Stable: of equal keys the last read is the last in its run.
    entries.sort_by(|a, b| a.0.0.cmp(&b.0.0));
    let mut out: Vec<(JStr<'_>, JStr<'_>)> = Vec::with_capacity(entries.len());
    for e in entries {
        match out.last_mut() {
            Some(last) if last.0.0 == e.0.0 => *last = e,
            _ => out.push(e),
        }
    }
    out
}

fn json_err(e: &serde_json::Error, base: u64) -> DecodeError {
    DecodeError::json(e, base)
}

/// First and last second RFC 3339 can write (0000-01-01T00:00:00Z, 9999-12-31T23:59:59Z): its
/// years have four digits.
const RFC3339_SECONDS: std::ops::RangeInclusive<i64> = -62_167_219_200..=253_402_300_799;

/// Parses an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, fractional seconds allowed), years
/// 0000–9999 only, as Go's `time.Parse(time.RFC3339, …)` (`metav1.Time`'s JSON decoding).
/// jiff also reads ISO 8601's signed six-digit years (`-004999-01-01T00:00:00Z`), which no API
/// server writes and [`Time::to_rfc3339`] could not write back.
fn parse_time(s: &str) -> Result<Time, String> {
    let ts: jiff::Timestamp = s.parse().map_err(|e| format!("timestamp {s:?}: {e}"))?;
    if !RFC3339_SECONDS.contains(&ts.as_second()) {
        return Err(format!(
            "timestamp {s:?}: the year is outside 0000-9999, which RFC 3339 cannot write"
        ));
    }
    Ok(Time {
        seconds: ts.as_second(),
        nanos: ts.subsec_nanosecond(),
    })
}

/// Decodes a JSON `metadata` member. `base` is its offset in the input, for error messages.
/// The strings are copied into the metadata's own buffer (unescaped); the managed-fields array is
/// a slice of `input` (which must hold `raw`).
pub(crate) fn decode_meta(
    input: &Bytes,
    raw: &RawValue,
    base: u64,
) -> Result<ObjectMeta, DecodeError> {
    // The string ends are `u32`s: metadata over 4 GiB (far beyond any frame limit) is refused.
    if u32::try_from(raw.get().len()).is_err() {
        return Err(DecodeError::FrameTooLarge {
            offset: base,
            len: raw.get().len() as u64,
            limit: u32::MAX as usize,
        });
    }
    let ObjectOnly(m): ObjectOnly<JsonMeta<'_>> =
        serde_json::from_str(raw.get()).map_err(|e| json_err(&e, base))?;
    let time = |s: Option<JStr<'_>>| -> Result<Option<Time>, DecodeError> {
        s.map(|s| parse_time(&s.0))
            .transpose()
            .map_err(|message| DecodeError::Json {
                offset: base,
                line: 1,
                column: 1,
                message,
            })
    };
    let scalars = MetaScalars::new(
        m.generation,
        time(m.creation_timestamp)?,
        time(m.deletion_timestamp)?,
        m.deletion_grace_period_seconds,
    );
    let (labels, annotations) = (sorted_entries(m.labels), sorted_entries(m.annotations));
    let owners = m.owner_references.unwrap_or_default();
    let finalizers = m.finalizers.unwrap_or_default();
    let counts = Counts::new(
        labels.len(),
        annotations.len(),
        owners.len(),
        finalizers.len(),
    );
    let mut p = Packer::with_capacity(raw.get().len(), counts.words());
    p.singles(
        opt_str(&m.namespace),
        opt_str(&m.name),
        opt_str(&m.generate_name),
        opt_str(&m.uid),
        opt_str(&m.resource_version),
    );
    for (k, v) in labels.iter().chain(&annotations) {
        p.push(&k.0);
        p.push(&v.0);
    }
    for o in &owners {
        for s in [&o.api_version, &o.kind, &o.name, &o.uid] {
            p.push(&s.0);
        }
    }
    for f in &finalizers {
        p.push(&f.0);
    }
    for o in &owners {
        p.word(owner_flags(o.controller, o.block_owner_deletion));
    }
    let managed: ThinVec<Bytes> = m
        .managed_fields
        .filter(|v| v.get() != "null")
        .map(|v| input.slice_ref(v.get().as_bytes()))
        .into_iter()
        .collect();
    Ok(p.finish(counts, scalars, managed))
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
    let managed: Option<Box<RawValue>> = match meta.managed_fields() {
        [one] if managed_is_json => {
            Some(serde_json::from_slice::<Box<RawValue>>(one).map_err(|e| json_err(&e, 0))?)
        }
        _ => None,
    };
    fn some(s: &str) -> Option<&str> {
        (!s.is_empty()).then_some(s)
    }
    let jm = JsonMetaOut {
        name: some(meta.name()),
        generate_name: some(meta.generate_name()),
        namespace: some(meta.namespace()),
        uid: some(meta.uid()),
        resource_version: some(meta.resource_version()),
        generation: meta.generation(),
        creation_timestamp: meta.creation_timestamp().as_ref().map(Time::to_rfc3339),
        deletion_timestamp: meta.deletion_timestamp().as_ref().map(Time::to_rfc3339),
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds(),
        labels: (!meta.labels().is_empty()).then_some(meta.labels()),
        annotations: (!meta.annotations().is_empty()).then_some(meta.annotations()),
        owner_references: (!meta.owner_references().is_empty()).then(|| {
            meta.owner_references()
                .map(|o| JsonOwnerRefOut {
                    api_version: o.api_version,
                    kind: o.kind,
                    name: o.name,
                    uid: o.uid,
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect()
        }),
        finalizers: (!meta.finalizers().is_empty()).then(|| meta.finalizers().collect()),
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
        Encoding::Json => obj.raw(),
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
