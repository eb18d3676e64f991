//! One watch event to its wire form: a protobuf frame or a JSON line (what the simulator's
//! server writes).

use bytes::Bytes;

use super::event::WatchEvent;
use crate::object::encoding::Encoding;
use crate::object::protobuf::{encode_envelope_into, envelope_size};
use crate::object::protowire::{WT_LEN, len_field_size, put_str, put_tag};
use crate::object::varint;
use crate::object::{DecodeError, json};

/// Appends one protobuf watch frame for `event` to `out`: 4-byte big-endian length, then
/// `WatchEvent{type, RawExtension{raw}}` where raw is the object's envelope (protobuf objects)
/// or JSON document (JSON objects), or a `Status` envelope for errors.
///
/// # Errors
/// When the event's object is compressed and does not decompress ([`Object::raw`]); nothing
/// is appended then.
///
/// [`Object::raw`]: crate::object::Object::raw
pub fn encode_watch_frame(event: &WatchEvent, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let event_type = event.event_type().as_str();
    // Protobuf objects are written straight into `out` (their bytes copied once); anything
    // else is encoded first.
    let (api_version, embedded) = match event.object() {
        Some(o) if o.encoding() == Encoding::Protobuf => (o.gvk().api_version(), None),
        Some(o) => (String::new(), Some(o.to_wire()?)),
        None => match event {
            WatchEvent::Error(s) => (String::new(), Some(s.encode_protobuf())),
            _ => (String::new(), Some(Bytes::new())),
        },
    };
    let raw_len = match (&embedded, event.object()) {
        (Some(b), _) => b.len(),
        (None, Some(o)) => envelope_size(&api_version, &o.gvk().kind, o.raw_len()),
        (None, None) => 0,
    };
    // Taken before anything is appended (a compressed object is decompressed here).
    let body = match (&embedded, event.object()) {
        (None, Some(o)) => Some(o.raw()?),
        _ => None,
    };
    let msg_len = len_field_size(event_type.len()) + len_field_size(len_field_size(raw_len));
    out.reserve(4 + msg_len);
    out.extend_from_slice(&(msg_len as u32).to_be_bytes());
    put_str(out, 1, event_type);
    put_tag(out, 2, WT_LEN);
    varint::put(out, len_field_size(raw_len) as u64);
    put_tag(out, 1, WT_LEN);
    varint::put(out, raw_len as u64);
    match (embedded, event.object()) {
        (Some(b), _) => out.extend_from_slice(&b),
        (None, Some(o)) => {
            encode_envelope_into(
                &api_version,
                &o.gvk().kind,
                body.as_deref().unwrap_or(&[]),
                out,
            );
        }
        (None, None) => {}
    }
    Ok(())
}

/// Appends one JSON watch line for `event` to `out`: `{"type":..,"object":..}\n`. Protobuf
/// objects are written with `apiVersion`, `kind` and `metadata` only (their other fields need
/// the kind's schema to render as JSON).
///
/// # Errors
/// When a protobuf object's metadata cannot be rendered (never for decoded objects).
pub fn encode_watch_line(event: &WatchEvent, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let raw = match event {
        WatchEvent::Error(s) => s.encode_json(),
        other => match other.object() {
            Some(o) => json::object_json(o)?,
            None => Bytes::from_static(b"null"),
        },
    };
    // A pretty-printed document would break line framing: write it compact.
    let raw = if raw.contains(&b'\n') {
        let v: serde_json::Value =
            serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?;
        Bytes::from(v.to_string())
    } else {
        raw
    };
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event.event_type().as_str().as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(&raw);
    out.extend_from_slice(b"}\n");
    Ok(())
}
