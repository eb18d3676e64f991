//! What picks the codec (`json` or `protobuf`) by encoding: [`decode`] of either encoding and
//! the [`Object`] methods that re-encode. Apart from [`Object`] itself because the codecs build
//! objects: value < codecs < this file, no cycle.

use bytes::Bytes;

use super::encoding::{Encoding, MAGIC};
use super::value::Object;
use super::{DecodeError, ObjectMeta, json, protobuf};

impl Object {
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
        let (raw, back) = match self.encoding() {
            Encoding::Protobuf => {
                let raw = protobuf::replace_meta(&self.raw()?, &meta)?;
                let back = protobuf::decode_object_meta(&raw);
                (raw, back)
            }
            Encoding::Json => {
                let raw = json::replace_meta(&self.raw()?, &meta)?;
                let back = json::decode_object(&raw).map(Object::into_meta);
                (raw, back)
            }
        };
        let meta = match back {
            Ok(back) if back == meta => back,
            _ => meta.detached(),
        };
        Ok(Object::from_parts(
            self.gvk_arc().clone(),
            meta,
            raw,
            self.encoding(),
        ))
    }

    /// The same object without `metadata.managedFields` (the usual informer transform: it is
    /// often half of an object's size and controllers never read it).
    ///
    /// # Errors
    /// As [`Object::with_meta`].
    pub fn without_managed_fields(&self) -> Result<Object, DecodeError> {
        if self.meta().managed_fields().is_empty() {
            return Ok(self.clone());
        }
        let mut meta = self.meta().to_fields();
        meta.managed_fields.clear();
        self.with_meta(meta.into())
    }

    /// The object encoded for the wire: protobuf objects as magic + `runtime.Unknown`
    /// envelope, JSON objects as their document.
    ///
    /// # Errors
    /// As [`Object::raw`] (only compressed objects can fail).
    pub fn to_wire(&self) -> Result<Bytes, DecodeError> {
        match self.encoding() {
            Encoding::Protobuf => self.with_raw(|raw| protobuf::encode_envelope(self.gvk(), raw)),
            Encoding::Json => self.raw(),
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
