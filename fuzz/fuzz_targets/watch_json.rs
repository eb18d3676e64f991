//! The JSON watch-line decoder (`WatchDecoder` over `LineDecoder`) fed arbitrary bytes cut into
//! chunks chosen by the input (see `StreamInput`).
//!
//! Invariants beyond "no panic":
//! - the stream in one chunk and the stream cut as the input says (with the input's compaction
//!   ratio) give the same events and the same end (clean, or the same error);
//! - in the one-chunk, zero-copy run every object's raw bytes are a slice of the stream, except
//!   the object of an unterminated last line: the decoder copies the start of a line it finds
//!   incomplete out of the received chunks (`Chunks::detach`), so that object's bytes are a copy
//!   of the stream's last JSON value;
//! - `LineDecoder` alone hands out lines that are exactly the stream's bytes between newlines,
//!   at the offsets it reports, skipping only blank lines; `finish` returns exactly the rest;
//! - every decoded event re-encoded with `encode_watch_line` decodes to an equal event.

#![no_main]

use bytes::Bytes;
use informer::object::{
    DEFAULT_FRAME_LIMIT, DecodeError, LineDecoder, WatchFormat, encode_watch_line,
};
use informer_fuzz::{
    StreamInput, assert_raw_copied_from_end, assert_raw_in, assert_same_outcome, run_watch,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = StreamInput::parse(data);
    let stream = &input.stream;
    let chunks = input.chunks();

    let whole = run_watch(
        WatchFormat::Json,
        input.limit,
        0,
        std::slice::from_ref(stream),
    );
    for e in &whole.events {
        if let Some(o) = e.object() {
            assert_raw_in(stream, o);
        }
    }
    let mut all = whole.events.clone();
    if let Ok(Some(last)) = &whole.end {
        if let Some(o) = last.object() {
            assert_raw_copied_from_end(stream, o);
        }
        all.push(last.clone());
    }
    let split = run_watch(WatchFormat::Json, input.limit, input.compaction, &chunks);
    assert_same_outcome("JSON watch, split vs whole", &whole, &split);

    check_lines(&input, &chunks);

    // Re-encode what was decoded (the unterminated last line too); it must decode to the same
    // events and end cleanly.
    let mut again = Vec::new();
    for e in &all {
        encode_watch_line(e, &mut again).expect("a decoded event re-encodes as a JSON line");
    }
    let re = run_watch(
        WatchFormat::Json,
        DEFAULT_FRAME_LIMIT,
        0,
        &[Bytes::from(again)],
    );
    assert_eq!(re.end, Ok(None), "re-encoded stream did not end cleanly");
    assert_eq!(re.events, all, "re-encoded events differ");
});

fn blank(b: &[u8]) -> bool {
    b.iter().all(u8::is_ascii_whitespace)
}

/// Line splitting alone: lines are the stream's own bytes at the offsets reported.
fn check_lines(input: &StreamInput, chunks: &[Bytes]) {
    let stream = &input.stream;
    let mut d = LineDecoder::new(input.limit).with_compaction(input.compaction);
    // Stream offset just after the last newline consumed.
    let mut next = 0usize;
    for c in chunks {
        d.push(c.clone());
        loop {
            match d.next_line() {
                Ok(Some((off, line))) => {
                    let off = off as usize;
                    assert!(off >= next, "line offset went back");
                    // Everything skipped is blank lines ending in a newline.
                    assert!(blank(&stream[next..off]), "skipped non-blank bytes");
                    assert!(off == next || stream[off - 1] == b'\n');
                    assert!(!blank(&line), "blank line returned");
                    assert!(line.len() <= input.limit, "line over the limit");
                    assert_eq!(&stream[off..off + line.len()], &line[..], "line bytes");
                    assert!(!line.contains(&b'\n'));
                    assert_eq!(stream.get(off + line.len()), Some(&b'\n'), "line end");
                    next = off + line.len() + 1;
                }
                Ok(None) => break,
                Err(DecodeError::FrameTooLarge { offset, len, limit }) => {
                    let offset = offset as usize;
                    assert!(offset >= next && blank(&stream[next..offset]));
                    assert_eq!(limit, input.limit);
                    assert!(len > limit as u64);
                    // The line really is that long: no newline in its first `limit` bytes.
                    let line_end = stream[offset..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .unwrap_or(stream.len() - offset);
                    assert!(
                        line_end > limit,
                        "line of {line_end} bytes reported over {limit}"
                    );
                    return;
                }
                Err(e) => panic!("line error other than FrameTooLarge: {e:?}"),
            }
        }
    }
    match d.finish() {
        Some((off, rest)) => {
            let off = off as usize;
            assert!(off >= next && blank(&stream[next..off]));
            assert_eq!(&stream[off..], &rest[..], "finish returns the rest");
            assert!(!rest.contains(&b'\n') && !blank(&rest));
        }
        None => assert!(blank(&stream[next..]), "finish dropped non-blank bytes"),
    }
}
