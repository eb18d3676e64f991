//! An object's metadata alone, as `meta.k8s.io/v1` `PartialObjectMetadata`: what the API
//! server answers a metadata-only list or watch (`Accept: ...;as=PartialObjectMetadata;
//! g=meta.k8s.io;v=v1`; apimachinery `pkg/apis/meta/v1/types.go`), and what metadata-only
//! informers cache (controller-runtime's `PartialObjectMetadata` informers).

use std::sync::Arc;

use bytes::Bytes;

use super::encoding::Encoding;
use super::meta::{GroupVersionKind, ObjectMeta};
use super::value::Object;
use super::{DecodeError, json, protobuf};

/// The group of `PartialObjectMetadata` and its list.
pub const META_GROUP: &str = "meta.k8s.io";
/// The kind of one metadata-only object.
pub const PARTIAL_OBJECT_METADATA: &str = "PartialObjectMetadata";
/// The kind of a metadata-only list.
pub const PARTIAL_OBJECT_METADATA_LIST: &str = "PartialObjectMetadataList";

/// `meta.k8s.io/v1` `kind`.
pub fn partial_gvk(kind: &str) -> GroupVersionKind {
    GroupVersionKind::new(META_GROUP, "v1", kind)
}

impl Object {
    /// This object's metadata alone, as a `meta.k8s.io/v1` `PartialObjectMetadata` in
    /// `encoding` (protobuf: a message holding only field 1, `metadata`; JSON: `kind`,
    /// `apiVersion` and `metadata`). Works from either encoding: the metadata is already
    /// decoded. Every metadata field is kept, except `managedFields` when `encoding` is not
    /// the object's own (their protobuf and JSON forms differ and are kept undecoded).
    ///
    /// # Errors
    /// Only when the metadata does not encode (never for decoded objects).
    ///
    /// # Examples
    /// ```
    /// use informer::object::{Encoding, decode};
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/k8s-testdata/HEAD/core.v1.Pod.pb");
    /// let pod = decode(std::fs::read(path).unwrap().into()).unwrap();
    /// let meta = pod.to_partial_object_metadata(Encoding::Protobuf).unwrap();
    /// assert!(meta.is_partial_object_metadata());
    /// assert_eq!(meta.meta(), pod.meta());
    /// assert!(meta.raw_len() < pod.raw_len());
    /// ```
    pub fn to_partial_object_metadata(&self, encoding: Encoding) -> Result<Object, DecodeError> {
        let gvk = Arc::new(partial_gvk(PARTIAL_OBJECT_METADATA));
        let shell = match encoding {
            Encoding::Protobuf => Bytes::new(),
            Encoding::Json => Bytes::from(format!(
                "{{\"kind\":\"{PARTIAL_OBJECT_METADATA}\",\"apiVersion\":\"{META_GROUP}/v1\"}}"
            )),
        };
        let mut meta = self.meta().to_fields();
        if encoding != self.encoding() {
            meta.managed_fields.clear();
        }
        let meta = ObjectMeta::from(meta);
        let raw = match encoding {
            Encoding::Protobuf => protobuf::replace_meta(&shell, &meta)?,
            Encoding::Json => json::replace_meta(&shell, &meta)?,
        };
        Ok(Object::from_parts(gvk, meta, raw, encoding))
    }

    /// `true` for a `meta.k8s.io` `PartialObjectMetadata` (a metadata-only answer).
    pub fn is_partial_object_metadata(&self) -> bool {
        self.gvk().group == META_GROUP && self.gvk().kind == PARTIAL_OBJECT_METADATA
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::decode;

    #[test]
    fn metadata_alone_in_both_encodings_decodes_back_to_the_same_metadata() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
        for path in [
            "k8s-testdata/HEAD/core.v1.Pod.pb",
            "k8s-testdata/HEAD/core.v1.Pod.json",
        ] {
            let full = decode(std::fs::read(dir.join(path)).unwrap().into()).unwrap();
            for enc in [Encoding::Protobuf, Encoding::Json] {
                let p = full.to_partial_object_metadata(enc).unwrap();
                assert!(p.is_partial_object_metadata());
                let mut expected = full.meta().to_fields();
                if enc != full.encoding() {
                    expected.managed_fields.clear();
                } else {
                    assert!(!expected.managed_fields.is_empty(), "{path}: kept");
                }
                assert_eq!(p.meta(), &expected, "{path} {enc:?}");
                let back = decode(p.to_wire().unwrap()).unwrap();
                // JSON managed fields are kept as raw JSON: compare them as values.
                let values = |m: &crate::object::ObjectMeta| -> Vec<serde_json::Value> {
                    m.managed_fields()
                        .iter()
                        .map(|f| {
                            serde_json::from_slice(f)
                                .unwrap_or_else(|_| serde_json::Value::from(f.to_vec()))
                        })
                        .collect()
                };
                assert_eq!(
                    values(back.meta()),
                    values(&ObjectMeta::from(expected.clone())),
                    "{path} {enc:?}"
                );
                let (mut b, mut e) = (back.meta().to_fields(), expected.clone());
                b.managed_fields.clear();
                e.managed_fields.clear();
                assert_eq!(b, e, "{path} {enc:?} round trip");
                assert_eq!(back.gvk().api_version(), "meta.k8s.io/v1");
                assert_eq!(back.gvk().kind, "PartialObjectMetadata");
                assert!(back.raw_len() < full.raw_len(), "{path} {enc:?}: smaller");
            }
        }
    }
}
