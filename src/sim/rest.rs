//! [`Rest`]: an object's top-level fields but `metadata`, as the pieces a write replaces
//! (`spec`, `status`), in either encoding. Every built-in kind numbers them alike in protobuf
//! (`metadata` 1, `spec` 2, `status` 3).

use bytes::Bytes;
use serde_json::{Map, Value};

use super::codec::json_rest;
use crate::object::{DecodeError, Encoding, Object, ObjectMetaFields, varint};

/// A top-level part a write can replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Spec,
    Status,
}

impl Part {
    fn field(self) -> u64 {
        match self {
            Part::Spec => 2,
            Part::Status => 3,
        }
    }

    fn member(self) -> &'static str {
        match self {
            Part::Spec => "spec",
            Part::Status => "status",
        }
    }
}

/// An object's fields but `metadata`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rest {
    /// Protobuf top-level fields in wire order: (field number, the field's bytes with its tag).
    Protobuf(Vec<(u64, Bytes)>),
    /// JSON members but `apiVersion`, `kind` and `metadata`.
    Json(Map<String, Value>),
}

/// Splits protobuf message bytes into top-level fields.
fn fields(b: &Bytes) -> Result<Vec<(u64, Bytes)>, DecodeError> {
    let bad = |offset: usize| DecodeError::Missing {
        what: "a well-formed top-level field",
        offset: offset as u64,
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let start = at;
        let (tag, n) = varint::read(&b[at..]).map_err(|_| bad(at))?;
        at += n;
        match tag & 7 {
            0 => at += varint::read(&b[at..]).map_err(|_| bad(at))?.1,
            1 => at += 8,
            2 => {
                let (len, n) = varint::read(&b[at..]).map_err(|_| bad(at))?;
                at = at
                    .checked_add(n)
                    .and_then(|a| a.checked_add(usize::try_from(len).ok()?))
                    .ok_or_else(|| bad(at))?;
            }
            5 => at += 4,
            _ => return Err(bad(start)),
        }
        if at > b.len() {
            return Err(bad(start));
        }
        out.push((tag >> 3, b.slice(start..at)));
    }
    Ok(out)
}

impl Rest {
    /// The fields of `obj` but `metadata`.
    ///
    /// # Errors
    /// When its bytes do not decode.
    pub(crate) fn of(obj: &Object) -> Result<Rest, DecodeError> {
        let raw = obj.raw()?;
        Ok(match obj.encoding() {
            Encoding::Protobuf => {
                Rest::Protobuf(fields(&raw)?.into_iter().filter(|f| f.0 != 1).collect())
            }
            Encoding::Json => {
                let mut doc: Map<String, Value> =
                    serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?;
                for k in ["apiVersion", "kind", "metadata"] {
                    doc.remove(k);
                }
                Rest::Json(doc)
            }
        })
    }

    /// Whether `part` is the same in both.
    pub(crate) fn same(&self, other: &Rest, part: Part) -> bool {
        match (self, other) {
            (Rest::Protobuf(a), Rest::Protobuf(b)) => {
                let get = |v: &[(u64, Bytes)]| -> Vec<Bytes> {
                    v.iter()
                        .filter(|f| f.0 == part.field())
                        .map(|f| f.1.clone())
                        .collect()
                };
                get(a) == get(b)
            }
            (Rest::Json(a), Rest::Json(b)) => a.get(part.member()) == b.get(part.member()),
            _ => false,
        }
    }

    /// Replaces `part` by `from`'s (removed when `from` has none).
    pub(crate) fn take(&mut self, from: &Rest, part: Part) {
        match (self, from) {
            (Rest::Protobuf(a), Rest::Protobuf(b)) => {
                a.retain(|f| f.0 != part.field());
                a.extend(b.iter().filter(|f| f.0 == part.field()).cloned());
                a.sort_by_key(|f| f.0);
            }
            (Rest::Json(a), Rest::Json(b)) => match b.get(part.member()) {
                Some(v) => {
                    a.insert(part.member().to_owned(), v.clone());
                }
                None => {
                    a.remove(part.member());
                }
            },
            _ => {}
        }
    }

    /// Sets `status` to a status with only `phase` (`None`: an empty status), as a new
    /// object's status is reset on create.
    pub(crate) fn reset_status(&mut self, phase: Option<&str>) {
        match self {
            Rest::Protobuf(a) => {
                a.retain(|f| f.0 != Part::Status.field());
                let mut inner = Vec::new();
                if let Some(p) = phase {
                    inner.push(0x0a);
                    varint::put(&mut inner, p.len() as u64);
                    inner.extend_from_slice(p.as_bytes());
                }
                let mut field = vec![0x1a];
                varint::put(&mut field, inner.len() as u64);
                field.extend_from_slice(&inner);
                a.push((Part::Status.field(), Bytes::from(field)));
                a.sort_by_key(|f| f.0);
            }
            Rest::Json(m) => {
                let mut s = Map::new();
                if let Some(p) = phase {
                    s.insert("phase".into(), p.into());
                }
                m.insert("status".into(), Value::Object(s));
            }
        }
    }

    /// Sets `spec.finalizers` when the object has none (JSON only: the built-in namespaces).
    pub(crate) fn default_finalizers(&mut self, finalizers: &[&str]) {
        if let Rest::Json(m) = self {
            let spec = m.entry("spec").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(spec) = spec
                && !spec.contains_key("finalizers")
            {
                spec.insert("finalizers".into(), finalizers.iter().copied().collect());
            }
        }
    }

    /// The bytes the simulator's codec writes after the metadata.
    ///
    /// # Errors
    /// When the JSON members do not serialize (they always do).
    pub(crate) fn encode(&self) -> Result<Bytes, DecodeError> {
        match self {
            Rest::Protobuf(a) => {
                let mut out = Vec::with_capacity(a.iter().map(|f| f.1.len()).sum());
                for f in a {
                    out.extend_from_slice(&f.1);
                }
                Ok(Bytes::from(out))
            }
            Rest::Json(m) => json_rest(m.clone()),
        }
    }
}

/// `obj`'s metadata and the rest of its fields.
///
/// # Errors
/// When its bytes do not decode.
pub(crate) fn split(obj: &Object) -> Result<(ObjectMetaFields, Rest), DecodeError> {
    Ok((obj.meta().to_fields(), Rest::of(obj)?))
}
