//! One watch event from its wire form: a protobuf frame's `WatchEvent` payload or a JSON line.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::event::{WatchEvent, WatchEventType};
use crate::object::encoding::MAGIC;
use crate::object::json::{self, Head, offset_in};
use crate::object::meta::GroupVersionKind;
use crate::object::protobuf::{decode_bare, decode_envelope_parts};
use crate::object::protowire::Reader;
use crate::object::status::ApiStatus;
use crate::object::{DecodeError, Object};

/// Reuses one `Arc<GroupVersionKind>` for consecutive objects of the same kind.
#[derive(Debug, Default)]
pub(super) struct GvkCache(Option<(Box<str>, Box<str>, Arc<GroupVersionKind>)>);

impl GvkCache {
    /// The shared GVK of `api_version` + `kind`: allocated only when it differs from the last.
    fn get_parts(&mut self, api_version: &str, kind: &str) -> Arc<GroupVersionKind> {
        match &self.0 {
            Some((a, k, gvk)) if short_eq(a, api_version) && short_eq(k, kind) => gvk.clone(),
            _ => {
                let gvk = Arc::new(GroupVersionKind::from_api_version(api_version, kind));
                self.0 = Some((api_version.into(), kind.into(), gvk.clone()));
                gvk
            }
        }
    }
}

/// String equality without a `memcmp` call for the few bytes of an apiVersion or kind (the
/// call cost more than the comparison: 4 % of the reflector thread's profile samples).
#[inline]
fn short_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Decodes an embedded object (`RawExtension.raw`): a protobuf envelope or a JSON document.
fn decode_embedded(raw: Bytes, gvks: &mut GvkCache) -> Result<Object, DecodeError> {
    if raw.starts_with(&MAGIC) {
        let env = decode_envelope_parts(&raw)?;
        let base = offset_in(&raw, &env.raw);
        let gvk = gvks.get_parts(env.api_version, env.kind);
        decode_bare(gvk, env.raw).map_err(|e| e.shifted(base))
    } else if raw.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        let json::ObjectOnly(head): json::ObjectOnly<Head<'_>> =
            serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?;
        let gvk = gvks.get_parts(
            head.api_version.as_deref().unwrap_or(""),
            head.kind.as_deref().unwrap_or(""),
        );
        let metadata = head.metadata;
        json::decode_with_head(raw.clone(), gvk, metadata, 0)
    } else {
        Err(DecodeError::UnknownEncoding {
            start: raw.iter().take(4).copied().collect(),
        })
    }
}

/// Decodes one protobuf `WatchEvent` message (a frame's payload, no length prefix).
pub(super) fn decode_pb_event(
    frame: &Bytes,
    gvks: &mut GvkCache,
) -> Result<WatchEvent, DecodeError> {
    let mut r = Reader::new(frame, 0, frame.len(), "WatchEvent");
    let mut event_type = "";
    let mut raw = None;
    while let Some(f) = r.next_field()? {
        match f.number {
            1 => event_type = r.str(&f)?,
            2 => {
                let mut ext = r.message(&f, "RawExtension")?;
                while let Some(g) = ext.next_field()? {
                    if g.number == 1 {
                        raw = Some(ext.bytes(&g)?);
                    } else {
                        ext.skip(&g)?;
                    }
                }
            }
            _ => r.skip(&f)?,
        }
    }
    let t = WatchEventType::parse(event_type).ok_or_else(|| DecodeError::UnknownEventType {
        event_type: event_type.to_owned(),
        offset: 0,
    })?;
    let raw = raw.ok_or(DecodeError::Missing {
        what: "watch event object",
        offset: 0,
    })?;
    let base = offset_in(frame, &raw);
    if t == WatchEventType::Error {
        let status = ApiStatus::decode(&raw).map_err(|e| e.shifted(base))?;
        return WatchEvent::from_parts(t, None, Some(status), 0);
    }
    let obj = decode_embedded(raw, gvks).map_err(|e| e.shifted(base))?;
    WatchEvent::from_parts(t, Some(obj), None, 0)
}

/// Whether a protobuf `WatchEvent` frame is an ERROR event, read from its type field alone
/// (`false` for a frame that does not decode: decoding it reports why).
pub(super) fn pb_event_is_error(frame: &Bytes) -> bool {
    let mut r = Reader::new(frame, 0, frame.len(), "WatchEvent");
    while let Ok(Some(f)) = r.next_field() {
        if f.number == 1 {
            return r.str(&f).is_ok_and(|t| t == WatchEventType::Error.as_str());
        }
        if r.skip(&f).is_err() {
            break;
        }
    }
    false
}

/// Whether a JSON watch line is an ERROR event (`false` for a line that does not parse).
/// Only a line holding the bytes `ERROR` is parsed.
pub(super) fn json_event_is_error(line: &Bytes) -> bool {
    #[derive(Deserialize)]
    struct TypeOnly<'a> {
        #[serde(rename = "type", borrow)]
        event_type: std::borrow::Cow<'a, str>,
    }
    let name = WatchEventType::Error.as_str().as_bytes();
    line.windows(name.len()).any(|w| w == name)
        && serde_json::from_slice::<TypeOnly<'_>>(line)
            .is_ok_and(|l| l.event_type == WatchEventType::Error.as_str())
}

/// Decodes one JSON watch line `{"type":"ADDED","object":{...}}` held in `line`.
pub(super) fn decode_json_event(
    line: &Bytes,
    gvks: &mut GvkCache,
) -> Result<WatchEvent, DecodeError> {
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(rename = "type", borrow)]
        event_type: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        object: Option<&'a RawValue>,
    }
    let json::ObjectOnly(l): json::ObjectOnly<Line<'_>> =
        serde_json::from_slice(line).map_err(|e| DecodeError::json(&e, 0))?;
    let t = WatchEventType::parse(&l.event_type).ok_or_else(|| DecodeError::UnknownEventType {
        event_type: l.event_type.to_string(),
        offset: 0,
    })?;
    let Some(obj) = l.object.filter(|o| o.get() != "null") else {
        return Err(DecodeError::Missing {
            what: "watch event object",
            offset: 0,
        });
    };
    let raw = line.slice_ref(obj.get().as_bytes());
    let base = offset_in(line, &raw);
    if t == WatchEventType::Error {
        let status = ApiStatus::decode(&raw).map_err(|e| e.shifted(base))?;
        return WatchEvent::from_parts(t, None, Some(status), 0);
    }
    let obj = decode_embedded(raw, gvks).map_err(|e| e.shifted(base))?;
    WatchEvent::from_parts(t, Some(obj), None, 0)
}
