//! List responses (`PodList` and every other `XxxList`): list metadata plus items, in both
//! encodings. Upstream: `apimachinery/pkg/apis/meta/v1/types.go` (`ListMeta`), the API server's
//! list handler (`apiserver/pkg/endpoints/handlers/get.go`).

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::DecodeError;
use super::encoding::{Encoding, MAGIC};
use super::json::{self, offset_in};
use super::meta::GroupVersionKind;
use super::protobuf::{decode_bare, decode_envelope, encode_envelope};
use super::protowire::{Reader, put_bytes, put_message, put_str, put_uint};
use super::value::Object;

/// One decoded list page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectList {
    /// The list's own kind, e.g. `v1 PodList`; items carry the item kind (`Pod`).
    pub list_gvk: GroupVersionKind,
    /// `metadata.resourceVersion`: the version the list reflects.
    pub resource_version: String,
    /// `metadata.continue`: token for the next page, empty on the last page.
    pub continue_token: String,
    /// `metadata.remainingItemCount`, when the server reports it.
    pub remaining_item_count: Option<i64>,
    /// The items, in server order. Their raw bytes are slices of the input.
    pub items: Vec<Object>,
}

/// Decodes a list in either encoding (`k8s\0` envelope around `{1 ListMeta, 2 items}`, or a
/// JSON document with `metadata` and `items`). Items get the list's kind without `List`.
///
/// # Errors
/// Any [`DecodeError`]; offsets are counted from the start of `input`.
pub fn decode_list(input: Bytes) -> Result<ObjectList, DecodeError> {
    if input.starts_with(&MAGIC) {
        decode_pb_list(&input)
    } else {
        decode_json_list(&input)
    }
}

fn decode_pb_list(input: &Bytes) -> Result<ObjectList, DecodeError> {
    let env = decode_envelope(input)?;
    let base = offset_in(input, &env.raw);
    let item_gvk = Arc::new(env.gvk.item_of_list());
    let mut list = ObjectList {
        list_gvk: env.gvk,
        resource_version: String::new(),
        continue_token: String::new(),
        remaining_item_count: None,
        items: Vec::new(),
    };
    let raw = &env.raw;
    let mut r = Reader::new(raw, 0, raw.len(), "List");
    let res: Result<(), DecodeError> = (|| {
        while let Some(f) = r.next_field()? {
            match f.number {
                1 => read_list_meta(r.message(&f, "ListMeta")?, &mut list)?,
                2 => {
                    let item = r.bytes(&f)?;
                    let off = offset_in(raw, &item);
                    list.items
                        .push(decode_bare(item_gvk.clone(), item).map_err(|e| e.shifted(off))?);
                }
                _ => r.skip(&f)?,
            }
        }
        Ok(())
    })();
    res.map_err(|e| e.shifted(base))?;
    Ok(list)
}

/// Reads a `ListMeta` message into `list`'s resourceVersion, continue token and remaining
/// count (each field seen overwrites the one before, as protobuf merges).
pub(super) fn read_list_meta(mut m: Reader<'_>, list: &mut ObjectList) -> Result<(), DecodeError> {
    while let Some(g) = m.next_field()? {
        match g.number {
            2 => list.resource_version = m.string(&g)?,
            3 => list.continue_token = m.string(&g)?,
            4 => list.remaining_item_count = Some(m.int64(&g)?),
            _ => m.skip(&g)?,
        }
    }
    Ok(())
}

fn decode_json_list(input: &Bytes) -> Result<ObjectList, DecodeError> {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct ListMeta {
        resource_version: Option<String>,
        #[serde(rename = "continue")]
        continue_token: Option<String>,
        remaining_item_count: Option<i64>,
    }
    #[derive(Deserialize)]
    struct List<'a> {
        #[serde(rename = "apiVersion", default)]
        api_version: String,
        #[serde(default)]
        kind: String,
        #[serde(default, deserialize_with = "json::object")]
        metadata: Option<ListMeta>,
        #[serde(default, borrow)]
        items: Option<Vec<&'a RawValue>>,
    }
    let json::ObjectOnly(l): json::ObjectOnly<List<'_>> =
        serde_json::from_slice(input).map_err(|e| DecodeError::json(&e, 0))?;
    let list_gvk = GroupVersionKind::from_api_version(&l.api_version, &l.kind);
    let item_gvk = Arc::new(list_gvk.item_of_list());
    let meta = l.metadata.unwrap_or_default();
    let mut items = Vec::new();
    for item in l.items.unwrap_or_default() {
        let raw = input.slice_ref(item.get().as_bytes());
        let off = offset_in(input, &raw);
        items.extend(decode_json_item(raw, off, Some(&item_gvk))?);
    }
    Ok(ObjectList {
        list_gvk,
        resource_version: meta.resource_version.unwrap_or_default(),
        continue_token: meta.continue_token.unwrap_or_default(),
        remaining_item_count: meta.remaining_item_count,
        items,
    })
}

/// One item of a JSON list: `raw` (an object's text, at body offset `off`). It keeps its own
/// `apiVersion` and `kind` when it names both, else takes `item_gvk`, the list's kind without
/// `List` (API servers omit them on the items of built-in lists); `Ok(None)` when it names no
/// kind and `item_gvk` is not known yet.
///
/// # Errors
/// When `raw` is not a JSON object or its metadata is malformed.
pub(super) fn decode_json_item(
    raw: Bytes,
    off: u64,
    item_gvk: Option<&Arc<GroupVersionKind>>,
) -> Result<Option<Object>, DecodeError> {
    let json::ObjectOnly(head): json::ObjectOnly<json::Head<'_>> =
        serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, off))?;
    let gvk = match (&head.api_version, &head.kind, item_gvk) {
        (Some(a), Some(k), _) if !k.is_empty() => {
            Arc::new(GroupVersionKind::from_api_version(a, k))
        }
        (_, _, Some(gvk)) => gvk.clone(),
        (_, _, None) => return Ok(None),
    };
    let metadata = head.metadata;
    json::decode_with_head(raw.clone(), gvk, metadata, off).map(Some)
}

/// Encodes a protobuf list: envelope of kind `list_gvk` around `{1 ListMeta, 2 items...}`.
/// Items must be protobuf objects (their bare messages are written as they are).
///
/// # Errors
/// When a compressed item does not decompress ([`Object::raw`]).
pub fn encode_list_protobuf(
    list_gvk: &GroupVersionKind,
    resource_version: &str,
    continue_token: &str,
    remaining_item_count: Option<i64>,
    items: &[&Object],
) -> Result<Bytes, DecodeError> {
    let size: usize = items.iter().map(|o| o.raw_len() + 6).sum();
    let mut raw = Vec::with_capacity(size + 64);
    put_message(&mut raw, 1, |m| {
        put_str(m, 1, "");
        put_str(m, 2, resource_version);
        put_str(m, 3, continue_token);
        if let Some(n) = remaining_item_count {
            put_uint(m, 4, n as u64);
        }
    });
    for o in items {
        debug_assert_eq!(o.encoding(), Encoding::Protobuf);
        o.with_raw(|b| put_bytes(&mut raw, 2, b))?;
    }
    Ok(encode_envelope(list_gvk, &raw))
}

/// Encodes a JSON list document. JSON items are written as they are; protobuf items with
/// `apiVersion`, `kind` and `metadata` only.
///
/// # Errors
/// When an item's metadata cannot be rendered (never for decoded objects).
pub fn encode_list_json(
    list_gvk: &GroupVersionKind,
    resource_version: &str,
    continue_token: &str,
    remaining_item_count: Option<i64>,
    items: &[&Object],
) -> Result<Bytes, DecodeError> {
    let mut out = Vec::with_capacity(items.iter().map(|o| o.raw_len() + 1).sum::<usize>() + 128);
    let mut meta = serde_json::json!({ "resourceVersion": resource_version });
    if !continue_token.is_empty() {
        meta["continue"] = continue_token.into();
    }
    if let Some(n) = remaining_item_count {
        meta["remainingItemCount"] = n.into();
    }
    out.extend_from_slice(
        format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
            serde_json::Value::from(list_gvk.kind.as_str()),
            serde_json::Value::from(list_gvk.api_version()),
            meta
        )
        .as_bytes(),
    );
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&json::object_json(o)?);
    }
    out.extend_from_slice(b"]}");
    Ok(Bytes::from(out))
}
