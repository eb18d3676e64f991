//! [`WatchDecoder`]: a whole watch stream, chunks in, [`WatchEvent`]s out. Upstream:
//! `apimachinery/pkg/runtime/serializer/streaming/streaming.go`.

use bytes::Bytes;

use super::decode::{GvkCache, decode_json_event, decode_pb_event};
use super::event::WatchEvent;
use super::frame::FrameDecoder;
use super::line::LineDecoder;
use crate::object::DecodeError;

/// Default cap on one watch frame or JSON line: 16 MiB, as upstream clients use.
pub const DEFAULT_FRAME_LIMIT: usize = 16 * 1024 * 1024;

/// Which framing a watch stream uses (from the response's `Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFormat {
    /// `application/vnd.kubernetes.protobuf;stream=watch`.
    Protobuf,
    /// `application/json` (one event per line).
    Json,
}

#[derive(Debug)]
enum Framer {
    Protobuf(FrameDecoder),
    Json(LineDecoder),
}

/// Incremental watch-stream decoder: push chunks as they arrive, pull [`WatchEvent`]s.
/// Object bytes are slices of the pushed chunks whenever a frame lies within one chunk and is
/// at least `1/ratio` of it ([`DEFAULT_COMPACT_RATIO`](super::DEFAULT_COMPACT_RATIO)); smaller or straddling frames are
/// copied once into a buffer of their exact size.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use informer::object::{WatchDecoder, WatchFormat, DEFAULT_FRAME_LIMIT};
/// let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT);
/// d.push(Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}}\n"));
/// let ev = d.next_event().unwrap().unwrap();
/// assert_eq!(ev.object().unwrap().name(), "a");
/// ```
#[derive(Debug)]
pub struct WatchDecoder {
    framer: Framer,
    gvks: GvkCache,
}

impl WatchDecoder {
    /// A decoder for `format` with a per-event size limit in bytes ([`DEFAULT_FRAME_LIMIT`]).
    pub fn new(format: WatchFormat, limit: usize) -> Self {
        WatchDecoder {
            framer: match format {
                WatchFormat::Protobuf => Framer::Protobuf(FrameDecoder::new(limit)),
                WatchFormat::Json => Framer::Json(LineDecoder::new(limit)),
            },
            gvks: GvkCache::default(),
        }
    }

    /// Sets the compaction ratio (see [`DEFAULT_COMPACT_RATIO`](super::DEFAULT_COMPACT_RATIO)); 0 = always zero-copy.
    #[must_use]
    pub fn with_compaction(mut self, ratio: usize) -> Self {
        self.framer = match self.framer {
            Framer::Protobuf(f) => Framer::Protobuf(f.with_compaction(ratio)),
            Framer::Json(l) => Framer::Json(l.with_compaction(ratio)),
        };
        self
    }

    /// Appends a received chunk.
    pub fn push(&mut self, chunk: Bytes) {
        match &mut self.framer {
            Framer::Protobuf(f) => f.push(chunk),
            Framer::Json(l) => l.push(chunk),
        }
    }

    /// The next complete event, or `None` until more bytes arrive.
    ///
    /// # Errors
    /// Framing errors (oversized frame) and event decode errors, with stream offsets. After an
    /// error the stream should be dropped (the reflector relists).
    pub fn next_event(&mut self) -> Result<Option<WatchEvent>, DecodeError> {
        match &mut self.framer {
            Framer::Protobuf(f) => match f.next_frame()? {
                Some((off, frame)) => decode_pb_event(&frame, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
            Framer::Json(l) => match l.next_line()? {
                Some((off, line)) => decode_json_event(&line, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
        }
    }

    /// Ends the stream: returns a last unterminated JSON event if any.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when a partial protobuf frame remains; decode errors of a last
    /// JSON line.
    pub fn finish(&mut self) -> Result<Option<WatchEvent>, DecodeError> {
        match &mut self.framer {
            Framer::Protobuf(f) => f.finish().map(|()| None),
            Framer::Json(l) => match l.finish() {
                Some((off, line)) => decode_json_event(&line, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
        }
    }
}
