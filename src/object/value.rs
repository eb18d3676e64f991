//! [`Object`]: decoded metadata + the object's own bytes (the value type of this module). Its
//! methods that need a codec are in `codec.rs` (the codecs build `Object`s).

use std::sync::Arc;

use bytes::Bytes;

use super::DecodeError;
use super::body::Body;
use super::dictionary::Dictionary;
use super::encoding::Encoding;
use super::key::ObjectKey;
use super::meta::{GroupVersionKind, ObjectMeta};

/// One Kubernetes object: decoded [`ObjectMeta`], the group/version/kind from its envelope (or
/// its list), and its raw bytes as a slice of the buffer it was decoded from (no copy), or, in
/// a compressed cache ([`Compactor`](super::Compactor)), as one zstd frame.
///
/// Objects are immutable once built; the store and the handlers share them as `Arc<Object>`.
/// The typed value is decoded on demand with [`Object::decode`] (decompressing
/// first if need be).
// `repr(C)` with the key first: in an `Arc<Object>` the key then shares the first cache line
// with the reference counts, so a store lookup that compares the key and clones the `Arc`
// touches one line of the object, not two (the default layout put the key 376 bytes in).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Object {
    /// `meta.key()`, built once: every stage (DeltaFIFO, store, listeners) asks for it.
    key: ObjectKey,
    gvk: Arc<GroupVersionKind>,
    body: Body,
    meta: ObjectMeta,
    encoding: Encoding,
}

/// Objects compare by content: key, kind, encoding, metadata and bytes (a compressed object
/// equals the received one it was made from).
impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.key == other.key
            && self.gvk == other.gvk
            && self.encoding == other.encoding
            && self.meta == other.meta
            && self.body.same_bytes(&other.body, &self.meta)
    }
}

impl Eq for Object {}

impl Object {
    /// Assembles an object from parts already decoded. `raw` must be the object in `encoding`
    /// (bare protobuf message or JSON document) and `meta` must be what it holds; nothing is
    /// checked. Decoders and the simulator use this; most callers want [`decode`](super::decode).
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
            body: Body::Plain(raw),
            encoding,
        }
    }

    pub(super) fn from_body(
        key: ObjectKey,
        gvk: Arc<GroupVersionKind>,
        meta: ObjectMeta,
        body: Body,
        encoding: Encoding,
    ) -> Self {
        Object {
            key,
            gvk,
            body,
            meta,
            encoding,
        }
    }

    /// Decoded metadata.
    pub fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// The decoded metadata, taken out (no clone).
    pub(crate) fn into_meta(self) -> ObjectMeta {
        self.meta
    }

    /// Group, version and kind.
    pub fn gvk(&self) -> &GroupVersionKind {
        &self.gvk
    }

    /// The shared GVK allocation (cheap to clone into other objects of the same kind).
    pub fn gvk_arc(&self) -> &Arc<GroupVersionKind> {
        &self.gvk
    }

    /// The object's own bytes: the bare protobuf message or the JSON document. A reference-
    /// count clone of the received bytes, or, for a compressed object, a fresh buffer
    /// decompressed into (see [`Object::with_raw`] to read them without one).
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when a compressed object does not decompress (the cached
    /// object is left as it is).
    pub fn raw(&self) -> Result<Bytes, DecodeError> {
        self.body.bytes(&self.meta)
    }

    /// Runs `f` on the object's own bytes; a compressed object is decompressed into a buffer
    /// the calling thread reuses (no allocation in the steady state).
    ///
    /// # Errors
    /// As [`Object::raw`].
    pub fn with_raw<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R, DecodeError> {
        self.body.with(&self.meta, f)
    }

    /// Length of the object's own bytes (decompressed), bytes.
    pub fn raw_len(&self) -> usize {
        self.body.len()
    }

    /// What the object's bytes take in memory: [`Object::raw_len`], or the compressed frame's
    /// length (metadata, held decoded, not counted).
    pub fn cached_len(&self) -> usize {
        self.body.cached_len()
    }

    /// `true` when the object's bytes are held compressed.
    pub fn is_compressed(&self) -> bool {
        self.body.plain().is_none()
    }

    /// The dictionary a compressed object was made with.
    pub fn compressed_with(&self) -> Option<&Arc<Dictionary>> {
        match &self.body {
            Body::Plain(_) => None,
            Body::Zstd { dict, .. } => Some(dict),
        }
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
        self.meta.name()
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.meta.namespace()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.meta.uid()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        self.meta.resource_version()
    }

    /// Decodes the typed object, e.g. `obj.decode::<k8s_pb::api::core::v1::Pod>()`.
    ///
    /// # Errors
    /// [`DecodeError::NotProtobuf`] for JSON objects; [`DecodeError::Typed`] when prost
    /// rejects the bytes or they are not a `T`.
    pub fn decode<T: prost::Message + Default>(&self) -> Result<T, DecodeError> {
        match (self.encoding, &self.body) {
            (Encoding::Protobuf, Body::Plain(raw)) => Ok(T::decode(raw.clone())?),
            (Encoding::Protobuf, _) => Ok(self.body.with(&self.meta, |raw| T::decode(raw))??),
            (Encoding::Json, _) => Err(DecodeError::NotProtobuf {
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
            Encoding::Json => self.body.with(&self.meta, |raw| {
                serde_json::from_slice(raw).map_err(|e| DecodeError::json(&e, 0))
            })?,
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
            Encoding::Json => self.body.with(&self.meta, |raw| {
                serde_json::from_slice(raw).map_err(|e| DecodeError::json(&e, 0))
            })?,
            Encoding::Protobuf => Err(DecodeError::UnknownEncoding {
                start: self
                    .body
                    .with(&self.meta, |raw| raw.iter().take(4).copied().collect())?,
            }),
        }
    }
}
