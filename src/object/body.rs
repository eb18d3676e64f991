//! [`Body`]: an object's own bytes as the cache holds them, as received or zstd-compressed.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use zstd::zstd_safe::{CCtx, DCtx};

use super::DecodeError;
use super::dictionary::Dictionary;

/// An object's bytes (bare protobuf message or JSON document): a slice of what was received, or
/// one zstd frame made with a [`Dictionary`] the body holds on to.
#[derive(Clone)]
pub(super) enum Body {
    Plain(Bytes),
    /// The decompressed length is in the frame's header (checked when it is made): a field for
    /// it made `Body` 40 bytes instead of 32, and `Object` a 256-byte block instead of 224.
    Zstd {
        frame: Arc<[u8]>,
        dict: Arc<Dictionary>,
    },
}

/// The decompressed length a frame of ours records (0 for a frame without one: never made).
fn content_len(frame: &[u8]) -> usize {
    match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) => usize::try_from(n).unwrap_or(0),
        _ => 0,
    }
}

// A decompression scratch buffer larger than this is given back after use, so one huge object
// does not pin its size on every thread that read it.
const SCRATCH_KEEP: usize = 1 << 20;

thread_local! {
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Body {
    /// Compresses `raw` with `dict` (at the dictionary's level) using `cctx`.
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when zstd fails or `raw` is over 4 GiB.
    pub(super) fn compress(
        raw: &[u8],
        dict: &Arc<Dictionary>,
        cctx: &mut CCtx<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Body, DecodeError> {
        u32::try_from(raw.len()).map_err(|_| DecodeError::Compression {
            dictionary: dict.id(),
            reason: format!(
                "{} bytes is over the 4 GiB a compressed body holds",
                raw.len()
            ),
        })?;
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
        cctx.compress_using_cdict(out, raw, dict.cdict())
            .map_err(|code| DecodeError::Compression {
                dictionary: dict.id(),
                reason: format!("zstd: {}", zstd::zstd_safe::get_error_name(code)),
            })?;
        // zstd records the length unless told not to; a frame without it could not be read.
        if content_len(out) != raw.len() {
            return Err(DecodeError::Compression {
                dictionary: dict.id(),
                reason: "zstd did not record the length in the frame".into(),
            });
        }
        Ok(Body::Zstd {
            frame: Arc::from(out.as_slice()),
            dict: dict.clone(),
        })
    }

    /// The object's length, bytes (decompressed).
    pub(super) fn len(&self) -> usize {
        match self {
            Body::Plain(b) => b.len(),
            Body::Zstd { frame, .. } => content_len(frame),
        }
    }

    /// What the body holds in memory, bytes (the frame for a compressed body).
    pub(super) fn cached_len(&self) -> usize {
        match self {
            Body::Plain(b) => b.len(),
            Body::Zstd { frame, .. } => frame.len(),
        }
    }

    /// The bytes as received, if the body is not compressed.
    pub(super) fn plain(&self) -> Option<&Bytes> {
        match self {
            Body::Plain(b) => Some(b),
            Body::Zstd { .. } => None,
        }
    }

    /// The object's bytes: a reference-count clone, or a fresh decompressed buffer.
    pub(super) fn bytes(&self) -> Result<Bytes, DecodeError> {
        match self {
            Body::Plain(b) => Ok(b.clone()),
            Body::Zstd { frame, dict } => {
                let mut out = Vec::new();
                decompress(frame, dict, &mut out)?;
                Ok(Bytes::from(out))
            }
        }
    }

    /// Runs `f` on the object's bytes; a compressed body is decompressed into this thread's
    /// scratch buffer (a fresh one when `f` itself reads another compressed body).
    pub(super) fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R, DecodeError> {
        let (frame, dict) = match self {
            Body::Plain(b) => return Ok(f(b)),
            Body::Zstd { frame, dict } => (frame, dict),
        };
        let mut f = Some(f);
        let shared = SCRATCH.try_with(|cell| {
            let mut buf = cell.try_borrow_mut().ok()?;
            let f = f.take()?;
            let r = decompress(frame, dict, &mut buf).map(|()| f(&buf));
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            Some(r)
        });
        match (shared, f) {
            (Ok(Some(r)), _) => r,
            // Nested in another read, or during thread teardown: a buffer of its own.
            (_, Some(f)) => {
                let mut buf = Vec::new();
                decompress(frame, dict, &mut buf)?;
                Ok(f(&buf))
            }
            (_, None) => Err(DecodeError::Compression {
                dictionary: dict.id(),
                reason: "no decompression buffer".into(),
            }),
        }
    }
}

/// Decompresses `frame` into `out` (replacing its content), checking that the frame was made
/// with `dict` and gives back exactly the length its header records.
fn decompress(frame: &[u8], dict: &Dictionary, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let fail = |reason: String| DecodeError::Compression {
        dictionary: dict.id(),
        reason,
    };
    let named = zstd::zstd_safe::get_dict_id_from_frame(frame).map_or(0, |id| id.get());
    if named != 0 && named != dict.id() {
        return Err(fail(format!(
            "the frame was made with dictionary {named}, not this one"
        )));
    }
    out.clear();
    // The length this process compressed (checked then, and at most 4 GiB): no untrusted size
    // reaches the allocator.
    let len = content_len(frame).min(u32::MAX as usize);
    out.reserve(len);
    let got = DCTX
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut dctx) => dctx.decompress_using_ddict(out, frame, dict.ddict()),
            Err(_) => DCtx::create().decompress_using_ddict(out, frame, dict.ddict()),
        })
        .unwrap_or_else(|_| DCtx::create().decompress_using_ddict(out, frame, dict.ddict()));
    match got {
        Ok(n) if n == len => Ok(()),
        Ok(n) => Err(fail(format!("{n} bytes came out, {len} were compressed"))),
        Err(code) => Err(fail(format!(
            "zstd: {}",
            zstd::zstd_safe::get_error_name(code)
        ))),
    }
}

impl PartialEq for Body {
    /// Equal when the objects' bytes are: the same frame, or equal bytes once decompressed (a
    /// body that fails to decompress equals nothing but itself).
    fn eq(&self, other: &Body) -> bool {
        match (self, other) {
            (Body::Plain(a), Body::Plain(b)) => a == b,
            (Body::Zstd { frame: a, .. }, Body::Zstd { frame: b, .. }) if Arc::ptr_eq(a, b) => true,
            _ => {
                self.len() == other.len()
                    && matches!((self.bytes(), other.bytes()), (Ok(a), Ok(b)) if a == b)
            }
        }
    }
}

impl Eq for Body {}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Plain(b) => b.fmt(f),
            Body::Zstd { frame, dict } => f
                .debug_struct("Zstd")
                .field("len", &content_len(frame))
                .field("compressed", &frame.len())
                .field("dictionary", &dict.id())
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(seed: &str) -> Arc<Dictionary> {
        let samples: Vec<Vec<u8>> = (0..300)
            .map(|i| {
                format!("{{\"{seed}\":{i},\"spec\":{{\"node\":\"n-{}\"}}}}", i % 9).into_bytes()
            })
            .collect();
        Arc::new(Dictionary::train(&samples, 2048, 3).unwrap())
    }

    fn packed(d: &Arc<Dictionary>, raw: &[u8]) -> Body {
        Body::compress(raw, d, &mut CCtx::create(), &mut Vec::new()).unwrap()
    }

    #[test]
    fn round_trip_through_bytes_and_scratch() {
        let d = dict("a");
        let raw = br#"{"a":7,"spec":{"node":"n-3"}}"#;
        let b = packed(&d, raw);
        assert_eq!(b.len(), raw.len());
        assert_eq!(&b.bytes().unwrap()[..], raw);
        assert_eq!(b.with(<[u8]>::to_vec).unwrap(), raw);
        // A read inside a read takes a fresh buffer instead of the borrowed scratch.
        let nested = b.with(|outer| (outer.to_vec(), b.with(<[u8]>::to_vec).unwrap()));
        assert_eq!(nested.unwrap(), (raw.to_vec(), raw.to_vec()));
        assert_eq!(b, Body::Plain(Bytes::from_static(raw)));
    }

    #[test]
    fn another_dictionary_is_a_typed_error() {
        let (a, b) = (dict("a"), dict("b"));
        let Body::Zstd { frame, .. } = packed(&a, br#"{"a":1,"spec":{}}"#) else {
            panic!("compressed")
        };
        let wrong = Body::Zstd {
            frame,
            dict: b.clone(),
        };
        match wrong.bytes() {
            Err(DecodeError::Compression { dictionary, reason }) => {
                assert_eq!(dictionary, b.id());
                assert!(reason.contains(&a.id().to_string()), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(wrong.with(|_| ()).is_err());
        assert_ne!(
            wrong,
            Body::Plain(Bytes::from_static(br#"{"a":1,"spec":{}}"#))
        );
    }

    /// Where a frame's header records the content size (zstd's format: magic, descriptor,
    /// window byte unless single-segment, dictionary id, then the size).
    fn size_field_at(frame: &[u8]) -> usize {
        let fhd = frame[4];
        let single = fhd & 0x20 != 0;
        let dict_id = [0, 1, 2, 4][usize::from(fhd & 3)];
        5 + usize::from(!single) + dict_id
    }

    #[test]
    fn corrupt_frames_and_wrong_lengths_are_typed_errors() {
        let d = dict("a");
        let raw = br#"{"a":2,"spec":{"node":"n-1"}}"#;
        let Body::Zstd { frame, .. } = packed(&d, raw) else {
            panic!("compressed")
        };
        assert_eq!(content_len(&frame), raw.len());
        let mut bad = frame.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        bad.truncate(bad.len() - 2);
        let mut longer = frame.to_vec();
        longer[size_field_at(&frame)] += 1;
        assert_eq!(content_len(&longer), raw.len() + 1);
        let mut shorter = frame.to_vec();
        shorter[size_field_at(&frame)] -= 1;
        for frame in [
            Arc::<[u8]>::from(bad),
            Arc::from(longer),
            Arc::from(shorter),
            Arc::<[u8]>::from(&b"not zstd"[..]),
        ] {
            let b = Body::Zstd {
                frame,
                dict: d.clone(),
            };
            assert!(
                matches!(b.bytes(), Err(DecodeError::Compression { .. })),
                "{:?}",
                b.bytes()
            );
        }
    }

    #[test]
    fn a_compressed_body_is_no_larger_than_a_received_one() {
        assert_eq!(size_of::<Body>(), size_of::<Bytes>());
    }
}
