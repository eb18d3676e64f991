//! The frame of the oversized-frame stream fault: a BOOKMARK padded to any size, in pieces
//! (head, padding, tail) so that it is never built in memory.

use bytes::Bytes;

use crate::object::{Encoding, varint};

/// Source of padding bytes (zeros for protobuf, spaces for JSON): the padding is sent as
/// slices of these.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
static SPACES: [u8; 64 * 1024] = [b' '; 64 * 1024];

/// An event padded to a size: `head`, then `pad` bytes of `fill` (repeated slices of it),
/// then `tail`.
#[derive(Debug)]
pub(crate) struct Padded {
    pub(crate) head: Bytes,
    pub(crate) pad: usize,
    pub(crate) fill: &'static [u8],
    pub(crate) tail: Bytes,
}

/// `event` (an encoded BOOKMARK: a protobuf frame or a JSON line) padded to `bytes`, as
/// frame and line limits measure it; never shorter than `event`.
pub(crate) fn pad_event(encoding: Encoding, event: Bytes, bytes: usize) -> Padded {
    match encoding {
        Encoding::Protobuf => {
            // [len][WatchEvent][field 15, bytes: padding]: decoders skip unknown fields.
            // `bytes` is the message after the length prefix (what frame limits measure).
            let payload = &event[4..];
            let base = payload.len() + 1;
            let mut pad = 0usize;
            for width in 1..=10usize {
                let p = bytes.saturating_sub(base + width);
                if varint::len(p as u64) == width {
                    pad = p;
                    break;
                }
            }
            let width = varint::len(pad as u64);
            let len = payload.len() + 1 + width + pad;
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            let mut head = Vec::with_capacity(4 + base + width);
            head.extend_from_slice(&len.to_be_bytes());
            head.extend_from_slice(payload);
            head.push((15 << 3) | 2);
            varint::put(&mut head, pad as u64);
            Padded {
                head: Bytes::from(head),
                pad,
                fill: &ZEROS,
                tail: Bytes::new(),
            }
        }
        Encoding::Json => {
            // `{"type":"BOOKMARK","object":{…}` + spaces + `}\n`; `bytes` is the line
            // without its `\n` (what line limits measure).
            let cut = event.len().saturating_sub(2);
            let pad = bytes.saturating_sub(event.len() - 1);
            Padded {
                head: event.slice(..cut),
                pad,
                fill: &SPACES,
                tail: event.slice(cut..),
            }
        }
    }
}
