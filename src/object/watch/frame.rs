//! [`FrameDecoder`]: protobuf watch framing (4-byte big-endian length + payload). Upstream:
//! `apimachinery/pkg/util/framer/framer.go` (`lengthDelimitedFrameReader`).

use bytes::Bytes;

use super::chunks::{Chunks, DEFAULT_COMPACT_RATIO};
use crate::object::DecodeError;

/// Splits a protobuf watch stream into frames: 4-byte big-endian length + payload. A declared
/// length over the limit is an error before anything is allocated for it.
///
/// After an error the stream is unusable (framing is lost): drop it and relist.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Chunks,
    limit: usize,
}

impl FrameDecoder {
    /// A decoder that rejects frames longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        FrameDecoder {
            buf: Chunks::new(DEFAULT_COMPACT_RATIO),
            limit,
        }
    }

    /// Sets the compaction ratio (see [`DEFAULT_COMPACT_RATIO`]); 0 = always zero-copy.
    #[must_use]
    pub fn with_compaction(mut self, ratio: usize) -> Self {
        self.buf.set_compaction(ratio);
        self
    }

    /// Appends a received chunk (any size, cut anywhere).
    pub fn push(&mut self, chunk: Bytes) {
        self.buf.push(chunk);
    }

    /// The next complete frame's payload and its stream offset, or `None` until more bytes come.
    ///
    /// # Errors
    /// [`DecodeError::FrameTooLarge`] when the length prefix exceeds the limit.
    pub fn next_frame(&mut self) -> Result<Option<(u64, Bytes)>, DecodeError> {
        Ok(self.next_frame_deferred()?.map(|(offset, frame, compact)| {
            let frame = if compact {
                Bytes::copy_from_slice(&frame)
            } else {
                frame
            };
            (offset, frame)
        }))
    }

    /// As [`FrameDecoder::next_frame`], but a frame that compaction would copy out is returned
    /// as a slice of its chunk with `true`: the caller copies it before it keeps any of it.
    pub(crate) fn next_frame_deferred(
        &mut self,
    ) -> Result<Option<(u64, Bytes, bool)>, DecodeError> {
        let Some(prefix) = self.buf.peek::<4>() else {
            self.buf.detach(4);
            return Ok(None);
        };
        let len = u32::from_be_bytes(prefix) as u64;
        if len > self.limit as u64 {
            return Err(DecodeError::FrameTooLarge {
                offset: self.buf.offset(),
                len,
                limit: self.limit,
            });
        }
        let len = len as usize;
        if self.buf.buffered() < 4 + len {
            self.buf.detach(4 + len);
            return Ok(None);
        }
        self.buf.skip(4);
        let offset = self.buf.offset();
        let (frame, compact) = self.buf.take_deferred(len);
        Ok(Some((offset, frame, compact)))
    }

    /// Checks that the stream ended on a frame boundary.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when a partial frame is buffered.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.buffered() == 0 {
            Ok(())
        } else {
            Err(DecodeError::Truncated {
                offset: self.buf.offset() + self.buf.buffered() as u64,
                context: "watch frame",
            })
        }
    }
}
