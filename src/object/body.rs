//! [`Body`]: an object's own bytes as the cache holds them, as received or zstd-compressed.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use zstd::zstd_safe::{CCtx, DCtx};

use super::DecodeError;
use super::dictionary::Dictionary;
use super::meta::ObjectMeta;
use super::meta_encode::put_meta_field;

/// An object's bytes (bare protobuf message or JSON document): a slice of what was received, or
/// one zstd frame made with a [`Dictionary`] the body holds on to.
#[derive(Clone)]
pub(super) enum Body {
    Plain(Bytes),
    /// `frame` is a varint, `skip`, then the zstd frame. `skip` > 0: the object's first
    /// `skip` bytes, its metadata field, are not in the zstd frame; re-encoding the decoded
    /// metadata gives them back (checked when the frame is made). They are about a third of an
    /// etcd Pod's bytes, and its most varied ones (name, uid, timestamps): frames 40 % smaller.
    ///
    /// The decompressed length is in the zstd frame's header (checked when it is made): a
    /// field for it would make `Body` 40 bytes instead of 32, and `Object` a block size
    /// larger.
    ///
    /// The frame is the object's own (a `Box`, not an `Arc`): objects are shared as
    /// `Arc<Object>` and a body is copied only when a whole `Object` is (rare), so reference
    /// counts on the frame would be 16 bytes of every compact object for nothing. An etcd
    /// Pod's frame is about 115 bytes: with the counts, most took a 160-byte block; without,
    /// a 128-byte one.
    Zstd {
        frame: Box<[u8]>,
        dict: Arc<Dictionary>,
    },
}

/// A frame's `skip` and its zstd frame (`(0, frame)` for a frame whose varint does not read:
/// never made, and the zstd frame then fails to decompress).
fn split(frame: &[u8]) -> (usize, &[u8]) {
    match crate::object::varint::read(frame) {
        Ok((skip, n)) => (usize::try_from(skip).unwrap_or(0), &frame[n..]),
        Err(_) => (0, frame),
    }
}

/// The decompressed length a zstd frame of ours records (0 for a frame without one: never
/// made).
fn content_len(zstd: &[u8]) -> usize {
    match zstd::zstd_safe::get_frame_content_size(zstd) {
        Ok(Some(n)) => usize::try_from(n).unwrap_or(0),
        _ => 0,
    }
}

/// The length of `raw`'s leading metadata field when `meta` re-encodes to exactly it (an
/// object as the API server writes it), else 0.
fn meta_field_len(raw: &[u8], meta: &ObjectMeta, scratch: &mut Vec<u8>) -> usize {
    let Some((&0x0a, rest)) = raw.split_first() else {
        return 0;
    };
    let Ok((len, n)) = crate::object::varint::read(rest) else {
        return 0;
    };
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| (1 + n).checked_add(len))
        .filter(|&end| end <= raw.len());
    let Some(end) = end else {
        return 0;
    };
    scratch.clear();
    put_meta_field(meta, scratch);
    if scratch.as_slice() == &raw[..end] {
        end
    } else {
        0
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
    /// Compresses `raw` with `dict` (at the dictionary's level) using `cctx`; for a protobuf
    /// object, `meta` is its decoded metadata, left out of the frame when it re-encodes to
    /// exactly the object's metadata field.
    ///
    /// # Errors
    /// [`DecodeError::Compression`] when zstd fails or `raw` is over 4 GiB.
    pub(super) fn compress(
        raw: &[u8],
        meta: Option<&ObjectMeta>,
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
        let skip = meta.map_or(0, |m| meta_field_len(raw, m, out));
        let rest = &raw[skip..];
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(rest.len()));
        cctx.compress_using_cdict(out, rest, dict.cdict())
            .map_err(|code| DecodeError::Compression {
                dictionary: dict.id(),
                reason: format!("zstd: {}", zstd::zstd_safe::get_error_name(code)),
            })?;
        // zstd records the length unless told not to; a frame without it could not be read.
        if content_len(out) != rest.len() {
            return Err(DecodeError::Compression {
                dictionary: dict.id(),
                reason: "zstd did not record the length in the frame".into(),
            });
        }
        let mut head = Vec::with_capacity(4);
        crate::object::varint::put(&mut head, skip as u64);
        out.splice(0..0, head);
        Ok(Body::Zstd {
            frame: Box::from(out.as_slice()),
            dict: dict.clone(),
        })
    }

    /// The object's length, bytes (decompressed).
    pub(super) fn len(&self) -> usize {
        match self {
            Body::Plain(b) => b.len(),
            Body::Zstd { frame, .. } => {
                let (skip, zstd) = split(frame);
                skip.saturating_add(content_len(zstd))
            }
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

    /// The object's bytes: a reference-count clone, or a fresh decompressed buffer (`meta`,
    /// the object's decoded metadata, gives back a metadata field left out of the frame).
    pub(super) fn bytes(&self, meta: &ObjectMeta) -> Result<Bytes, DecodeError> {
        match self {
            Body::Plain(b) => Ok(b.clone()),
            Body::Zstd { frame, dict } => {
                let mut out = Vec::new();
                decompress(frame, dict, meta, &mut out)?;
                Ok(Bytes::from(out))
            }
        }
    }

    /// Runs `f` on the object's bytes; a compressed body is decompressed into this thread's
    /// scratch buffer (a fresh one when `f` itself reads another compressed body).
    pub(super) fn with<R>(
        &self,
        meta: &ObjectMeta,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, DecodeError> {
        let (frame, dict) = match self {
            Body::Plain(b) => return Ok(f(b)),
            Body::Zstd { frame, dict } => (frame, dict),
        };
        let mut f = Some(f);
        let shared = SCRATCH.try_with(|cell| {
            let mut buf = cell.try_borrow_mut().ok()?;
            let f = f.take()?;
            let r = decompress(frame, dict, meta, &mut buf).map(|()| f(&buf));
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
                decompress(frame, dict, meta, &mut buf)?;
                Ok(f(&buf))
            }
            (_, None) => Err(DecodeError::Compression {
                dictionary: dict.id(),
                reason: "no decompression buffer".into(),
            }),
        }
    }

    /// Whether both bodies hold the same bytes, given the metadata both objects have (equal).
    pub(super) fn same_bytes(&self, other: &Body, meta: &ObjectMeta) -> bool {
        match (self, other) {
            (Body::Plain(a), Body::Plain(b)) => a == b,
            (Body::Zstd { frame: a, dict: x }, Body::Zstd { frame: b, dict: y })
                if Arc::ptr_eq(x, y) && a == b =>
            {
                true
            }
            _ => {
                self.len() == other.len()
                    && matches!((self.bytes(meta), other.bytes(meta)), (Ok(a), Ok(b)) if a == b)
            }
        }
    }
}

/// Decompresses `frame` into `out` (replacing its content), checking that the frame was made
/// with `dict` and gives back exactly the length its header records; a metadata field left
/// out is written from `meta` first and must have the length the frame records.
fn decompress(
    frame: &[u8],
    dict: &Dictionary,
    meta: &ObjectMeta,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let fail = |reason: String| DecodeError::Compression {
        dictionary: dict.id(),
        reason,
    };
    let (skip, zstd) = split(frame);
    let named = zstd::zstd_safe::get_dict_id_from_frame(zstd).map_or(0, |id| id.get());
    if named != 0 && named != dict.id() {
        return Err(fail(format!(
            "the frame was made with dictionary {named}, not this one"
        )));
    }
    out.clear();
    if skip > 0 {
        put_meta_field(meta, out);
        if out.len() != skip {
            return Err(fail(format!(
                "the metadata re-encodes to {} bytes, not the {skip} left out of the frame",
                out.len()
            )));
        }
    }
    // The length this process compressed (checked then, and at most 4 GiB): no untrusted size
    // reaches the allocator.
    let len = content_len(zstd).min(u32::MAX as usize);
    out.resize(skip + len, 0);
    let dst = &mut out[skip..];
    let got = DCTX
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut dctx) => dctx.decompress_using_ddict(&mut *dst, zstd, dict.ddict()),
            Err(_) => DCtx::create().decompress_using_ddict(&mut *dst, zstd, dict.ddict()),
        })
        .unwrap_or_else(|_| DCtx::create().decompress_using_ddict(dst, zstd, dict.ddict()));
    match got {
        Ok(n) if n == len => Ok(()),
        Ok(n) => Err(fail(format!("{n} bytes came out, {len} were compressed"))),
        Err(code) => Err(fail(format!(
            "zstd: {}",
            zstd::zstd_safe::get_error_name(code)
        ))),
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Plain(b) => b.fmt(f),
            Body::Zstd { frame, dict } => f
                .debug_struct("Zstd")
                .field("len", &self.len())
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
        Body::compress(raw, None, d, &mut CCtx::create(), &mut Vec::new()).unwrap()
    }

    /// Metadata that leaves nothing out of a frame (no frame made with `None` needs any).
    fn none() -> ObjectMeta {
        ObjectMeta::default()
    }

    #[test]
    fn round_trip_through_bytes_and_scratch() {
        let d = dict("a");
        let raw = br#"{"a":7,"spec":{"node":"n-3"}}"#;
        let b = packed(&d, raw);
        assert_eq!(b.len(), raw.len());
        let m = none();
        assert_eq!(&b.bytes(&m).unwrap()[..], raw);
        assert_eq!(b.with(&m, <[u8]>::to_vec).unwrap(), raw);
        // A read inside a read takes a fresh buffer instead of the borrowed scratch.
        let nested = b.with(&m, |outer| {
            (outer.to_vec(), b.with(&m, <[u8]>::to_vec).unwrap())
        });
        assert_eq!(nested.unwrap(), (raw.to_vec(), raw.to_vec()));
        assert!(b.same_bytes(&Body::Plain(Bytes::from_static(raw)), &m));
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
        match wrong.bytes(&none()) {
            Err(DecodeError::Compression { dictionary, reason }) => {
                assert_eq!(dictionary, b.id());
                assert!(reason.contains(&a.id().to_string()), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(wrong.with(&none(), |_| ()).is_err());
        let right = Body::Plain(Bytes::from_static(br#"{"a":1,"spec":{}}"#));
        assert!(!wrong.same_bytes(&right, &none()));
    }

    /// Where a frame's zstd header records the content size (after our one-byte `skip` of
    /// 0; zstd's format: magic, descriptor, window byte unless single-segment, dictionary id,
    /// then the size).
    fn size_field_at(frame: &[u8]) -> usize {
        assert_eq!(frame[0], 0, "skip");
        let fhd = frame[5];
        let single = fhd & 0x20 != 0;
        let dict_id = [0, 1, 2, 4][usize::from(fhd & 3)];
        6 + usize::from(!single) + dict_id
    }

    #[test]
    fn corrupt_frames_and_wrong_lengths_are_typed_errors() {
        let d = dict("a");
        let raw = br#"{"a":2,"spec":{"node":"n-1"}}"#;
        let Body::Zstd { frame, .. } = packed(&d, raw) else {
            panic!("compressed")
        };
        assert_eq!(content_len(&frame[1..]), raw.len());
        let mut bad = frame.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        bad.truncate(bad.len() - 2);
        let mut longer = frame.to_vec();
        longer[size_field_at(&frame)] += 1;
        assert_eq!(content_len(&longer[1..]), raw.len() + 1);
        let mut shorter = frame.to_vec();
        shorter[size_field_at(&frame)] -= 1;
        for frame in [
            Box::<[u8]>::from(bad),
            Box::from(longer),
            Box::from(shorter),
            Box::<[u8]>::from(&b"not zstd"[..]),
        ] {
            let b = Body::Zstd {
                frame,
                dict: d.clone(),
            };
            assert!(
                matches!(b.bytes(&none()), Err(DecodeError::Compression { .. })),
                "{:?}",
                b.bytes(&none())
            );
        }
    }

    #[test]
    fn a_compressed_body_is_no_larger_than_a_received_one() {
        assert_eq!(size_of::<Body>(), size_of::<Bytes>());
    }

    /// A protobuf object as the API server writes it: metadata field first, then the rest.
    fn written(meta: &ObjectMeta, rest: &[u8]) -> Vec<u8> {
        let mut raw = Vec::new();
        put_meta_field(meta, &mut raw);
        raw.extend_from_slice(rest);
        raw
    }

    fn meta(name: &str, uid: &str) -> ObjectMeta {
        ObjectMeta::from(crate::object::ObjectMetaFields {
            name: name.into(),
            namespace: "shop".into(),
            uid: uid.into(),
            resource_version: "7".into(),
            labels: [("app", "web")].into_iter().collect(),
            ..Default::default()
        })
    }

    #[test]
    fn metadata_that_re_encodes_exactly_is_left_out_of_the_frame() {
        let d = dict("a");
        let m = meta("web-0", "0c8b3a3e-6f1e-4c57-9f5e-4c2d8a1b7e90");
        let rest = br#"{"a":2,"spec":{"node":"n-1"}}"#;
        let raw = written(&m, rest);
        let b = Body::compress(&raw, Some(&m), &d, &mut CCtx::create(), &mut Vec::new()).unwrap();
        let Body::Zstd { frame, .. } = &b else {
            panic!("compressed")
        };
        let (skip, zstd) = split(frame);
        assert_eq!(skip, raw.len() - rest.len());
        assert_eq!(content_len(zstd), rest.len());
        assert_eq!(b.len(), raw.len());
        assert_eq!(&b.bytes(&m).unwrap()[..], raw);
        assert_eq!(b.with(&m, <[u8]>::to_vec).unwrap(), raw);
        assert!(b.same_bytes(&Body::Plain(Bytes::from(raw.clone())), &m));
        // Metadata of another length gives a typed error, never other bytes.
        let other = meta("web-10", "0c8b3a3e-6f1e-4c57-9f5e-4c2d8a1b7e90");
        assert!(matches!(
            b.bytes(&other),
            Err(DecodeError::Compression { reason, .. }) if reason.contains("re-encodes")
        ));
    }

    #[test]
    fn metadata_that_does_not_re_encode_exactly_stays_in_the_frame() {
        let d = dict("a");
        let m = meta("web-0", "u-1");
        let rest = br#"{"a":2}"#;
        // Written by someone else: a field our encoder writes differently (a set selfLink,
        // which it writes empty), fields out of order, no metadata first, a bad length.
        let mut self_link = Vec::new();
        crate::object::protowire::put_message(&mut self_link, 1, |out| {
            crate::object::protowire::put_str(out, 1, "web-0");
            crate::object::protowire::put_str(out, 4, "/api/v1/pods/web-0");
        });
        let mut reordered = written(&m, rest);
        reordered.rotate_left(rest.len());
        let mut bad_len = written(&m, rest);
        bad_len[1] = 0x7f;
        for raw in [self_link, reordered, rest.to_vec(), bad_len, vec![0x0a]] {
            let b =
                Body::compress(&raw, Some(&m), &d, &mut CCtx::create(), &mut Vec::new()).unwrap();
            let Body::Zstd { frame, .. } = &b else {
                panic!("compressed")
            };
            assert_eq!(split(frame).0, 0, "{raw:?}");
            assert_eq!(&b.bytes(&m).unwrap()[..], raw);
        }
    }
}
