//! Typed decode errors: each says what was wrong and where (byte offset, field number).

/// Why some bytes could not be decoded as a Kubernetes object, list or watch event.
///
/// Offsets are counted from the start of the buffer handed to the decoder (for watch streams:
/// from the start of the stream). No variant is produced by a panic path: every decoder in
/// [`crate::object`] returns one of these for any input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended in the middle of something.
    #[error("input truncated at byte {offset}: {context}")]
    Truncated {
        /// Where the input ended.
        offset: u64,
        /// What was being read.
        context: &'static str,
    },
    /// The first four bytes are not `k8s\0` (`6b 38 73 00`).
    #[error("bad magic: expected 6b 38 73 00 (\"k8s\\0\"), found {found:02x?}")]
    BadMagic {
        /// The bytes found (up to four).
        found: Vec<u8>,
    },
    /// A varint longer than 10 bytes or overflowing 64 bits.
    #[error("malformed varint at byte {offset}")]
    BadVarint {
        /// Where the varint starts.
        offset: u64,
    },
    /// A tag with field number 0 or an unsupported wire type (groups, 6, 7).
    #[error("invalid tag at byte {offset}: field {field}, wire type {wire_type}")]
    BadTag {
        /// Where the tag starts.
        offset: u64,
        /// Field number read from the tag.
        field: u32,
        /// Wire type read from the tag.
        wire_type: u8,
    },
    /// A known field arrived with the wrong wire type.
    #[error(
        "field {field} of {message} at byte {offset}: wire type {wire_type}, expected {expected}"
    )]
    WrongWireType {
        /// Message being decoded, e.g. `ObjectMeta`.
        message: &'static str,
        /// Field number.
        field: u32,
        /// Where the field's tag starts.
        offset: u64,
        /// Wire type found.
        wire_type: u8,
        /// Wire type expected.
        expected: u8,
    },
    /// A length prefix points past the end of its enclosing message.
    #[error(
        "field {field} of {message} at byte {offset}: length {len} exceeds the {available} bytes left"
    )]
    LengthOverrun {
        /// Message being decoded.
        message: &'static str,
        /// Field number.
        field: u32,
        /// Where the length prefix starts.
        offset: u64,
        /// The declared length.
        len: u64,
        /// Bytes actually left in the enclosing message.
        available: u64,
    },
    /// A string field holds bytes that are not UTF-8.
    #[error("field {field} of {message} at byte {offset}: invalid UTF-8")]
    InvalidUtf8 {
        /// Message being decoded.
        message: &'static str,
        /// Field number.
        field: u32,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// A watch frame or JSON line longer than the configured limit; nothing was allocated for it.
    #[error("frame at byte {offset} declares {len} bytes, over the limit of {limit}")]
    FrameTooLarge {
        /// Stream offset of the frame's length prefix (or line start).
        offset: u64,
        /// Declared (or accumulated) length.
        len: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// Malformed JSON, or JSON of the wrong shape (including invalid UTF-8).
    #[error("JSON at byte {offset} (line {line}, column {column}): {message}")]
    Json {
        /// Offset of the JSON document in the input (stream offset for watch lines).
        offset: u64,
        /// 1-based line within the document, as reported by serde_json.
        line: usize,
        /// 1-based column within the line.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// A watch event `type` other than ADDED, MODIFIED, DELETED, BOOKMARK, ERROR.
    #[error("unknown watch event type {event_type:?} at byte {offset}")]
    UnknownEventType {
        /// The type found.
        event_type: String,
        /// Stream offset of the event.
        offset: u64,
    },
    /// A required part is missing, e.g. a watch event without an object.
    #[error("missing {what} at byte {offset}")]
    Missing {
        /// What is missing.
        what: &'static str,
        /// Offset of the enclosing message.
        offset: u64,
    },
    /// A valid but unusual shape a decoder does not take, e.g. a list envelope whose
    /// `typeMeta` follows its items (no API server writes one): [`ListStream`] rejects it
    /// where [`decode_list`] would read it whole.
    ///
    /// [`ListStream`]: super::ListStream
    /// [`decode_list`]: super::decode_list
    #[error("unsupported at byte {offset}: {what}")]
    Unsupported {
        /// What was found.
        what: &'static str,
        /// Where it starts.
        offset: u64,
    },
    /// Bytes that are neither a protobuf envelope (`k8s\0`) nor a JSON object (`{`).
    #[error("unrecognised encoding: starts with {start:02x?}")]
    UnknownEncoding {
        /// Up to the first four bytes.
        start: Vec<u8>,
    },
    /// Typed decode was asked of an object that is not protobuf (e.g. a custom resource in JSON).
    #[error("typed protobuf decode of a {encoding:?} object")]
    NotProtobuf {
        /// The object's encoding.
        encoding: super::encoding::Encoding,
    },
    /// A serde (k8s-openapi, `CustomResource`) read of an object the server sent as protobuf:
    /// its schema-less bytes have no serde form. Read it as a k8s-pb type, or have the
    /// informer ask for JSON ([`ApiResource::of`](crate::client::ApiResource::of); the
    /// informers made from a `kube::Api` do).
    #[error("serde decode of a {encoding:?} object (ask the server for JSON for serde types)")]
    NotJson {
        /// The object's encoding.
        encoding: super::encoding::Encoding,
    },
    /// A compressed cached object could not be decompressed (the frame names another
    /// dictionary, zstd failed, or the result has the wrong length), or a dictionary could not
    /// be trained or loaded. Only this read fails: the cached object stays as it is.
    #[error("compressed object (dictionary {dictionary}): {reason}")]
    Compression {
        /// The [`Dictionary::id`](super::Dictionary::id) involved (0 when none was made yet).
        dictionary: u32,
        /// What went wrong.
        reason: String,
    },
    /// prost rejected the bytes during a typed decode.
    #[error("typed decode: {0}")]
    Typed(#[from] prost::DecodeError),
}

impl DecodeError {
    /// The same error with every offset moved by `base` (used when a message is decoded from a
    /// slice that starts `base` bytes into the outer input).
    /// This error with its offset lowered to `end` when it lies past it (a streaming decoder
    /// names the announced end of a message the body has not reached).
    pub(crate) fn capped(mut self, end: u64) -> Self {
        match &mut self {
            DecodeError::Truncated { offset, .. } if *offset > end => *offset = end,
            _ => {}
        }
        self
    }

    pub(crate) fn shifted(mut self, base: u64) -> Self {
        match &mut self {
            DecodeError::Truncated { offset, .. }
            | DecodeError::BadVarint { offset }
            | DecodeError::BadTag { offset, .. }
            | DecodeError::WrongWireType { offset, .. }
            | DecodeError::LengthOverrun { offset, .. }
            | DecodeError::InvalidUtf8 { offset, .. }
            | DecodeError::FrameTooLarge { offset, .. }
            | DecodeError::Json { offset, .. }
            | DecodeError::UnknownEventType { offset, .. }
            | DecodeError::Missing { offset, .. }
            | DecodeError::Unsupported { offset, .. } => *offset += base,
            DecodeError::BadMagic { .. }
            | DecodeError::UnknownEncoding { .. }
            | DecodeError::NotProtobuf { .. }
            | DecodeError::NotJson { .. }
            | DecodeError::Compression { .. }
            | DecodeError::Typed(_) => {}
        }
        self
    }

    pub(crate) fn json(e: &serde_json::Error, offset: u64) -> Self {
        DecodeError::Json {
            offset,
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }
    }
}
