//! Bad input: every decoder answers with a typed error, never panics, and never allocates from
//! an untrusted length. The whole binary runs under a capped allocator (48 MiB in all, three
//! times the 16 MiB frame limit): an allocation sized from a hostile length (a 4 GiB frame, a
//! varint length) would exceed it, fail, and abort the process, failing the run.

use std::alloc::System;
use std::path::Path;

use bytes::Bytes;
use cap::Cap;
use informer::object::{
    self, DEFAULT_FRAME_LIMIT, DecodeError, WatchDecoder, WatchEvent, WatchFormat,
    encode_watch_frame,
};

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, 48 * 1024 * 1024);

/// A failed assertion must fail the run, not hang it: the default panic hook symbolizes a
/// backtrace, which allocates past the cap, and the allocation-error hook then waits forever on
/// the backtrace lock. Every test installs this message-only hook first.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|info| eprintln!("{info}"))));
}

fn pod() -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/k8s-testdata/HEAD/core.v1.Pod.pb");
    Bytes::from(std::fs::read(p).unwrap())
}

/// End offset of the `raw` field (field 2) of the Pod's envelope: truncations at or after it
/// keep a complete object.
fn raw_end(input: &Bytes) -> usize {
    let env = object::decode_envelope(input).unwrap();
    env.raw.as_ptr() as usize - input.as_ptr() as usize + env.raw.len()
}

#[test]
fn every_truncation_of_the_pod_is_an_error() {
    quiet_panics();
    let input = pod();
    let whole = object::decode(input.clone()).unwrap();
    let end = raw_end(&input);
    let mut errors = 0;
    for i in 0..input.len() {
        let cut = input.slice(..i);
        match object::decode(cut) {
            Err(_) => errors += 1,
            // Only the two trailing empty strings (contentEncoding, contentType) can be cut
            // and leave a complete, identical object.
            Ok(obj) => {
                assert!(i >= end, "truncation at {i} decoded");
                assert_eq!(obj, whole);
            }
        }
    }
    assert!(
        errors >= end,
        "{errors} errors for {} truncations",
        input.len()
    );
}

#[test]
fn truncation_errors_say_where() {
    quiet_panics();
    let input = pod();
    let cut = input.slice(..input.len() / 2);
    let err = object::decode(cut).unwrap_err();
    match err {
        DecodeError::LengthOverrun { field, offset, .. } => {
            assert_eq!(field, 2, "the raw field of the envelope overruns");
            assert!(offset > 4 && offset < 64, "offset {offset}");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn flipped_magic_is_an_error() {
    quiet_panics();
    let input = pod();
    for i in 0..4 {
        let mut v = input.to_vec();
        v[i] ^= 0x20;
        let err = object::decode_envelope(&Bytes::from(v)).unwrap_err();
        assert!(matches!(err, DecodeError::BadMagic { .. }), "{err}");
    }
    let mut v = input.to_vec();
    v[0] = b'x';
    let err = object::decode(Bytes::from(v)).unwrap_err();
    assert!(matches!(err, DecodeError::UnknownEncoding { .. }), "{err}");
}

#[test]
fn four_gib_frame_is_rejected_before_allocating() {
    quiet_panics();
    let before = ALLOC.allocated();
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
    d.push(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0a, 0x05]));
    let err = d.next_event().unwrap_err();
    assert_eq!(
        err,
        DecodeError::FrameTooLarge {
            offset: 0,
            len: 0xffff_ffff,
            limit: DEFAULT_FRAME_LIMIT
        }
    );
    assert!(ALLOC.allocated() < before + 1024 * 1024);
    // A frame over a small limit, with the whole payload present, is rejected too.
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, 100);
    let mut buf = 101u32.to_be_bytes().to_vec();
    buf.extend(std::iter::repeat_n(0u8, 101));
    d.push(Bytes::from(buf));
    assert!(matches!(
        d.next_event(),
        Err(DecodeError::FrameTooLarge { len: 101, .. })
    ));
}

#[test]
fn oversized_json_line_is_rejected() {
    quiet_panics();
    let mut d = WatchDecoder::new(WatchFormat::Json, 1000);
    for _ in 0..20 {
        d.push(Bytes::from(vec![b' '; 100]));
        if let Err(e) = d.next_event() {
            assert!(
                matches!(e, DecodeError::FrameTooLarge { limit: 1000, .. }),
                "{e}"
            );
            return;
        }
    }
    panic!("2000 bytes without newline accepted under a 1000-byte limit");
}

#[test]
fn garbage_after_a_valid_frame_is_an_error() {
    quiet_panics();
    let obj = object::decode(pod()).unwrap();
    let mut stream = Vec::new();
    encode_watch_frame(&WatchEvent::Added(obj.clone()), &mut stream).unwrap();
    let valid = stream.len();
    for garbage in [
        &b"\x00\x00\x00\x05hello"[..],
        &b"\x00\x00\x00\x03\xff\xff\xff"[..],
        &b"\x00\x00"[..],
        &b"\x00\x00\x00\x10short"[..],
        &b"\x7f\xff\xff\xffxxxx"[..],
    ] {
        let mut s = stream.clone();
        s.extend_from_slice(garbage);
        let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
        d.push(Bytes::from(s));
        assert_eq!(
            d.next_event().unwrap(),
            Some(WatchEvent::Added(obj.clone()))
        );
        let rest = d.next_event().and_then(|e| match e {
            Some(e) => Ok(Some(e)),
            None => d.finish(),
        });
        let err = rest.expect_err("garbage accepted");
        // Offsets point into the garbage, past the valid frame.
        let msg = err.to_string();
        assert!(msg.contains("byte"), "{msg}");
        let _ = valid;
    }
}

#[test]
fn invalid_utf8_in_a_name_is_an_error() {
    quiet_panics();
    let input = pod();
    let mut v = input.to_vec();
    let env_raw_start = {
        let env = object::decode_envelope(&input).unwrap();
        env.raw.as_ptr() as usize - input.as_ptr() as usize
    };
    // The first string of the object's metadata is its name: "nameValue".
    let pos = v[env_raw_start..]
        .windows(9)
        .position(|w| w == b"nameValue")
        .unwrap()
        + env_raw_start;
    v[pos] = 0xff;
    let err = object::decode(Bytes::from(v)).unwrap_err();
    assert_eq!(
        err,
        DecodeError::InvalidUtf8 {
            message: "ObjectMeta",
            field: 1,
            offset: pos as u64
        }
    );
    // The same in JSON.
    let json = b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\xffb\"}}";
    let err = object::decode(Bytes::from_static(json)).unwrap_err();
    assert!(matches!(err, DecodeError::Json { .. }), "{err}");
}

#[test]
fn garbage_protobuf_and_json_are_errors() {
    quiet_panics();
    let cases: &[&[u8]] = &[
        b"k8s\0\x0a\xff\xff\xff\xff\x0f",
        b"k8s\0\x12\x05\x0a\x80\x80\x80",
        b"k8s\0\x0f",
        b"k8s\0\x12\x02\x0a\x0a",
        b"{\"kind\":",
        b"{\"metadata\":{\"labels\":[1]}}",
        b"{\"metadata\":{\"creationTimestamp\":\"yesterday\"}}",
    ];
    for c in cases {
        assert!(
            object::decode(Bytes::from_static(c)).is_err(),
            "{c:?} decoded"
        );
    }
    let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT);
    d.push(Bytes::from_static(
        b"{\"type\":\"EXPLODED\",\"object\":{}}\n",
    ));
    assert!(matches!(
        d.next_event(),
        Err(DecodeError::UnknownEventType { .. })
    ));
}

#[test]
fn random_bytes_never_panic() {
    quiet_panics();
    use proptest::prelude::*;
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 2000,
        ..Default::default()
    });
    let pod = pod();
    runner
        .run(
            &(
                proptest::collection::vec(any::<u8>(), 0..512),
                0usize..2000,
                any::<u8>(),
            ),
            |(noise, at, byte)| {
                let _ = object::decode(Bytes::from(noise.clone()));
                let _ = object::decode_list(Bytes::from(noise.clone()));
                let mut v = pod.to_vec();
                let i = at % v.len();
                v[i] = byte;
                let _ = object::decode(Bytes::from(v));
                for format in [WatchFormat::Protobuf, WatchFormat::Json] {
                    let mut d = WatchDecoder::new(format, 4096);
                    d.push(Bytes::from(noise.clone()));
                    while let Ok(Some(_)) = d.next_event() {}
                    let _ = d.finish();
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn long_json_line_in_tiny_chunks_is_linear() {
    quiet_panics();
    // 1 MiB without a newline, pushed 16 bytes at a time (65 536 chunks), then over the
    // limit: each chunk is scanned once (a rescan per push would be 2 billion chunk visits).
    let mut d = WatchDecoder::new(WatchFormat::Json, 1024 * 1024);
    let piece = Bytes::from_static(b"{\"a\":\"xxxxxxxxxx");
    assert_eq!(piece.len(), 16);
    let mut result = Ok(None);
    for _ in 0..(1024 * 1024 / 16 + 1) {
        d.push(piece.clone());
        result = d.next_event();
        if result.is_err() {
            break;
        }
    }
    assert!(
        matches!(result, Err(DecodeError::FrameTooLarge { .. })),
        "{result:?}"
    );
}
