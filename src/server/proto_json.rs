//! Protobuf ↔ JSON for every built-in kind, by the Kubernetes API schema: what lets one
//! server take a body in either encoding and keep objects in the other (kubectl's typed
//! commands send protobuf; kube-rs, Python and JavaScript clients send JSON).
//!
//! The schema is `proto/k8s/` (written by `scripts/gen-k8s-schema.py` from the k8s-pb and
//! k8s-openapi crates, compiled into a descriptor set by `build.rs`), read with prost-reflect.
//! The mapping is the one upstream's Go types define through their `json` and `protobuf` tags
//! (`k8s.io/api/*/types.go`):
//! - field names are the JSON names; a Go embedded struct (`json:",inline"`) is a nested
//!   message in protobuf and its fields are the outer object's in JSON;
//! - `int64` is a JSON number, `bytes` base64, maps JSON objects (keys sorted, as Go writes them);
//! - `meta.v1.Time` is an RFC 3339 string (seconds), `MicroTime` one with microseconds,
//!   `meta.v1.Duration` a Go duration string (`1h2m3s`), `Quantity` a string, `IntOrString` a
//!   number or a string, `RawExtension`, `FieldsV1` and apiextensions' `JSON` embedded JSON.
//!
//! Protobuf carries no `omitempty`: Go writes every non-pointer field, so an empty string on the
//! wire is left out of the JSON unless the schema marks the field `required` (k8s-openapi's
//! non-optional fields: Go writes them without `omitempty`, e.g. `imageID`); a pointer to an
//! empty string, such as a PersistentVolumeClaim's `storageClassName: ""`, is lost. Go's zero
//! time (an empty message) is left out; `seconds: 0` is the epoch; a time outside years
//! 1–9999 is an error. Numbers, booleans and messages present on the wire are written (a
//! `false` or `0` that Go would omit reads the same to every client).
//!
//! Not modelled: JSON members the schema does not know are dropped (a real server's default
//! field validation, but also under `fieldValidation=Strict`); fields newer than the k8s-pb
//! release the schema comes from are dropped as unknown (the HEAD fixtures' PodSpec fields 43
//! and 44, for example); the hand-written JSON forms of apiextensions'
//! `JSONSchemaPropsOrArray`, `OrBool` and `OrStringArray` (CustomResourceDefinitions are written
//! in JSON); a quantity is kept as written, not canonicalised.

use std::collections::HashMap;
use std::sync::OnceLock;

use base64::Engine as _;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{
    Cardinality, DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    ReflectMessage as _, Value as Pb,
};
use serde_json::{Map, Number, Value};

use crate::object::{self, DecodeError, Encoding, GroupVersionKind, Object};

/// The JSON name the schema gives a Go embedded struct's field (see the module docs).
const INLINE: &str = "..inline";

/// Why a body could not be converted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConvertError {
    /// The schema has no message for this group, version and kind.
    #[error("no protobuf schema is known for {0}")]
    UnknownKind(String),
    /// A JSON value does not fit the field's type (the path names the field).
    #[error("{path}: {message}")]
    Invalid {
        /// The field, as `spec.containers[0].name`.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// The protobuf bytes do not decode as the kind's message.
    #[error("the protobuf message does not decode: {0}")]
    Protobuf(String),
    /// The object's bytes could not be read, or the result does not decode as an object.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// The compiled schema (built by `build.rs` from `proto/k8s/`).
fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // The bytes are this crate's own build output; a failure is a build defect, and the
        // converter then knows no kinds (every conversion answers `UnknownKind`).
        DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/k8s.fds"))[..])
            .unwrap_or_else(|e| {
                tracing::error!("the Kubernetes schema does not load: {e}");
                DescriptorPool::new()
            })
    })
}

/// The message of `gvk` in the schema (`apps/v1` `Deployment` → `k8s.api.apps.v1.Deployment`).
pub(crate) fn message_for(gvk: &GroupVersionKind) -> Option<MessageDescriptor> {
    let package = match gvk.group.as_str() {
        "" => "api.core".to_owned(),
        "apiextensions.k8s.io" => "apiextensions_apiserver.pkg.apis.apiextensions".to_owned(),
        "internal.apiserver.k8s.io" => "api.apiserverinternal".to_owned(),
        g => format!("api.{}", g.split('.').next().unwrap_or(g)),
    };
    pool().get_message_by_name(&format!("k8s.{package}.{}.{}", gvk.version, gvk.kind))
}

/// The JSON document of a protobuf object (`kind`, `apiVersion`, then its fields).
///
/// # Errors
/// [`ConvertError::UnknownKind`], [`ConvertError::Protobuf`], or the body's read error.
pub(crate) fn object_to_json(obj: &Object) -> Result<Bytes, ConvertError> {
    object_to_json_as(obj, obj.gvk())
}

/// [`object_to_json`] for a protobuf object read as kind `gvk` (an envelope without type
/// information, sent to the endpoint of `gvk`).
///
/// # Errors
/// As [`object_to_json`].
pub(crate) fn object_to_json_as(
    obj: &Object,
    gvk: &GroupVersionKind,
) -> Result<Bytes, ConvertError> {
    let desc = message_for(gvk).ok_or_else(|| ConvertError::UnknownKind(gvk.to_string()))?;
    let msg = DynamicMessage::decode(desc, obj.raw()?)
        .map_err(|e| ConvertError::Protobuf(e.to_string()))?;
    let mut doc = Map::new();
    doc.insert("kind".into(), gvk.kind.as_str().into());
    doc.insert("apiVersion".into(), gvk.api_version().into());
    message_members(&msg, &mut doc)?;
    let bytes = serde_json::to_vec(&doc).map_err(|e| DecodeError::json(&e, 0))?;
    Ok(Bytes::from(bytes))
}

/// A JSON object of kind `gvk` (the schema must know it) as the same object in protobuf,
/// enveloped.
///
/// # Errors
/// [`ConvertError::UnknownKind`], [`ConvertError::Invalid`] for a member of the wrong type,
/// or the body's read error.
pub(crate) fn object_to_protobuf(
    obj: &Object,
    gvk: &GroupVersionKind,
) -> Result<Object, ConvertError> {
    if obj.encoding() == Encoding::Protobuf {
        return Ok(obj.clone());
    }
    let desc = message_for(gvk).ok_or_else(|| ConvertError::UnknownKind(gvk.to_string()))?;
    let doc: Value = serde_json::from_slice(&obj.raw()?).map_err(|e| DecodeError::json(&e, 0))?;
    let Value::Object(members) = doc else {
        return Err(invalid("", "expected a JSON object"));
    };
    let msg = json_message(&desc, &members, "")?;
    let raw = msg.encode_to_vec();
    Ok(object::decode(object::encode_envelope(gvk, &raw))?)
}

fn invalid(path: &str, message: impl Into<String>) -> ConvertError {
    ConvertError::Invalid {
        path: if path.is_empty() {
            "(object)".into()
        } else {
            path.to_owned()
        },
        message: message.into(),
    }
}

// ---- protobuf -> JSON ----

/// Appends the JSON members of `msg` to `out` (an embedded struct's fields in place).
fn message_members(msg: &DynamicMessage, out: &mut Map<String, Value>) -> Result<(), ConvertError> {
    for (field, value) in msg.fields() {
        if field.json_name() == INLINE {
            if let Pb::Message(inner) = value {
                message_members(inner, out)?;
            }
            continue;
        }
        if let Some(v) = field_json(&field, value)? {
            out.insert(field.json_name().to_owned(), v);
        }
    }
    Ok(())
}

/// A field's JSON value; `None` for what the JSON form leaves out: an empty string, unless the
/// field is one upstream's Go type writes without `omitempty` (`required` in the schema, from
/// k8s-openapi's non-optional fields, e.g. `containerStatuses[].imageID`).
fn field_json(field: &FieldDescriptor, value: &Pb) -> Result<Option<Value>, ConvertError> {
    Ok(match value {
        Pb::List(items) => Some(Value::Array(
            items
                .iter()
                .map(|v| Ok(scalar_json(v)?.unwrap_or(Value::Null)))
                .collect::<Result<_, ConvertError>>()?,
        )),
        Pb::Map(entries) => {
            let mut keys: Vec<(&MapKey, &Pb)> = entries.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            let mut m = Map::new();
            for (k, v) in keys {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                m.insert(key, scalar_json(v)?.unwrap_or(Value::Null));
            }
            Some(Value::Object(m))
        }
        Pb::String(s) if s.is_empty() && field.cardinality() != Cardinality::Required => None,
        _ => scalar_json(value)?,
    })
}

/// One value (a list's item, a map's value, or a singular field).
fn scalar_json(value: &Pb) -> Result<Option<Value>, ConvertError> {
    Ok(Some(match value {
        Pb::Bool(b) => Value::Bool(*b),
        Pb::I32(n) => Value::from(*n),
        Pb::I64(n) => Value::from(*n),
        Pb::U32(n) => Value::from(*n),
        Pb::U64(n) => Value::from(*n),
        Pb::F32(f) => Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number),
        Pb::F64(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Pb::String(s) => Value::String(s.clone()),
        Pb::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Pb::EnumNumber(n) => Value::from(*n),
        Pb::Message(m) => return message_json(m),
        Pb::List(_) | Pb::Map(_) => Value::Null,
    }))
}

fn get<'a>(msg: &'a DynamicMessage, name: &str) -> Option<&'a Pb> {
    msg.fields().find(|(f, _)| f.name() == name).map(|(_, v)| v)
}

fn int_of(msg: &DynamicMessage, name: &str) -> i64 {
    match get(msg, name) {
        Some(Pb::I64(n)) => *n,
        Some(Pb::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn str_of<'a>(msg: &'a DynamicMessage, name: &str) -> &'a str {
    match get(msg, name) {
        Some(Pb::String(s)) => s,
        _ => "",
    }
}

fn raw_json(msg: &DynamicMessage) -> Option<Value> {
    match get(msg, "raw") {
        Some(Pb::Bytes(b)) if !b.is_empty() => {
            Some(serde_json::from_slice(b).unwrap_or_else(|_| {
                // Not JSON (an embedded protobuf object): carried as base64 rather than lost.
                Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }))
        }
        _ => None,
    }
}

/// Seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the range of an RFC 3339 time.
const TIME_RANGE: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// A `meta.v1.Time` or `MicroTime` as RFC 3339 (`micro`: 6 fraction digits). Go's zero time
/// is an empty message (left out); `seconds: 0` present is the epoch.
fn time_json(msg: &DynamicMessage, micro: bool) -> Result<Option<Value>, ConvertError> {
    if get(msg, "seconds").is_none() && get(msg, "nanos").is_none() {
        return Ok(None);
    }
    let (s, n) = (int_of(msg, "seconds"), int_of(msg, "nanos"));
    let ts = i32::try_from(n)
        .ok()
        .filter(|n| (0..1_000_000_000).contains(n) && TIME_RANGE.contains(&s))
        .and_then(|n| jiff::Timestamp::new(s, if micro { n } else { 0 }).ok())
        .ok_or_else(|| invalid("", format!("time out of range: seconds {s}, nanos {n}")))?;
    let f = if micro {
        "%Y-%m-%dT%H:%M:%S.%6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(ts.strftime(f).to_string().into()))
}

/// A message's JSON value, with the special forms of the module docs.
fn message_json(msg: &DynamicMessage) -> Result<Option<Value>, ConvertError> {
    let desc = msg.descriptor();
    Ok(match desc.full_name() {
        "k8s.apimachinery.pkg.apis.meta.v1.Time" => return time_json(msg, false),
        "k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => return time_json(msg, true),
        "k8s.apimachinery.pkg.apis.meta.v1.Duration" => {
            Some(go_duration(int_of(msg, "duration")).into())
        }
        "k8s.apimachinery.pkg.api.resource.Quantity"
        | "k8s.apimachinery.pkg.api.resource.QuantityValue" => {
            Some(str_of(msg, "string").to_owned().into())
        }
        "k8s.apimachinery.pkg.util.intstr.IntOrString" => Some(if int_of(msg, "type") == 1 {
            str_of(msg, "strval").to_owned().into()
        } else {
            int_of(msg, "intval").into()
        }),
        "k8s.apimachinery.pkg.runtime.RawExtension"
        | "k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "k8s.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON"
        | "k8s.apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSON" => {
            Some(raw_json(msg).unwrap_or(Value::Null))
        }
        name if is_masked_list(name) => Some(match get(msg, "items") {
            Some(Pb::List(items)) => Value::Array(
                items
                    .iter()
                    .map(|v| Ok(scalar_json(v)?.unwrap_or(Value::Null)))
                    .collect::<Result<_, ConvertError>>()?,
            ),
            _ => Value::Array(Vec::new()),
        }),
        _ => {
            let mut m = Map::new();
            message_members(msg, &mut m)?;
            Some(Value::Object(m))
        }
    })
}

/// Go list types that protobuf wraps in a message of one `items` field (`ExtraValue`,
/// `meta.v1.Verbs`): a JSON array.
fn is_masked_list(full_name: &str) -> bool {
    full_name.ends_with(".ExtraValue") || full_name == "k8s.apimachinery.pkg.apis.meta.v1.Verbs"
}

/// Go's `time.Duration.String()` form of `ns` nanoseconds (`1h2m3.5s`, `1.5ms`, `0s`).
pub(crate) fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let frac = |v: u64, unit: u64| -> String {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let digits = unit.ilog10() as usize;
        let s = format!("{rest:0digits$}");
        format!("{whole}.{}", s.trim_end_matches('0'))
    };
    if u < 1_000 {
        out.push_str(&format!("{u}ns"));
    } else if u < 1_000_000 {
        out.push_str(&format!("{}µs", frac(u, 1_000)));
    } else if u < 1_000_000_000 {
        out.push_str(&format!("{}ms", frac(u, 1_000_000)));
    } else {
        let secs_ns = u % 60_000_000_000;
        let mins = u / 60_000_000_000;
        let (h, m) = (mins / 60, mins % 60);
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&format!("{}s", frac(secs_ns, 1_000_000_000)));
    }
    out
}

/// Parses a Go duration string (`300ms`, `-1.5h`, `2h45m`, `1µs`) into nanoseconds.
pub(crate) fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += n * scale;
    }
    if total > i64::MAX as f64 {
        return None;
    }
    let ns = total.round() as i64;
    Some(if neg { -ns } else { ns })
}

// ---- JSON -> protobuf ----

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn mismatch(path: &str, v: &Value, want: &str) -> ConvertError {
    invalid(
        path,
        format!(
            "cannot unmarshal {} into a field of type {want}",
            json_type(v)
        ),
    )
}

/// Whether `desc` (or a message embedded in it) has a field of JSON name `name`.
fn accepts(desc: &MessageDescriptor, name: &str) -> bool {
    desc.get_field_by_json_name(name).is_some()
        || inline_fields(desc).any(|f| match f.kind() {
            Kind::Message(m) => accepts(&m, name),
            _ => false,
        })
}

fn inline_fields(desc: &MessageDescriptor) -> impl Iterator<Item = FieldDescriptor> + '_ {
    desc.fields().filter(|f| f.json_name() == INLINE)
}

/// A JSON object as a message of `desc` (members of embedded structs go to their message).
fn json_message(
    desc: &MessageDescriptor,
    members: &Map<String, Value>,
    path: &str,
) -> Result<DynamicMessage, ConvertError> {
    let mut msg = DynamicMessage::new(desc.clone());
    let mut embedded: HashMap<String, Map<String, Value>> = HashMap::new();
    for (name, v) in members {
        if v.is_null() {
            continue;
        }
        let field_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        if let Some(field) = desc
            .get_field_by_json_name(name)
            .filter(|f| f.json_name() != INLINE)
        {
            let value = field_value(&field, v, &field_path)?;
            msg.set_field(&field, value);
            continue;
        }
        // An embedded struct's member, or one the schema does not know (dropped).
        if let Some(f) = inline_fields(desc).find(|f| match f.kind() {
            Kind::Message(m) => accepts(&m, name),
            _ => false,
        }) {
            embedded
                .entry(f.name().to_owned())
                .or_default()
                .insert(name.clone(), v.clone());
        }
    }
    for (field_name, inner) in embedded {
        let Some(field) = desc.get_field_by_name(&field_name) else {
            continue;
        };
        if let Kind::Message(m) = field.kind() {
            let sub = json_message(&m, &inner, path)?;
            msg.set_field(&field, Pb::Message(sub));
        }
    }
    Ok(msg)
}

/// The value of `field` from JSON `v` (a list, a map, or one value).
fn field_value(field: &FieldDescriptor, v: &Value, path: &str) -> Result<Pb, ConvertError> {
    if field.is_map() {
        let Value::Object(m) = v else {
            return Err(mismatch(path, v, "map"));
        };
        let Kind::Message(entry) = field.kind() else {
            return Err(invalid(path, "map field without an entry message"));
        };
        let value_field = entry.map_entry_value_field();
        let mut out = HashMap::with_capacity(m.len());
        for (k, item) in m {
            if item.is_null() {
                continue;
            }
            let p = format!("{path}[{k}]");
            out.insert(
                MapKey::String(k.clone()),
                one_value(&value_field.kind(), item, &p)?,
            );
        }
        return Ok(Pb::Map(out));
    }
    if field.is_list() {
        let Value::Array(items) = v else {
            return Err(mismatch(path, v, "list"));
        };
        let kind = field.kind();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(one_value(&kind, item, &format!("{path}[{i}]"))?);
        }
        return Ok(Pb::List(out));
    }
    one_value(&field.kind(), v, path)
}

fn one_value(kind: &Kind, v: &Value, path: &str) -> Result<Pb, ConvertError> {
    let int = |v: &Value| v.as_i64().filter(|_| v.is_i64() || v.is_u64());
    Ok(match kind {
        Kind::String => Pb::String(
            v.as_str()
                .ok_or_else(|| mismatch(path, v, "string"))?
                .to_owned(),
        ),
        Kind::Bool => Pb::Bool(v.as_bool().ok_or_else(|| mismatch(path, v, "bool"))?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Pb::I32(
            int(v)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| mismatch(path, v, "int32"))?,
        ),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Pb::I64(int(v).ok_or_else(|| mismatch(path, v, "int64"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => Pb::U32(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| mismatch(path, v, "uint32"))?,
        ),
        Kind::Uint64 | Kind::Fixed64 => {
            Pb::U64(v.as_u64().ok_or_else(|| mismatch(path, v, "uint64"))?)
        }
        Kind::Double => Pb::F64(v.as_f64().ok_or_else(|| mismatch(path, v, "float64"))?),
        Kind::Float => Pb::F32(v.as_f64().ok_or_else(|| mismatch(path, v, "float32"))? as f32),
        Kind::Bytes => {
            let s = v.as_str().ok_or_else(|| mismatch(path, v, "[]byte"))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| invalid(path, format!("illegal base64 data: {e}")))?;
            Pb::Bytes(Bytes::from(b))
        }
        Kind::Enum(_) => Pb::EnumNumber(
            int(v)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| mismatch(path, v, "enum"))?,
        ),
        Kind::Message(m) => Pb::Message(special_message(m, v, path)?),
    })
}

/// A message from JSON: the special forms of the module docs, else a JSON object.
fn special_message(
    desc: &MessageDescriptor,
    v: &Value,
    path: &str,
) -> Result<DynamicMessage, ConvertError> {
    let mut msg = DynamicMessage::new(desc.clone());
    let mut set = |name: &str, value: Pb| {
        if let Some(f) = desc.get_field_by_name(name) {
            msg.set_field(&f, value);
        }
    };
    match desc.full_name() {
        "k8s.apimachinery.pkg.apis.meta.v1.Time"
        | "k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            let s = v.as_str().ok_or_else(|| mismatch(path, v, "time"))?;
            let ts: jiff::Timestamp = s
                .parse()
                .map_err(|e| invalid(path, format!("parsing time {s:?}: {e}")))?;
            set("seconds", Pb::I64(ts.as_second()));
            if ts.subsec_nanosecond() != 0 {
                set("nanos", Pb::I32(ts.subsec_nanosecond()));
            }
        }
        "k8s.apimachinery.pkg.apis.meta.v1.Duration" => {
            let s = v.as_str().ok_or_else(|| mismatch(path, v, "duration"))?;
            let ns = parse_go_duration(s)
                .ok_or_else(|| invalid(path, format!("time: invalid duration {s:?}")))?;
            set("duration", Pb::I64(ns));
        }
        "k8s.apimachinery.pkg.api.resource.Quantity"
        | "k8s.apimachinery.pkg.api.resource.QuantityValue" => {
            // Upstream's Quantity takes a JSON number too (`cpu: 1`).
            let s = match v {
                Value::String(s) => s.clone(),
                // Integers exactly; other numbers as Rust prints the f64 (`1e3` -> `1000`).
                Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => i.to_string(),
                    (_, Some(u), _) => u.to_string(),
                    (_, _, Some(f)) => f.to_string(),
                    _ => return Err(mismatch(path, v, "quantity")),
                },
                _ => return Err(mismatch(path, v, "quantity")),
            };
            set("string", Pb::String(s));
        }
        "k8s.apimachinery.pkg.util.intstr.IntOrString" => match v {
            Value::String(s) => {
                set("type", Pb::I64(1));
                set("strval", Pb::String(s.clone()));
            }
            Value::Number(_) => {
                let n = v
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| mismatch(path, v, "IntOrString"))?;
                set("type", Pb::I64(0));
                set("intval", Pb::I32(n));
            }
            _ => return Err(mismatch(path, v, "IntOrString")),
        },
        "k8s.apimachinery.pkg.runtime.RawExtension"
        | "k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "k8s.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON"
        | "k8s.apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSON" => {
            let raw = serde_json::to_vec(v).map_err(|e| invalid(path, e.to_string()))?;
            set("raw", Pb::Bytes(Bytes::from(raw)));
        }
        name if is_masked_list(name) => {
            let Value::Array(items) = v else {
                return Err(mismatch(path, v, "list"));
            };
            let mut list = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                list.push(one_value(&Kind::String, item, &format!("{path}[{i}]"))?);
            }
            set("items", Pb::List(list));
        }
        _ => {
            let Value::Object(members) = v else {
                return Err(mismatch(path, v, "object"));
            };
            return json_message(desc, members, path);
        }
    }
    Ok(msg)
}

#[cfg(test)]
#[path = "proto_json_tests.rs"]
mod tests;
