//! [`encode_object_meta`]: metadata back to protobuf, as the API server writes it (upstream
//! `apimachinery/pkg/apis/meta/v1/generated.pb.go`), for the simulator, `Object::with_meta`
//! and a compact object's body, which leaves its metadata out when this gives it back.

use super::meta::ObjectMeta;
use super::protowire::{put_bytes, put_message, put_str, put_uint};
use super::time::Time;

/// Encodes `meta` as an `ObjectMeta` message body (no tag, no length), in field order, the way
/// the API server writes it: strings always present, optional numbers and times only when set.
/// `managed_fields` entries are written back verbatim.
pub fn encode_object_meta(meta: &ObjectMeta, out: &mut Vec<u8>) {
    put_str(out, 1, meta.name());
    put_str(out, 2, meta.generate_name());
    put_str(out, 3, meta.namespace());
    put_str(out, 4, "");
    put_str(out, 5, meta.uid());
    put_str(out, 6, meta.resource_version());
    if let Some(g) = meta.generation() {
        put_uint(out, 7, g as u64);
    }
    let put_time = |out: &mut Vec<u8>, field: u32, t: &Time| {
        put_message(out, field, |m| {
            put_uint(m, 1, t.seconds as u64);
            put_uint(m, 2, i64::from(t.nanos) as u64);
        })
    };
    if let Some(t) = &meta.creation_timestamp() {
        put_time(out, 8, t);
    }
    if let Some(t) = &meta.deletion_timestamp() {
        put_time(out, 9, t);
    }
    if let Some(s) = meta.deletion_grace_period_seconds() {
        put_uint(out, 10, s as u64);
    }
    for (field, map) in [(11, &meta.labels()), (12, &meta.annotations())] {
        for (k, v) in map {
            put_message(out, field, |e| {
                put_str(e, 1, k);
                put_str(e, 2, v);
            });
        }
    }
    for o in meta.owner_references() {
        put_message(out, 13, |m| {
            put_str(m, 1, o.kind);
            put_str(m, 3, o.name);
            put_str(m, 4, o.uid);
            put_str(m, 5, o.api_version);
            if let Some(c) = o.controller {
                put_uint(m, 6, u64::from(c));
            }
            if let Some(b) = o.block_owner_deletion {
                put_uint(m, 7, u64::from(b));
            }
        });
    }
    for f in meta.finalizers() {
        put_str(out, 14, f);
    }
    for mf in meta.managed_fields() {
        put_bytes(out, 17, mf);
    }
}

/// Appends `meta` as an object message's field 1 (tag, length, message), as it leads every
/// object the API server writes.
pub(super) fn put_meta_field(meta: &ObjectMeta, out: &mut Vec<u8>) {
    put_message(out, 1, |m| encode_object_meta(meta, m));
}
