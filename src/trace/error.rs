//! [`TraceError`]: why a trace could not be written or read.

use std::path::PathBuf;

use super::format::TRACE_VERSION;

/// Why a trace could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The file does not start with [`MAGIC`](super::MAGIC).
    #[error("not a trace file (no INFTRACE magic)")]
    BadMagic,
    /// The file ends in the middle of a record.
    #[error("trace truncated at byte {offset}: {context}")]
    Truncated {
        /// Offset of the record that is cut.
        offset: u64,
        /// What was being read.
        context: &'static str,
    },
    /// A record's length prefix is not a valid varint (more than 10 bytes, or over `u64`).
    #[error("bad record length at byte {offset}")]
    BadLength {
        /// Offset of the length prefix.
        offset: u64,
    },
    /// A record is longer than [`MAX_RECORD_BYTES`](super::MAX_RECORD_BYTES).
    #[error("record at byte {offset} is {len} bytes, over the {limit}-byte limit")]
    RecordTooLarge {
        /// Offset of the record.
        offset: u64,
        /// Its announced length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A record is not a valid `TraceRecord` message.
    #[error("record at byte {offset}: {source}")]
    Decode {
        /// Offset of the record.
        offset: u64,
        /// The protobuf error.
        source: prost::DecodeError,
    },
    /// The first record is not a `HEADER`.
    #[error("trace has no header record")]
    MissingHeader,
    /// The header's version is not [`TRACE_VERSION`].
    #[error("trace format version {found}, this build reads {TRACE_VERSION}")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A record's content is invalid (unknown kind, unknown stream format, bad Status).
    #[error("record at byte {offset}: {message}")]
    Invalid {
        /// Offset of the record.
        offset: u64,
        /// What is wrong.
        message: String,
    },
}
