//! [`Chunks`]: the received-bytes queue under both watch framers, zero-copy where it can be.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Default compaction ratio of the watch decoders: an event whose bytes are less than a quarter
/// of the buffer they arrived in is copied out instead of sliced, so that a cached object keeps
/// alive about 4 times its own size of received buffers at most. Larger events stay zero-copy. A
/// chunk pushed as the only reference to its buffer counts as its own length; one whose buffer
/// is shared (a slice of a larger buffer its source still holds, as every chunk of an HTTP body
/// is of hyper's read buffer) counts as at least [`SHARED_BUFFER_SPAN`] bytes.
pub const DEFAULT_COMPACT_RATIO: usize = 4;

/// Bytes a pushed chunk that shares its buffer may keep alive, for compaction: hyper's largest
/// read buffer by default (8 KiB + 100 × 4 KiB, `hyper/src/proto/h1/io.rs`), of which every
/// chunk of an HTTP/1.1 body is a slice. kube-apiserver writes one watch event per HTTP chunk,
/// so by their own length every event would pass the ratio, and each cached object could keep
/// alive the read buffer of a whole burst: 20 000 etcd Pods updated 20 times each held 13.8 KB
/// of RSS per object this way when each event came in its own chunk (`informer serve
/// --max-chunk-bytes 1`, `informer watch`, 2026-12-07), against 5.1 KB when the same events
/// came 64 KiB to a chunk; 4.4 KB either way with this rule. A unique chunk is measured once,
/// when pushed: the rest of it shares its buffer with the pieces handed out.
pub const SHARED_BUFFER_SPAN: usize = 8192 + 4096 * 100;

/// Most bytes reserved at once for the copied-out start of an incomplete frame: a larger
/// declared length (already checked against the frame limit) grows the buffer as its bytes
/// arrive instead.
const EAGER_RESERVE: usize = 1 << 20;

/// Queue of received chunks; frames inside one chunk are handed out as zero-copy slices,
/// frames straddling chunks are copied once into an owned buffer.
///
/// The start of a piece that straddles chunks is copied out when the decoder finds it
/// incomplete ([`Chunks::detach`]), so no received chunk is held between reads: the HTTP
/// client can then reuse its read buffer instead of allocating (and the kernel zeroing) a
/// fresh one for every read. Each byte is still copied at most once.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    /// Bytes of an incomplete piece already copied out of received chunks: logically the
    /// first buffered bytes, before `chunks`.
    partial: BytesMut,
    chunks: VecDeque<Bytes>,
    /// Bytes the chunk the front of `chunks` was cut from may keep alive ([`span`]).
    front_chunk_len: usize,
    /// The same for the other queued chunks (parallel to `chunks[1..]`).
    chunk_lens: VecDeque<usize>,
    buffered: usize,
    /// Stream offset of the first buffered byte.
    offset: u64,
    /// A piece shorter than `1/compact` of its chunk is copied out instead of sliced, so that
    /// a long-lived object never keeps alive a chunk more than `compact` times its size.
    /// 0 = always slice.
    compact: usize,
}

/// Bytes `chunk` may keep alive: its length when it is the only reference to its buffer, else at
/// least [`SHARED_BUFFER_SPAN`] (its buffer's size cannot be seen through `Bytes`).
fn span(chunk: &Bytes) -> usize {
    if chunk.is_unique() {
        chunk.len()
    } else {
        chunk.len().max(SHARED_BUFFER_SPAN)
    }
}

impl Chunks {
    pub(super) fn new(compact: usize) -> Self {
        Chunks {
            compact,
            ..Chunks::default()
        }
    }

    pub(super) fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.buffered += chunk.len();
            let span = span(&chunk);
            if self.chunks.is_empty() {
                self.front_chunk_len = span;
            } else {
                self.chunk_lens.push_back(span);
            }
            self.chunks.push_back(chunk);
        }
    }

    /// Bytes buffered (not yet taken or skipped).
    pub(super) fn buffered(&self) -> usize {
        self.buffered
    }

    /// Stream offset of the first buffered byte.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// Sets the compaction ratio (see [`DEFAULT_COMPACT_RATIO`]); 0 = always slice.
    pub(super) fn set_compaction(&mut self, ratio: usize) {
        self.compact = ratio;
    }

    /// Received chunks queued (those not yet copied out by [`Chunks::detach`]).
    pub(super) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Position, counted from the first buffered byte, of the first `byte` after the first
    /// `skip_chunks` queued chunks, which with the copied-out bytes (always skipped: the
    /// caller scanned them before they were copied out) hold `skip_bytes` bytes.
    pub(super) fn find(&self, byte: u8, skip_chunks: usize, skip_bytes: usize) -> Option<usize> {
        let mut pos = skip_bytes.max(self.partial.len());
        for c in self.chunks.range(skip_chunks..) {
            if let Some(i) = c.iter().position(|&b| b == byte) {
                return Some(pos + i);
            }
            pos += c.len();
        }
        None
    }

    fn pop_front(&mut self) {
        self.chunks.pop_front();
        self.front_chunk_len = self.chunk_lens.pop_front().unwrap_or(0);
    }

    /// Copies every byte still held in received chunks into `partial` (reserving up to
    /// `expect` bytes for the whole piece, a length already checked against the limit), so
    /// that no received chunk stays referenced.
    pub(super) fn detach(&mut self, expect: usize) {
        if self.chunks.is_empty() {
            return;
        }
        let want = expect.min(EAGER_RESERVE).max(self.buffered);
        self.partial
            .reserve(want.saturating_sub(self.partial.len()));
        for c in self.chunks.drain(..) {
            self.partial.extend_from_slice(&c);
        }
        self.chunk_lens.clear();
        self.front_chunk_len = 0;
    }

    /// Drops the first `n` bytes (`n <= buffered`) without allocating.
    pub(super) fn skip(&mut self, mut n: usize) {
        self.buffered -= n;
        self.offset += n as u64;
        if !self.partial.is_empty() {
            let k = n.min(self.partial.len());
            bytes::Buf::advance(&mut self.partial, k);
            n -= k;
        }
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            if front.len() > n {
                bytes::Buf::advance(front, n);
                return;
            }
            n -= front.len();
            self.pop_front();
        }
    }

    /// Copies the first `N` bytes without consuming them; `None` if fewer are buffered.
    pub(super) fn peek<const N: usize>(&self) -> Option<[u8; N]> {
        if self.buffered < N {
            return None;
        }
        let mut out = [0u8; N];
        let mut i = 0;
        for c in std::iter::once(&self.partial[..]).chain(self.chunks.iter().map(|c| &c[..])) {
            for &b in c.iter().take(N - i) {
                out[i] = b;
                i += 1;
            }
            if i == N {
                break;
            }
        }
        Some(out)
    }

    /// Removes and returns the first `n` bytes (`n <= buffered`, checked by callers).
    pub(super) fn take(&mut self, n: usize) -> Bytes {
        let (piece, compact) = self.take_deferred(n);
        if compact {
            Bytes::copy_from_slice(&piece)
        } else {
            piece
        }
    }

    /// As [`Chunks::take`], but a piece that compaction would copy out is returned as a slice
    /// of its chunk with `true`: the caller copies it (possibly on another thread) before it
    /// keeps it.
    pub(super) fn take_deferred(&mut self, n: usize) -> (Bytes, bool) {
        if !self.partial.is_empty() {
            // The piece started in chunks already released: complete it in `partial`.
            self.buffered -= n;
            self.offset += n as u64;
            if self.partial.len() < n {
                self.partial.reserve(n - self.partial.len());
            }
            while self.partial.len() < n {
                let Some(front) = self.chunks.front_mut() else {
                    break;
                };
                let want = n - self.partial.len();
                if front.len() <= want {
                    self.partial.extend_from_slice(front);
                    self.pop_front();
                } else {
                    self.partial.extend_from_slice(&front[..want]);
                    bytes::Buf::advance(front, want);
                }
            }
            let piece = if self.partial.len() == n {
                std::mem::take(&mut self.partial).freeze()
            } else {
                self.partial.split_to(n).freeze()
            };
            return (piece, false);
        }
        self.buffered -= n;
        self.offset += n as u64;
        let Some(front) = self.chunks.front_mut() else {
            return (Bytes::new(), false);
        };
        if front.len() >= n {
            let compact = self.compact > 0 && n.saturating_mul(self.compact) < self.front_chunk_len;
            let out = front.split_to(n);
            if front.is_empty() {
                self.pop_front();
            }
            return (out, compact);
        }
        let mut buf = BytesMut::with_capacity(n);
        while buf.len() < n {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let want = n - buf.len();
            if front.len() <= want {
                buf.extend_from_slice(front);
                self.pop_front();
            } else {
                buf.extend_from_slice(&front[..want]);
                bytes::Buf::advance(front, want);
            }
        }
        (buf.freeze(), false)
    }
}
