//! Shared pieces of the fuzz targets: how a fuzz input chooses the chunk splits and the limits of
//! a watch stream, how a stream is run through [`WatchDecoder`] under a given split, and the
//! invariants checked on what comes out. The seed generator (`src/bin/gen_seeds.rs`) writes
//! inputs in the same layout ([`StreamInput::encode`]).

#![forbid(unsafe_code)]

use arbitrary::Unstructured;
use bytes::Bytes;
use informer::object::{
    DEFAULT_FRAME_LIMIT, DecodeError, Object, WatchDecoder, WatchEvent, WatchFormat,
};

/// Longest chunk a split plan asks for (longer cuts are taken modulo this plus one).
pub const MAX_CHUNK: usize = 1024;

/// A watch-stream fuzz input: the knobs, then the stream bytes.
///
/// Layout (what [`StreamInput::parse`] reads and [`StreamInput::encode`] writes):
/// `[flags u8][limit u16 LE][n u8][n × cut u16 LE][stream ...]`.
/// - `flags & 0x07`: compaction ratio of the split run (0 = always zero-copy);
/// - `flags & 0x08`: use `limit` (bytes) as the frame/line limit instead of
///   [`DEFAULT_FRAME_LIMIT`], to reach the over-limit paths with small inputs;
/// - the cuts are chunk lengths (each taken modulo `MAX_CHUNK + 1`, so 0 = an empty push),
///   cycled until the stream is consumed; no cuts, or only zero cuts, means one byte per chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInput {
    /// Compaction ratio for the split run.
    pub compaction: usize,
    /// Frame (protobuf) or line (JSON) limit in bytes.
    pub limit: usize,
    /// Chunk lengths, cycled.
    pub cuts: Vec<usize>,
    /// The watch stream.
    pub stream: Bytes,
}

impl StreamInput {
    /// Reads the layout above; missing header bytes read as zeros (never fails).
    pub fn parse(data: &[u8]) -> Self {
        let mut u = Unstructured::new(data);
        let flags: u8 = u.arbitrary().unwrap_or(0);
        let small_limit: u16 = u.arbitrary().unwrap_or(0);
        let n: u8 = u.arbitrary().unwrap_or(0);
        let mut cuts = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let c: u16 = u.arbitrary().unwrap_or(0);
            cuts.push(usize::from(c) % (MAX_CHUNK + 1));
        }
        let stream = Bytes::copy_from_slice(u.take_rest());
        StreamInput {
            compaction: usize::from(flags & 0x07),
            limit: if flags & 0x08 != 0 {
                usize::from(small_limit)
            } else {
                DEFAULT_FRAME_LIMIT
            },
            cuts,
            stream,
        }
    }

    /// Writes the layout above (the seed generator uses this). `limit` is written only when it
    /// fits in 16 bits; otherwise the default limit is selected. At most 255 cuts are kept.
    pub fn encode(&self) -> Vec<u8> {
        let small = u16::try_from(self.limit)
            .ok()
            .filter(|_| self.limit != DEFAULT_FRAME_LIMIT);
        let flags = (self.compaction.min(7) as u8) | if small.is_some() { 0x08 } else { 0 };
        let cuts = &self.cuts[..self.cuts.len().min(255)];
        let mut out = Vec::with_capacity(4 + 2 * cuts.len() + self.stream.len());
        out.push(flags);
        out.extend_from_slice(&small.unwrap_or(0).to_le_bytes());
        out.push(cuts.len() as u8);
        for &c in cuts {
            out.extend_from_slice(&(c.min(MAX_CHUNK) as u16).to_le_bytes());
        }
        out.extend_from_slice(&self.stream);
        out
    }

    /// The stream cut into chunks as the plan says; concatenated they are the stream.
    pub fn chunks(&self) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut pos = 0;
        let byte_at_a_time = self.cuts.iter().all(|&c| c == 0);
        let mut i = 0;
        while pos < self.stream.len() {
            let want = if byte_at_a_time {
                1
            } else {
                let c = self.cuts[i % self.cuts.len()];
                i += 1;
                c
            };
            let end = (pos + want).min(self.stream.len());
            out.push(self.stream.slice(pos..end));
            pos = end;
        }
        debug_assert_eq!(out.iter().map(Bytes::len).sum::<usize>(), self.stream.len());
        out
    }
}

/// What a decoder made of a whole stream: the events decoded, then how the stream ended
/// (`finish()`'s answer, or the first error, after which nothing more is read).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Events in stream order.
    pub events: Vec<WatchEvent>,
    /// `Ok(last)` when the stream ended cleanly (a last unterminated JSON event, if any),
    /// `Err` for the first error.
    pub end: Result<Option<WatchEvent>, DecodeError>,
}

/// Feeds `chunks` to a fresh decoder the way the reflector does (push a chunk, drain every
/// complete event, push the next) and finishes the stream.
pub fn run_watch(
    format: WatchFormat,
    limit: usize,
    compaction: usize,
    chunks: &[Bytes],
) -> Outcome {
    let mut d = WatchDecoder::new(format, limit).with_compaction(compaction);
    let mut events = Vec::new();
    for c in chunks {
        d.push(c.clone());
        loop {
            match d.next_event() {
                Ok(Some(e)) => events.push(e),
                Ok(None) => break,
                Err(e) => {
                    return Outcome {
                        events,
                        end: Err(e),
                    };
                }
            }
        }
    }
    Outcome {
        events,
        end: d.finish(),
    }
}

/// Two errors from the same stream under different splits agree. They must be equal, except
/// that an over-limit JSON line without its newline yet is reported with the number of bytes
/// buffered when the limit was crossed, which depends on where the chunks were cut: for
/// `FrameTooLarge` the offset (where the line starts) and the limit must agree, and the
/// reported length must be over the limit.
pub fn same_error(a: &DecodeError, b: &DecodeError) -> bool {
    match (a, b) {
        (
            DecodeError::FrameTooLarge {
                offset: oa,
                len: la,
                limit: ma,
            },
            DecodeError::FrameTooLarge {
                offset: ob,
                len: lb,
                limit: mb,
            },
        ) => oa == ob && ma == mb && *la > *ma as u64 && *lb > *mb as u64,
        _ => a == b,
    }
}

/// Panics unless two outcomes of the same stream agree: same events, same end.
pub fn assert_same_outcome(what: &str, reference: &Outcome, other: &Outcome) {
    assert_eq!(
        reference.events.len(),
        other.events.len(),
        "{what}: event count differs (reference end {:?}, other end {:?})",
        reference.end,
        other.end
    );
    for (i, (a, b)) in reference.events.iter().zip(&other.events).enumerate() {
        assert_eq!(a, b, "{what}: event {i} differs");
    }
    match (&reference.end, &other.end) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}: last event differs"),
        (Err(a), Err(b)) => assert!(same_error(a, b), "{what}: errors differ: {a:?} vs {b:?}"),
        (a, b) => panic!("{what}: ends differ: {a:?} vs {b:?}"),
    }
}

/// True when `part` lies inside `whole`'s memory (a zero-copy slice of it).
pub fn is_slice_of(whole: &[u8], part: &[u8]) -> bool {
    let w = whole.as_ptr() as usize;
    let p = part.as_ptr() as usize;
    part.is_empty() || (p >= w && p + part.len() <= w + whole.len())
}

/// Panics unless the object's raw bytes are a zero-copy slice of `input`.
pub fn assert_raw_in(input: &[u8], obj: &Object) {
    assert!(
        is_slice_of(input, &obj.raw().unwrap()),
        "object {:?} raw bytes ({} bytes) are not a slice of the input",
        obj.key(),
        obj.raw_len()
    );
}

/// Panics unless the object's raw bytes appear in the last line of `input` (after its last
/// `\n`): the object of an unterminated last line, copied out of the stream (not sliced) when
/// the decoder found the line incomplete. Members may follow `"object"` in that line (unknown
/// ones are ignored, as Go's `encoding/json` does), so the object need not end the stream.
pub fn assert_raw_copied_from_end(input: &[u8], obj: &Object) {
    let raw = obj.raw().unwrap();
    let line = input
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(input, |nl| &input[nl + 1..]);
    let found = line.windows(raw.len().max(1)).any(|w| w == raw);
    assert!(
        found,
        "object {:?} of the unterminated last line ({} bytes) is not in that line",
        obj.key(),
        raw.len()
    );
}

/// `input` decoded by `ListStream`, in three chunks cut at offsets its first two bytes pick:
/// the items it handed out, then those `finish` gave.
pub fn list_streamed(input: &Bytes) -> Result<informer::object::ObjectList, DecodeError> {
    let n = input.len();
    let pick = |i: usize| input.get(i).map_or(0, |&b| usize::from(b) * n / 256);
    let (a, b) = (pick(0).min(pick(1)), pick(0).max(pick(1)));
    let mut stream = informer::object::ListStream::new(1 << 20);
    let mut items = Vec::new();
    for part in [input.slice(..a), input.slice(a..b), input.slice(b..)] {
        items.extend(stream.feed(part)?);
    }
    let mut list = stream.finish()?;
    items.append(&mut list.items);
    list.items = items;
    Ok(list)
}

/// Panics when `ListStream` (see [`list_streamed`]) decodes `input` to a list other than
/// `whole`, what `decode_list` made of it (an error of the stream is always allowed).
pub fn assert_stream_agrees(
    input: &Bytes,
    whole: &Result<informer::object::ObjectList, DecodeError>,
) {
    if let Ok(s) = list_streamed(input) {
        assert_eq!(
            Some(&s),
            whole.as_ref().ok(),
            "the stream decoded another list"
        );
    }
}
