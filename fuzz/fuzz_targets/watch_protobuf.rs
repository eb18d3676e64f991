//! The protobuf watch-stream decoder (`WatchDecoder` over `FrameDecoder`) fed arbitrary bytes cut
//! into chunks chosen by the input (see `StreamInput`).
//!
//! Invariants beyond "no panic":
//! - the stream in one chunk and the stream cut as the input says (with the input's compaction
//!   ratio) give the same events and the same end (clean, or the same error);
//! - in the one-chunk, zero-copy run every object's raw bytes are a slice of the stream;
//! - `FrameDecoder` alone hands out frames that are exactly the stream's bytes after each
//!   4-byte big-endian length, at the offsets it reports, and ends on a frame boundary or
//!   reports the truncation at the stream's end;
//! - every decoded event re-encoded with `encode_watch_frame` decodes to an equal event.

#![no_main]

use bytes::Bytes;
use informer::object::{
    DEFAULT_FRAME_LIMIT, DecodeError, FrameDecoder, WatchEvent, WatchFormat, encode_watch_frame,
};
use informer_fuzz::{StreamInput, assert_raw_in, assert_same_outcome, run_watch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = StreamInput::parse(data);
    let stream = &input.stream;
    let chunks = input.chunks();

    let whole = run_watch(
        WatchFormat::Protobuf,
        input.limit,
        0,
        std::slice::from_ref(stream),
    );
    for e in whole
        .events
        .iter()
        .chain(whole.end.as_ref().ok().and_then(Option::as_ref))
    {
        if let Some(o) = e.object() {
            assert_raw_in(stream, o);
        }
    }
    let split = run_watch(
        WatchFormat::Protobuf,
        input.limit,
        input.compaction,
        &chunks,
    );
    assert_same_outcome("protobuf watch, split vs whole", &whole, &split);

    check_frames(&input, &chunks);

    // Re-encode what was decoded; it must decode to the same events and end cleanly.
    let mut again = Vec::new();
    for e in &whole.events {
        encode_watch_frame(e, &mut again).unwrap();
    }
    let re = run_watch(
        WatchFormat::Protobuf,
        DEFAULT_FRAME_LIMIT,
        0,
        &[Bytes::from(again)],
    );
    assert_eq!(re.end, Ok(None), "re-encoded stream did not end cleanly");
    assert_eq!(re.events, whole.events, "re-encoded events differ");
    if let Some(WatchEvent::Error(s)) = whole.events.last() {
        assert!(matches!(re.events.last(), Some(WatchEvent::Error(t)) if t == s));
    }
});

/// Framing alone: frames are the stream's own bytes at the offsets reported.
fn check_frames(input: &StreamInput, chunks: &[Bytes]) {
    let stream = &input.stream;
    let mut f = FrameDecoder::new(input.limit).with_compaction(input.compaction);
    // Stream offset where the next length prefix must start.
    let mut next = 0usize;
    for c in chunks {
        f.push(c.clone());
        loop {
            match f.next_frame() {
                Ok(Some((off, frame))) => {
                    let off = off as usize;
                    assert_eq!(off, next + 4, "frame offset");
                    let prefix: [u8; 4] = stream[next..off].try_into().unwrap();
                    assert_eq!(
                        u32::from_be_bytes(prefix) as usize,
                        frame.len(),
                        "frame length"
                    );
                    assert!(frame.len() <= input.limit, "frame over the limit");
                    assert_eq!(&stream[off..off + frame.len()], &frame[..], "frame bytes");
                    next = off + frame.len();
                }
                Ok(None) => break,
                Err(DecodeError::FrameTooLarge { offset, len, limit }) => {
                    assert_eq!(offset as usize, next, "oversized frame offset");
                    assert_eq!(limit, input.limit);
                    assert!(len > limit as u64);
                    let prefix: [u8; 4] = stream[next..next + 4].try_into().unwrap();
                    assert_eq!(u64::from(u32::from_be_bytes(prefix)), len);
                    return;
                }
                Err(e) => panic!("framing error other than FrameTooLarge: {e:?}"),
            }
        }
    }
    match f.finish() {
        Ok(()) => assert_eq!(next, stream.len(), "clean end before the stream's end"),
        Err(DecodeError::Truncated { offset, .. }) => {
            assert!(next < stream.len());
            assert_eq!(offset as usize, stream.len(), "truncation offset");
        }
        Err(e) => panic!("finish error other than Truncated: {e:?}"),
    }
}
