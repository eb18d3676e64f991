//! [`Object`]: decoded metadata + the object's own bytes (the value type of this module).

use std::sync::Arc;

use bytes::Bytes;

use super::meta::{GroupVersionKind, ObjectKey, ObjectMeta};
use super::{DecodeError, json, protobuf};

/// The 4-byte prefix of every protobuf-encoded Kubernetes object: `k8s\0`.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// How an [`Object`]'s raw bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The object's bare protobuf message (e.g. a serialized `core.v1.Pod`), without envelope.
    Protobuf,
    /// A JSON document (custom resources are JSON-only on real servers).
    Json,
}

/// One Kubernetes object: decoded [`ObjectMeta`], the group/version/kind from its envelope (or
/// its list), and its raw bytes as a slice of the buffer it was decoded from (no copy).
///
/// Objects are immutable once built; the store and the handlers share them as `Arc<Object>`.
/// The typed value is decoded on demand with [`Object::decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    meta: ObjectMeta,
    /// `meta.key()`, built once: every stage (DeltaFIFO, store, listeners) asks for it.
    key: ObjectKey,
    gvk: Arc<GroupVersionKind>,
    raw: Bytes,
    encoding: Encoding,
}

impl Object {
    /// Assembles an object from parts already decoded. `raw` must be the object in `encoding`
    /// (bare protobuf message or JSON document) and `meta` must be what it holds; nothing is
    /// checked. Decoders and the simulator use this; most callers want [`decode`].
    pub fn from_parts(
        gvk: Arc<GroupVersionKind>,
        meta: ObjectMeta,
        raw: Bytes,
        encoding: Encoding,
    ) -> Self {
        Object {
            key: meta.key(),
            meta,
            gvk,
            raw,
            encoding,
        }
    }

    /// Decoded metadata.
    pub fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// Group, version and kind.
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// The shared GVK allocation (cheap to clone into other objects of the same kind).
    pub fn gvk_arc(&self) -> &Arc<GroupVersionKind> {
        &self.gvk
    }

    /// The object's own bytes: the bare protobuf message or the JSON document.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// Encoding of [`Object::raw`].
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Cache key `namespace/name` (or `name`), built once when the object is (a clone is one
    /// reference-count increment).
    pub fn key(&self) -> ObjectKey {
        self.key.clone()
    }

    /// The cache key by reference (see [`Object::key`]).
    pub fn key_ref(&self) -> &ObjectKey {
        &self.key
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        &self.meta.namespace
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.meta.uid
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        &self.meta.resource_version
    }

    /// Decodes the typed object, e.g. `obj.decode::<k8s_pb::api::core::v1::Pod>()`.
    ///
    /// # Errors
    /// [`DecodeError::NotProtobuf`] for JSON objects; [`DecodeError::Typed`] when prost
    /// rejects the bytes or they are not a `T`.
    pub fn decode<T: prost::Message + Default>(&self) -> Result<T, DecodeError> {
        match self.encoding {
            Encoding::Protobuf => Ok(T::decode(self.raw.clone())?),
            Encoding::Json => Err(DecodeError::NotProtobuf {
                encoding: self.encoding,
            }),
        }
    }

    /// Deserializes the object into a serde type: a k8s-openapi kind
    /// (`k8s_openapi::api::core::v1::Pod`), a `#[derive(CustomResource)]` struct, or any
    /// `DeserializeOwned` of the object's shape. A full parse of the cached bytes on every call
    /// (typed listers cache the result per object version).
    ///
    /// # Errors
    /// [`DecodeError::NotJson`] for protobuf objects; [`DecodeError::Json`] when the document
    /// is not a `T`.
    ///
    /// # Examples
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/k8s-testdata/HEAD/core.v1.Pod.json");
    /// let obj = informer::object::decode(std::fs::read(path).unwrap().into()).unwrap();
    /// let pod: Pod = obj.deserialize().unwrap();
    /// assert_eq!(pod.metadata.name.as_deref(), Some(obj.name()));
    /// ```
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, DecodeError> {
        match self.encoding {
            Encoding::Json => {
                serde_json::from_slice(&self.raw).map_err(|e| DecodeError::json(&e, 0))
            }
            Encoding::Protobuf => Err(DecodeError::NotJson {
                encoding: self.encoding,
            }),
        }
    }

    /// Parses a JSON object into a `serde_json::Value` (for custom resources).
    ///
    /// # Errors
    /// [`DecodeError::Json`]; protobuf objects return [`DecodeError::UnknownEncoding`].
    pub fn to_json_value(&self) -> Result<serde_json::Value, DecodeError> {
        match self.encoding {
            Encoding::Json => {
                serde_json::from_slice(&self.raw).map_err(|e| DecodeError::json(&e, 0))
            }
            Encoding::Protobuf => Err(DecodeError::UnknownEncoding {
                start: self.raw.iter().take(4).copied().collect(),
            }),
        }
    }

    /// The same object with new metadata: the metadata is re-encoded and every other field's
    /// bytes are kept as they are (protobuf: other top-level fields copied verbatim; JSON: the
    /// `metadata` member replaced). The simulator stamps real fixtures this way.
    ///
    /// The new object's metadata equals `meta` but keeps no reference to the buffers `meta`'s
    /// strings came from (it is read back from the new bytes, or copied where the encoding
    /// would not give back exactly `meta`), so dropping a big field with this (e.g.
    /// [`Object::without_managed_fields`]) really releases the old buffer.
    ///
    /// # Errors
    /// When the current raw bytes do not decode (they always do for decoded objects).
    pub fn with_meta(&self, meta: ObjectMeta) -> Result<Object, DecodeError> {
        let (raw, back) = match self.encoding {
            Encoding::Protobuf => {
                let raw = protobuf::replace_meta(&self.raw, &meta)?;
                let back = protobuf::decode_object_meta(&raw);
                (raw, back)
            }
            Encoding::Json => {
                let raw = json::replace_meta(&self.raw, &meta)?;
                let back = json::decode_object(&raw).map(|o| o.meta);
                (raw, back)
            }
        };
        let meta = match back {
            Ok(back) if back == meta => back,
            _ => meta.detached(),
        };
        Ok(Object::from_parts(
            self.gvk.clone(),
            meta,
            raw,
            self.encoding,
        ))
    }

    /// The same object without `metadata.managedFields` (the usual informer transform: it is
    /// often half of an object's size and controllers never read it).
    ///
    /// # Errors
    /// As [`Object::with_meta`].
    pub fn without_managed_fields(&self) -> Result<Object, DecodeError> {
        if self.meta.managed_fields.is_empty() {
            return Ok(self.clone());
        }
        let mut meta = self.meta.clone();
        meta.managed_fields.clear();
        self.with_meta(meta)
    }

    /// The object encoded for the wire: protobuf objects as magic + `runtime.Unknown`
    /// envelope, JSON objects as their document.
    pub fn to_wire(&self) -> Bytes {
        match self.encoding {
            Encoding::Protobuf => protobuf::encode_envelope(&self.gvk, &self.raw),
            Encoding::Json => self.raw.clone(),
        }
    }
}

/// Decodes one object of either encoding: `k8s\0` + envelope, or a JSON document (leading
/// whitespace allowed).
///
/// # Errors
/// [`DecodeError::UnknownEncoding`] when the input is neither; otherwise the format's error.
pub fn decode(input: Bytes) -> Result<Object, DecodeError> {
    if input.starts_with(&MAGIC) {
        protobuf::decode_object(&input)
    } else if input.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        json::decode_object(&input)
    } else if input.len() < 4 && MAGIC.starts_with(&input) {
        Err(DecodeError::Truncated {
            offset: input.len() as u64,
            context: "magic",
        })
    } else {
        Err(DecodeError::UnknownEncoding {
            start: input.iter().take(4).copied().collect(),
        })
    }
}
