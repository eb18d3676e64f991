//! [`LineDecoder`]: JSON watch framing (one event per line). Upstream:
//! `apimachinery/pkg/util/framer/framer.go` (`jsonFrameReader`).

use bytes::Bytes;

use super::chunks::{Chunks, DEFAULT_COMPACT_RATIO};
use crate::object::DecodeError;

/// Splits a JSON watch stream into lines (events are separated by `\n`; blank lines skipped).
/// A line longer than the limit is an error as soon as that many bytes are buffered.
#[derive(Debug)]
pub struct LineDecoder {
    buf: Chunks,
    limit: usize,
    /// Leading buffered chunks already scanned for `\n` (none found), and their total length:
    /// each byte is scanned once however small the chunks are.
    scanned_chunks: usize,
    scanned_bytes: usize,
}

impl LineDecoder {
    /// A decoder that rejects lines longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        LineDecoder {
            buf: Chunks::new(DEFAULT_COMPACT_RATIO),
            limit,
            scanned_chunks: 0,
            scanned_bytes: 0,
        }
    }

    /// Sets the compaction ratio (see [`DEFAULT_COMPACT_RATIO`]); 0 = always zero-copy.
    #[must_use]
    pub fn with_compaction(mut self, ratio: usize) -> Self {
        self.buf.set_compaction(ratio);
        self
    }

    /// Appends a received chunk.
    pub fn push(&mut self, chunk: Bytes) {
        self.buf.push(chunk);
    }

    /// The next complete non-blank line (without `\n`) and its stream offset.
    ///
    /// # Errors
    /// [`DecodeError::FrameTooLarge`] for a line over the limit.
    pub fn next_line(&mut self) -> Result<Option<(u64, Bytes)>, DecodeError> {
        loop {
            let found = self
                .buf
                .find(b'\n', self.scanned_chunks, self.scanned_bytes);
            let Some(nl) = found else {
                if self.buf.buffered() > self.limit {
                    return Err(DecodeError::FrameTooLarge {
                        offset: self.buf.offset(),
                        len: self.buf.buffered() as u64,
                        limit: self.limit,
                    });
                }
                // Everything buffered is the start of one line, scanned: copied out of the
                // received chunks (see `Chunks::detach`).
                self.buf.detach(0);
                self.scanned_chunks = self.buf.chunk_count();
                self.scanned_bytes = self.buf.buffered();
                return Ok(None);
            };
            if nl > self.limit {
                return Err(DecodeError::FrameTooLarge {
                    offset: self.buf.offset(),
                    len: nl as u64,
                    limit: self.limit,
                });
            }
            let offset = self.buf.offset();
            let line = self.buf.take(nl);
            self.buf.skip(1);
            self.scanned_chunks = 0;
            self.scanned_bytes = 0;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some((offset, line)));
        }
    }

    /// Ends the stream: a last line without `\n` is returned; `None` when nothing is left.
    pub fn finish(&mut self) -> Option<(u64, Bytes)> {
        let offset = self.buf.offset();
        let rest = self.buf.take(self.buf.buffered());
        self.scanned_chunks = 0;
        self.scanned_bytes = 0;
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some((offset, rest))
    }
}
