//! [`Encoding`]: the two forms an object's bytes come in, and the protobuf [`MAGIC`] that tells
//! them apart on the wire.

/// The 4-byte prefix of every protobuf-encoded Kubernetes object: `k8s\0`.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// How an [`Object`](super::Object)'s raw bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The object's bare protobuf message (e.g. a serialized `core.v1.Pod`), without envelope.
    Protobuf,
    /// A JSON document (custom resources are JSON-only on real servers).
    Json,
}
