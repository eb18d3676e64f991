//! [`WatchDecoder`]: a whole watch stream, chunks in, [`WatchEvent`]s out. Upstream:
//! `apimachinery/pkg/runtime/serializer/streaming/streaming.go`.

use bytes::Bytes;

use super::decode::{
    GvkCache, decode_json_event, decode_pb_event, json_event_is_error, pb_event_is_error,
};
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
/// at least `1/ratio` of the buffer that chunk may keep alive (its own length, or
/// [`SHARED_BUFFER_SPAN`](super::SHARED_BUFFER_SPAN) for a chunk that shares its buffer; ratio
/// [`DEFAULT_COMPACT_RATIO`](super::DEFAULT_COMPACT_RATIO)); smaller or straddling frames are
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
    cache: FrameCache,
}

/// One event cut from a watch stream by [`WatchDecoder::next_frame`] and not yet decoded: a
/// protobuf frame's payload or a JSON line, with its stream offset. [`WatchFrame::decode`]
/// decodes it on any thread, so a batch of frames can be decoded in parallel.
#[derive(Debug)]
pub(crate) struct WatchFrame {
    offset: u64,
    /// The payload; a slice of a received chunk still to be copied out when `compact`.
    bytes: Bytes,
    /// Copy `bytes` out before decoding: what the decoded object keeps must not hold the
    /// chunk alive (compaction, done here so that the copy runs on the decoding thread).
    compact: bool,
    json: bool,
}

/// What decoding frames reuses from one to the next (the last group/version/kind): one per
/// thread that decodes frames.
#[derive(Debug, Default)]
pub(crate) struct FrameCache(GvkCache);

impl WatchFrame {
    /// Whether the frame is an ERROR event (read from its type alone; `false` when that does
    /// not decode). The reflector stops reading the stream at one.
    pub(crate) fn is_error(&self) -> bool {
        if self.json {
            json_event_is_error(&self.bytes)
        } else {
            pb_event_is_error(&self.bytes)
        }
    }

    /// Decodes the event.
    ///
    /// # Errors
    /// Event decode errors, at stream offsets.
    pub(crate) fn decode(&self, cache: &mut FrameCache) -> Result<WatchEvent, DecodeError> {
        let ev = if self.json {
            decode_json_event(&self.bytes, &mut cache.0)
        } else if self.compact {
            decode_pb_event(&Bytes::copy_from_slice(&self.bytes), &mut cache.0)
        } else {
            decode_pb_event(&self.bytes, &mut cache.0)
        };
        ev.map_err(|e| e.shifted(self.offset))
    }
}

impl WatchDecoder {
    /// A decoder for `format` with a per-event size limit in bytes ([`DEFAULT_FRAME_LIMIT`]).
    pub fn new(format: WatchFormat, limit: usize) -> Self {
        WatchDecoder {
            framer: match format {
                WatchFormat::Protobuf => Framer::Protobuf(FrameDecoder::new(limit)),
                WatchFormat::Json => Framer::Json(LineDecoder::new(limit)),
            },
            cache: FrameCache::default(),
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
        match self.next_frame()? {
            Some(frame) => frame.decode(&mut self.cache).map(Some),
            None => Ok(None),
        }
    }

    /// The next complete event undecoded, or `None` until more bytes arrive.
    ///
    /// # Errors
    /// Framing errors (oversized frame), with stream offsets.
    pub(crate) fn next_frame(&mut self) -> Result<Option<WatchFrame>, DecodeError> {
        Ok(match &mut self.framer {
            Framer::Protobuf(f) => {
                f.next_frame_deferred()?
                    .map(|(offset, bytes, compact)| WatchFrame {
                        offset,
                        bytes,
                        compact,
                        json: false,
                    })
            }
            Framer::Json(l) => l.next_line()?.map(|(offset, bytes)| WatchFrame {
                offset,
                bytes,
                compact: false,
                json: true,
            }),
        })
    }

    /// This decoder's [`FrameCache`], for decoding the frames it cut on this thread.
    pub(crate) fn frame_cache(&mut self) -> &mut FrameCache {
        &mut self.cache
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
                Some((off, line)) => decode_json_event(&line, &mut self.cache.0)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
        }
    }
}
