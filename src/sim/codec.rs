//! Byte assembly of the simulator's objects and watch frames, without building an `Object` per
//! change.
//!
//! An object's wire form is cut into pieces that are encoded once and reused:
//! - the *static* metadata (everything but `resourceVersion`, `generation` and `labels`),
//!   encoded when the object is created;
//! - the template's *rest* (every top-level field but `metadata`), encoded once per template;
//! - the *dynamic* metadata, a few dozen bytes written per change.
//!
//! A change's watch frame is written in one pass into one buffer of the exact size, and the
//! object's wire form (protobuf envelope or JSON document) is a slice of that frame: one
//! allocation and one copy of the object per change. Protobuf metadata is written in field
//! order, as the API server writes it ([`meta_cuts`] places the dynamic fields among the static
//! ones; a cache that re-encodes metadata finds it exact); JSON members are written once each.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use super::Templates;
use crate::object::{
    DecodeError, Encoding, GroupVersionKind, Object, ObjectMeta, Str, StrMapRef, WatchEvent,
    WatchEventType, encode_envelope, encode_object_meta, encode_watch_frame, encode_watch_line,
    varint,
};

/// The label the flood generator changes on updates; kept apart so an update re-encodes one
/// label only.
pub(crate) const VERSION_LABEL: &str = "version";

/// Encodes one watch event in the server's format.
pub(crate) fn encode_event(
    encoding: Encoding,
    event: &WatchEvent,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    match encoding {
        Encoding::Protobuf => encode_watch_frame(event, out),
        Encoding::Json => encode_watch_line(event, out),
    }
}

/// Where the dynamic fields go in static protobuf metadata ([`Codec::static_meta`]): the
/// offset of its empty `resourceVersion` field (6) and that field's length (2; 0 and the
/// second offset when there is none), and the offset of its first field after the `labels`
/// (11) it leaves out (the end of the bytes when there is none).
fn meta_cuts(m: &[u8]) -> (usize, usize, usize) {
    let (rv_at, labels_go) = field_offsets(m);
    match rv_at {
        Some(at) if m[at..].starts_with(&[6 << 3 | 2, 0]) => (at, 2, labels_go),
        _ => (labels_go, 0, labels_go),
    }
}

/// The offsets [`meta_cuts`] reads: of field 6, and of the first field above 11.
fn field_offsets(m: &[u8]) -> (Option<usize>, usize) {
    let (mut rv_at, mut at) = (None, 0);
    while at < m.len() {
        let Ok((tag, n)) = varint::read(&m[at..]) else {
            break;
        };
        let field = tag >> 3;
        if field == 6 {
            rv_at = Some(at);
        }
        if field > 11 {
            return (rv_at, at);
        }
        let value = at + n;
        let next = match tag & 7 {
            0 => varint::read(&m[value..]).map(|(_, n)| value + n),
            2 => varint::read(&m[value..]).map(|(len, n)| value + n + len as usize),
            _ => break,
        };
        match next {
            Ok(next) if next <= m.len() => at = next,
            _ => break,
        }
    }
    (rv_at, m.len())
}

/// Where a label keyed `key` goes among protobuf label entries (field 11, sorted by key): the
/// offset of the first entry whose key sorts after it, or the end.
fn pb_label_slot(labels: &[u8], key: &str) -> usize {
    let mut at = 0;
    while at < labels.len() {
        // Entry: tag, length, then the key (tag, length, bytes) and the value.
        let Ok((len, n)) = varint::read(labels.get(at + 1..).unwrap_or_default()) else {
            break;
        };
        let entry = at + 1 + n;
        let next = entry + len as usize;
        let entry_key = labels.get(entry + 1..next).and_then(|e| {
            let (klen, n) = varint::read(e).ok()?;
            e.get(n..n + klen as usize)
        });
        match entry_key {
            Some(k) if k > key.as_bytes() => return at,
            Some(_) => at = next,
            None => break,
        }
    }
    labels.len()
}

/// Appends a length-delimited protobuf field.
fn put_len_field(out: &mut Vec<u8>, field: u8, data: &[u8]) {
    out.push((field << 3) | 2);
    varint::put(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A JSON object's members but `apiVersion`, `kind` and `metadata`, as written after the
/// metadata: `,"spec":..,"status":..` (empty when there are none).
pub(crate) fn json_rest(
    mut doc: serde_json::Map<String, serde_json::Value>,
) -> Result<Bytes, DecodeError> {
    for k in ["apiVersion", "kind", "metadata"] {
        doc.remove(k);
    }
    let s = serde_json::to_string(&doc).map_err(|e| DecodeError::json(&e, 0))?;
    let inner = &s[1..s.len() - 1];
    Ok(if inner.is_empty() {
        Bytes::new()
    } else {
        Bytes::from(format!(",{inner}"))
    })
}

/// The parts of an object's current version that change per event.
#[derive(Debug)]
pub(crate) struct Dynamic<'a> {
    pub(crate) resource_version: u64,
    pub(crate) generation: i64,
    /// Encoded labels other than [`VERSION_LABEL`] (see [`Codec::labels`]).
    pub(crate) labels: &'a [u8],
    pub(crate) version: Option<&'a str>,
}

/// Encoders for one server's kind and encoding.
#[derive(Debug)]
pub(crate) struct Codec {
    encoding: Encoding,
    /// Protobuf: magic + envelope TypeMeta field. JSON: `{"apiVersion":..,"kind":..,"metadata":{`.
    head: Bytes,
    /// Protobuf: the envelope's fields after `raw`. JSON: unused.
    tail: Bytes,
    /// Per template: protobuf top-level fields but 1; JSON `,"spec":..` members (or empty).
    rests: Vec<Bytes>,
    gvk: Arc<GroupVersionKind>,
}

impl Codec {
    pub(crate) fn new(templates: &Templates) -> Result<Self, DecodeError> {
        let gvk = templates.gvk().clone();
        let encoding = templates.encoding();
        let (head, tail) = match encoding {
            Encoding::Protobuf => {
                let e = encode_envelope(&gvk, &[]);
                // MAGIC, field 1 (TypeMeta), then `12 00` (empty raw), then the tail.
                let (tm_len, n) = varint::read(&e[5..]).ok().ok_or(DecodeError::Missing {
                    what: "envelope type meta",
                    offset: 5,
                })?;
                let head_end = 5 + n + tm_len as usize;
                debug_assert_eq!(&e[head_end..head_end + 2], &[0x12, 0x00]);
                (e.slice(..head_end), e.slice(head_end + 2..))
            }
            Encoding::Json => {
                let s = format!(
                    "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{{",
                    serde_json::Value::from(gvk.api_version()),
                    serde_json::Value::from(gvk.kind.as_str())
                );
                (Bytes::from(s), Bytes::new())
            }
        };
        let mut rests = Vec::new();
        for t in templates.objects() {
            rests.push(match encoding {
                Encoding::Protobuf => {
                    // with_meta writes field 1 first, then every other field verbatim.
                    let raw = t.with_meta(ObjectMeta::default())?.raw()?;
                    let (len, n) = varint::read(&raw[1..]).ok().ok_or(DecodeError::Missing {
                        what: "template metadata",
                        offset: 1,
                    })?;
                    raw.slice(1 + n + len as usize..)
                }
                Encoding::Json => json_rest(
                    serde_json::from_slice(&t.raw()?).map_err(|e| DecodeError::json(&e, 0))?,
                )?,
            });
        }
        Ok(Codec {
            encoding,
            head,
            tail,
            rests,
            gvk,
        })
    }

    /// The static metadata of `meta` (its resourceVersion, generation and labels are left
    /// out): protobuf `ObjectMeta` fields, or JSON members without braces.
    pub(crate) fn static_meta(&self, meta: &ObjectMeta) -> Result<Bytes, DecodeError> {
        let mut m = meta.to_fields();
        m.resource_version = Str::default();
        m.generation = None;
        m.labels.clear();
        let m = ObjectMeta::from(m);
        match self.encoding {
            Encoding::Protobuf => {
                let mut out = Vec::with_capacity(256);
                encode_object_meta(&m, &mut out);
                Ok(Bytes::from(out))
            }
            Encoding::Json => {
                // Render through the object module's JSON metadata writer on an empty document.
                let empty = Object::from_parts(
                    self.gvk.clone(),
                    ObjectMeta::default(),
                    Bytes::from_static(b"{}"),
                    Encoding::Json,
                );
                let doc = empty.with_meta(m)?;
                let v: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(&doc.raw()?).map_err(|e| DecodeError::json(&e, 0))?;
                let meta = v.get("metadata").cloned().unwrap_or_default();
                let s = serde_json::to_string(&meta).map_err(|e| DecodeError::json(&e, 0))?;
                let inner = if s.len() >= 2 { &s[1..s.len() - 1] } else { "" };
                Ok(Bytes::copy_from_slice(inner.as_bytes()))
            }
        }
    }

    /// Encodes `labels` without [`VERSION_LABEL`], and returns that label's value apart.
    pub(crate) fn labels(&self, labels: StrMapRef<'_>) -> (Bytes, Option<String>) {
        let mut out = Vec::new();
        for (k, v) in labels.iter().filter(|(k, _)| *k != VERSION_LABEL) {
            self.put_label(&mut out, k, v);
        }
        (
            Bytes::from(out),
            labels.get(VERSION_LABEL).map(|v| v.to_string()),
        )
    }

    fn put_label(&self, out: &mut Vec<u8>, k: &str, v: &str) {
        match self.encoding {
            Encoding::Protobuf => {
                let entry_len = 2
                    + varint::len(k.len() as u64)
                    + k.len()
                    + varint::len(v.len() as u64)
                    + v.len();
                out.push((11 << 3) | 2);
                varint::put(out, entry_len as u64);
                put_len_field(out, 1, k.as_bytes());
                put_len_field(out, 2, v.as_bytes());
            }
            Encoding::Json => {
                out.extend_from_slice(serde_json::Value::from(k).to_string().as_bytes());
                out.push(b':');
                out.extend_from_slice(serde_json::Value::from(v).to_string().as_bytes());
                out.push(b',');
            }
        }
    }

    /// The dynamic metadata bytes; protobuf: the labels start at the returned offset (they go
    /// after the static timestamps, the resourceVersion and generation before them).
    fn dynamic(&self, d: &Dynamic<'_>) -> (Vec<u8>, usize) {
        let rv = d.resource_version.to_string();
        let mut out = Vec::with_capacity(d.labels.len() + 64);
        let mut labels_at = 0;
        match self.encoding {
            Encoding::Protobuf => {
                put_len_field(&mut out, 6, rv.as_bytes());
                out.push(7 << 3);
                varint::put(&mut out, d.generation as u64);
                labels_at = out.len();
                // In key order, as the API server writes a map: `version` among the others.
                let (before, after) = d.labels.split_at(pb_label_slot(d.labels, VERSION_LABEL));
                out.extend_from_slice(before);
                if let Some(v) = d.version {
                    self.put_label(&mut out, VERSION_LABEL, v);
                }
                out.extend_from_slice(after);
            }
            Encoding::Json => {
                out.extend_from_slice(b"\"resourceVersion\":\"");
                out.extend_from_slice(rv.as_bytes());
                out.extend_from_slice(b"\",\"generation\":");
                out.extend_from_slice(d.generation.to_string().as_bytes());
                // No labels: no member (as a real server writes it).
                if !d.labels.is_empty() || d.version.is_some() {
                    out.extend_from_slice(b",\"labels\":{");
                    out.extend_from_slice(d.labels);
                    if let Some(v) = d.version {
                        self.put_label(&mut out, VERSION_LABEL, v);
                    }
                    if out.last() == Some(&b',') {
                        out.pop();
                    }
                    out.push(b'}');
                }
            }
        }
        (out, labels_at)
    }

    /// A watch event frame of type `kind` for the object made of `static_meta` (of template
    /// `template`, whose fields but `metadata` are `rest` when given, else the template's) and
    /// `d`; returns the frame and the range of the object's wire form in it.
    pub(crate) fn change_frame(
        &self,
        kind: WatchEventType,
        template: usize,
        rest: Option<&[u8]>,
        static_meta: &[u8],
        d: &Dynamic<'_>,
    ) -> (Bytes, Range<usize>) {
        let (dynamic, labels_at) = self.dynamic(d);
        let rest = rest.unwrap_or(&self.rests[template]);
        match self.encoding {
            Encoding::Protobuf => {
                // The static resourceVersion (empty) gives way to the dynamic one.
                let (rv_at, skip, labels_go) = meta_cuts(static_meta);
                let meta_len = static_meta.len() - skip + dynamic.len();
                let raw_len = 1 + varint::len(meta_len as u64) + meta_len + rest.len();
                let wire_len =
                    self.head.len() + 1 + varint::len(raw_len as u64) + raw_len + self.tail.len();
                self.wrap_with(kind, wire_len, |out| {
                    out.extend_from_slice(&self.head);
                    out.push(0x12);
                    varint::put(out, raw_len as u64);
                    out.push(0x0a);
                    varint::put(out, meta_len as u64);
                    out.extend_from_slice(&static_meta[..rv_at]);
                    out.extend_from_slice(&dynamic[..labels_at]);
                    out.extend_from_slice(&static_meta[rv_at + skip..labels_go]);
                    out.extend_from_slice(&dynamic[labels_at..]);
                    out.extend_from_slice(&static_meta[labels_go..]);
                    out.extend_from_slice(rest);
                    out.extend_from_slice(&self.tail);
                })
            }
            Encoding::Json => {
                let comma = usize::from(!static_meta.is_empty());
                let wire_len = self.head.len()
                    + static_meta.len()
                    + comma
                    + dynamic.len()
                    + 1
                    + rest.len()
                    + 1;
                self.wrap_with(kind, wire_len, |out| {
                    out.extend_from_slice(&self.head);
                    out.extend_from_slice(static_meta);
                    if comma == 1 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&dynamic);
                    out.push(b'}');
                    out.extend_from_slice(rest);
                    out.push(b'}');
                })
            }
        }
    }

    /// A watch event frame of type `kind` around an object's wire form.
    pub(crate) fn wrap(&self, kind: WatchEventType, wire: &[u8]) -> Bytes {
        self.wrap_with(kind, wire.len(), |out| out.extend_from_slice(wire))
            .0
    }

    /// Writes the event framing around `wire_len` bytes written by `write`.
    fn wrap_with(
        &self,
        kind: WatchEventType,
        wire_len: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> (Bytes, Range<usize>) {
        let t = kind.as_str().as_bytes();
        let mut out;
        let start;
        match self.encoding {
            Encoding::Protobuf => {
                let ext_len = 1 + varint::len(wire_len as u64) + wire_len;
                let msg_len = 1
                    + varint::len(t.len() as u64)
                    + t.len()
                    + 1
                    + varint::len(ext_len as u64)
                    + ext_len;
                out = Vec::with_capacity(4 + msg_len);
                out.extend_from_slice(&(msg_len as u32).to_be_bytes());
                put_len_field(&mut out, 1, t);
                out.push(0x12);
                varint::put(&mut out, ext_len as u64);
                out.push(0x0a);
                varint::put(&mut out, wire_len as u64);
                start = out.len();
                write(&mut out);
            }
            Encoding::Json => {
                out = Vec::with_capacity(wire_len + 32);
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(t);
                out.extend_from_slice(b"\",\"object\":");
                start = out.len();
                write(&mut out);
                out.extend_from_slice(b"}\n");
            }
        }
        let end = start + wire_len;
        debug_assert!(out.len() >= end);
        (Bytes::from(out), start..end)
    }
}
