//! Watch streams: protobuf frames (4-byte big-endian length + `WatchEvent`) and JSON lines (one
//! `{"type":..,"object":..}` per line), decoded incrementally from chunks cut anywhere.
//! Upstream: `apimachinery/pkg/runtime/serializer/streaming/streaming.go`,
//! `apimachinery/pkg/util/framer/framer.go`, `apimachinery/pkg/apis/meta/v1/watch.go`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use prost::Message;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::DecodeError;
use super::json::{self, Head, offset_in};
use super::meta::{GroupVersionKind, ObjectMeta};
use super::protobuf::{
    decode_bare, decode_envelope, decode_envelope_parts, encode_envelope, encode_envelope_into,
    encode_object_meta, envelope_size,
};
use super::value::{Encoding, MAGIC, Object};
use super::wire::{Reader, WT_LEN, len_field_size, put_bytes, put_str, put_tag, put_varint};
use crate::wire::meta as pb;

/// Default cap on one watch frame or JSON line: 16 MiB, as upstream clients use.
pub const DEFAULT_FRAME_LIMIT: usize = 16 * 1024 * 1024;

/// Default compaction ratio of the watch decoders: an event whose bytes are less than a quarter
/// of the chunk they arrived in is copied out instead of sliced, so a cached object never keeps
/// alive a received buffer more than 4 times its own size. Larger events stay zero-copy.
pub const DEFAULT_COMPACT_RATIO: usize = 4;

/// Most bytes reserved at once for the copied-out start of an incomplete frame: a larger
/// declared length (already checked against the frame limit) grows the buffer as its bytes
/// arrive instead.
const EAGER_RESERVE: usize = 1 << 20;

/// The `type` of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`: only `metadata.resourceVersion` (and annotations) are meaningful.
    Bookmark,
    /// `ERROR`: the object is a `Status`.
    Error,
}

impl WatchEventType {
    /// The wire name, e.g. `ADDED`.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
            WatchEventType::Bookmark => "BOOKMARK",
            WatchEventType::Error => "ERROR",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => WatchEventType::Added,
            "MODIFIED" => WatchEventType::Modified,
            "DELETED" => WatchEventType::Deleted,
            "BOOKMARK" => WatchEventType::Bookmark,
            "ERROR" => WatchEventType::Error,
            _ => return None,
        })
    }
}

/// An API error (`meta.v1.Status`), as returned by failed requests and watch `ERROR` events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiStatus {
    /// HTTP status code, e.g. 410.
    pub code: i32,
    /// `Success` or `Failure`.
    pub status: String,
    /// Machine-readable reason, e.g. `Expired`, `Gone`, `TooManyRequests`, `Timeout`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `details.causes[].reason`, e.g. `ResourceVersionTooLarge`.
    pub cause_reasons: Vec<String>,
    /// `details.retryAfterSeconds`, when the server asked the client to wait.
    pub retry_after_seconds: Option<i32>,
}

impl ApiStatus {
    fn from_pb(s: pb::Status) -> Self {
        let details = s.details.unwrap_or_default();
        ApiStatus {
            code: s.code.unwrap_or_default(),
            status: s.status.unwrap_or_default(),
            reason: s.reason.unwrap_or_default(),
            message: s.message.unwrap_or_default(),
            cause_reasons: details
                .causes
                .into_iter()
                .filter_map(|c| c.reason)
                .collect(),
            retry_after_seconds: details.retry_after_seconds,
        }
    }

    fn to_pb(&self) -> pb::Status {
        pb::Status {
            metadata: Some(pb::ListMeta::default()),
            status: Some(self.status.clone()),
            message: Some(self.message.clone()),
            reason: Some(self.reason.clone()),
            details: Some(pb::StatusDetails {
                causes: self
                    .cause_reasons
                    .iter()
                    .map(|r| pb::StatusCause {
                        reason: Some(r.clone()),
                        ..Default::default()
                    })
                    .collect(),
                retry_after_seconds: self.retry_after_seconds,
                ..Default::default()
            }),
            code: Some(self.code),
        }
    }

    /// Decodes a `Status` in either encoding (protobuf envelope or JSON).
    ///
    /// # Errors
    /// Any decode error of the format.
    pub fn decode(input: &Bytes) -> Result<Self, DecodeError> {
        if input.starts_with(&MAGIC) {
            let env = decode_envelope(input)?;
            Ok(Self::from_pb(pb::Status::decode(env.raw)?))
        } else {
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct Cause {
                reason: Option<String>,
            }
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct Details {
                #[serde(deserialize_with = "json::objects")]
                causes: Vec<Cause>,
                retry_after_seconds: Option<i32>,
            }
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            struct S {
                code: i32,
                status: String,
                reason: String,
                message: String,
                #[serde(deserialize_with = "json::object")]
                details: Option<Details>,
            }
            let json::ObjectOnly(s): json::ObjectOnly<S> =
                serde_json::from_slice(input).map_err(|e| DecodeError::json(&e, 0))?;
            let d = s.details.unwrap_or_default();
            Ok(ApiStatus {
                code: s.code,
                status: s.status,
                reason: s.reason,
                message: s.message,
                cause_reasons: d.causes.into_iter().filter_map(|c| c.reason).collect(),
                retry_after_seconds: d.retry_after_seconds,
            })
        }
    }

    /// Encodes as a protobuf envelope (`v1` `Status`).
    pub fn encode_protobuf(&self) -> Bytes {
        encode_envelope(
            &GroupVersionKind::new("", "v1", "Status"),
            &self.to_pb().encode_to_vec(),
        )
    }

    /// Encodes as a JSON document.
    pub fn encode_json(&self) -> Bytes {
        let mut doc = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": self.status,
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // As the API server writes it: `details` only when there is something in it, and no
        // nulls (clients such as kube-rs reject `"retryAfterSeconds": null`).
        let mut details = serde_json::Map::new();
        if !self.cause_reasons.is_empty() {
            details.insert(
                "causes".into(),
                self.cause_reasons
                    .iter()
                    .map(|r| serde_json::json!({"reason": r}))
                    .collect(),
            );
        }
        if let Some(s) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), s.into());
        }
        if !details.is_empty() {
            doc["details"] = details.into();
        }
        Bytes::from(doc.to_string())
    }
}

/// One decoded watch event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// The object was created (or is part of a streaming initial list).
    Added(Object),
    /// The object changed.
    Modified(Object),
    /// The object was deleted; this is its last state.
    Deleted(Object),
    /// A progress marker: only the object's resourceVersion and annotations are meaningful
    /// (`k8s.io/initial-events-end: "true"` ends a streaming initial list).
    Bookmark(Object),
    /// The server reported an error (e.g. 410 Gone) and will close the stream.
    Error(ApiStatus),
}

impl WatchEvent {
    /// The event's type.
    pub fn event_type(&self) -> WatchEventType {
        match self {
            WatchEvent::Added(_) => WatchEventType::Added,
            WatchEvent::Modified(_) => WatchEventType::Modified,
            WatchEvent::Deleted(_) => WatchEventType::Deleted,
            WatchEvent::Bookmark(_) => WatchEventType::Bookmark,
            WatchEvent::Error(_) => WatchEventType::Error,
        }
    }

    /// The object carried, `None` for errors.
    pub fn object(&self) -> Option<&Object> {
        match self {
            WatchEvent::Added(o)
            | WatchEvent::Modified(o)
            | WatchEvent::Deleted(o)
            | WatchEvent::Bookmark(o) => Some(o),
            WatchEvent::Error(_) => None,
        }
    }

    /// A bookmark at `resource_version` for objects of `gvk` in `encoding`; with
    /// `initial_events_end`, annotated `k8s.io/initial-events-end: "true"`.
    pub fn bookmark(
        gvk: Arc<GroupVersionKind>,
        resource_version: &str,
        initial_events_end: bool,
        encoding: Encoding,
    ) -> Self {
        let mut meta = ObjectMeta {
            resource_version: resource_version.into(),
            ..Default::default()
        };
        if initial_events_end {
            meta.annotations
                .insert("k8s.io/initial-events-end".into(), "true".into());
        }
        let raw = match encoding {
            Encoding::Protobuf => {
                let mut m = Vec::new();
                encode_object_meta(&meta, &mut m);
                let mut out = Vec::with_capacity(m.len() + 4);
                put_bytes(&mut out, 1, &m);
                Bytes::from(out)
            }
            Encoding::Json => {
                let mut doc = serde_json::json!({
                    "kind": gvk.kind,
                    "apiVersion": gvk.api_version(),
                    "metadata": {"resourceVersion": resource_version},
                });
                if initial_events_end {
                    doc["metadata"]["annotations"] =
                        serde_json::json!({"k8s.io/initial-events-end": "true"});
                }
                Bytes::from(doc.to_string())
            }
        };
        WatchEvent::Bookmark(Object::from_parts(gvk, meta, raw, encoding))
    }

    fn from_parts(
        event_type: WatchEventType,
        object: Option<Object>,
        status: Option<ApiStatus>,
        offset: u64,
    ) -> Result<Self, DecodeError> {
        let missing = DecodeError::Missing {
            what: "watch event object",
            offset,
        };
        Ok(match event_type {
            WatchEventType::Error => WatchEvent::Error(status.ok_or(missing)?),
            t => {
                let o = object.ok_or(missing)?;
                match t {
                    WatchEventType::Added => WatchEvent::Added(o),
                    WatchEventType::Modified => WatchEvent::Modified(o),
                    WatchEventType::Deleted => WatchEvent::Deleted(o),
                    _ => WatchEvent::Bookmark(o),
                }
            }
        })
    }
}

/// Reuses one `Arc<GroupVersionKind>` for consecutive objects of the same kind.
#[derive(Debug, Default)]
struct GvkCache(Option<Arc<GroupVersionKind>>);

impl GvkCache {
    /// The shared GVK of `api_version` + `kind`: allocated only when it differs from the last.
    fn get_parts(&mut self, api_version: &str, kind: &str) -> Arc<GroupVersionKind> {
        match &self.0 {
            Some(a) if a.matches_api_version(api_version, kind) => a.clone(),
            _ => {
                let a = Arc::new(GroupVersionKind::from_api_version(api_version, kind));
                self.0 = Some(a.clone());
                a
            }
        }
    }
}

/// Decodes an embedded object (`RawExtension.raw`): a protobuf envelope or a JSON document.
fn decode_embedded(raw: Bytes, gvks: &mut GvkCache) -> Result<Object, DecodeError> {
    if raw.starts_with(&MAGIC) {
        let env = decode_envelope_parts(&raw)?;
        let base = offset_in(&raw, &env.raw);
        let gvk = gvks.get_parts(env.api_version, env.kind);
        decode_bare(gvk, env.raw).map_err(|e| e.shifted(base))
    } else if raw.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        let json::ObjectOnly(head): json::ObjectOnly<Head<'_>> =
            serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?;
        let gvk = gvks.get_parts(
            head.api_version.as_deref().unwrap_or(""),
            head.kind.as_deref().unwrap_or(""),
        );
        let metadata = head.metadata;
        json::decode_with_head(raw.clone(), gvk, metadata, 0)
    } else {
        Err(DecodeError::UnknownEncoding {
            start: raw.iter().take(4).copied().collect(),
        })
    }
}

/// Decodes one protobuf `WatchEvent` message (a frame's payload, no length prefix).
fn decode_pb_event(frame: &Bytes, gvks: &mut GvkCache) -> Result<WatchEvent, DecodeError> {
    let mut r = Reader::new(frame, 0, frame.len(), "WatchEvent");
    let mut event_type = "";
    let mut raw = None;
    while let Some(f) = r.next_field()? {
        match f.number {
            1 => event_type = r.str(&f)?,
            2 => {
                let mut ext = r.message(&f, "RawExtension")?;
                while let Some(g) = ext.next_field()? {
                    if g.number == 1 {
                        raw = Some(ext.bytes(&g)?);
                    } else {
                        ext.skip(&g)?;
                    }
                }
            }
            _ => r.skip(&f)?,
        }
    }
    let t = WatchEventType::parse(event_type).ok_or_else(|| DecodeError::UnknownEventType {
        event_type: event_type.to_owned(),
        offset: 0,
    })?;
    let raw = raw.ok_or(DecodeError::Missing {
        what: "watch event object",
        offset: 0,
    })?;
    let base = offset_in(frame, &raw);
    if t == WatchEventType::Error {
        let status = ApiStatus::decode(&raw).map_err(|e| e.shifted(base))?;
        return WatchEvent::from_parts(t, None, Some(status), 0);
    }
    let obj = decode_embedded(raw, gvks).map_err(|e| e.shifted(base))?;
    WatchEvent::from_parts(t, Some(obj), None, 0)
}

/// Decodes one JSON watch line `{"type":"ADDED","object":{...}}` held in `line`.
fn decode_json_event(line: &Bytes, gvks: &mut GvkCache) -> Result<WatchEvent, DecodeError> {
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(rename = "type", borrow)]
        event_type: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        object: Option<&'a RawValue>,
    }
    let json::ObjectOnly(l): json::ObjectOnly<Line<'_>> =
        serde_json::from_slice(line).map_err(|e| DecodeError::json(&e, 0))?;
    let t = WatchEventType::parse(&l.event_type).ok_or_else(|| DecodeError::UnknownEventType {
        event_type: l.event_type.to_string(),
        offset: 0,
    })?;
    let Some(obj) = l.object.filter(|o| o.get() != "null") else {
        return Err(DecodeError::Missing {
            what: "watch event object",
            offset: 0,
        });
    };
    let raw = line.slice_ref(obj.get().as_bytes());
    let base = offset_in(line, &raw);
    if t == WatchEventType::Error {
        let status = ApiStatus::decode(&raw).map_err(|e| e.shifted(base))?;
        return WatchEvent::from_parts(t, None, Some(status), 0);
    }
    let obj = decode_embedded(raw, gvks).map_err(|e| e.shifted(base))?;
    WatchEvent::from_parts(t, Some(obj), None, 0)
}

/// Queue of received chunks; frames inside one chunk are handed out as zero-copy slices,
/// frames straddling chunks are copied once into an owned buffer.
///
/// The start of a piece that straddles chunks is copied out when the decoder finds it
/// incomplete ([`Chunks::detach`]), so no received chunk is held between reads: the HTTP
/// client can then reuse its read buffer instead of allocating (and the kernel zeroing) a
/// fresh one for every read. Each byte is still copied at most once.
#[derive(Debug, Default)]
struct Chunks {
    /// Bytes of an incomplete piece already copied out of received chunks: logically the
    /// first buffered bytes, before `chunks`.
    partial: BytesMut,
    chunks: VecDeque<Bytes>,
    /// Length of the chunk the front of `chunks` was cut from, as pushed.
    front_chunk_len: usize,
    /// Lengths of the other queued chunks, as pushed (parallel to `chunks[1..]`).
    chunk_lens: VecDeque<usize>,
    buffered: usize,
    /// Stream offset of the first buffered byte.
    offset: u64,
    /// A piece shorter than `1/compact` of its chunk is copied out instead of sliced, so that
    /// a long-lived object never keeps alive a chunk more than `compact` times its size.
    /// 0 = always slice.
    compact: usize,
}

impl Chunks {
    fn new(compact: usize) -> Self {
        Chunks {
            compact,
            ..Chunks::default()
        }
    }

    fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.buffered += chunk.len();
            if self.chunks.is_empty() {
                self.front_chunk_len = chunk.len();
            } else {
                self.chunk_lens.push_back(chunk.len());
            }
            self.chunks.push_back(chunk);
        }
    }

    fn pop_front(&mut self) {
        self.chunks.pop_front();
        self.front_chunk_len = self.chunk_lens.pop_front().unwrap_or(0);
    }

    /// Copies every byte still held in received chunks into `partial` (reserving up to
    /// `expect` bytes for the whole piece, a length already checked against the limit), so
    /// that no received chunk stays referenced.
    fn detach(&mut self, expect: usize) {
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
    fn skip(&mut self, mut n: usize) {
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
    fn peek<const N: usize>(&self) -> Option<[u8; N]> {
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
    fn take(&mut self, n: usize) -> Bytes {
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
            return if self.partial.len() == n {
                std::mem::take(&mut self.partial).freeze()
            } else {
                self.partial.split_to(n).freeze()
            };
        }
        self.buffered -= n;
        self.offset += n as u64;
        let Some(front) = self.chunks.front_mut() else {
            return Bytes::new();
        };
        if front.len() >= n {
            let out = if self.compact > 0 && n.saturating_mul(self.compact) < self.front_chunk_len {
                let copy = Bytes::copy_from_slice(&front[..n]);
                bytes::Buf::advance(front, n);
                copy
            } else {
                front.split_to(n)
            };
            if front.is_empty() {
                self.pop_front();
            }
            return out;
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
        buf.freeze()
    }
}

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
        self.buf.compact = ratio;
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
        let Some(prefix) = self.buf.peek::<4>() else {
            self.buf.detach(4);
            return Ok(None);
        };
        let len = u32::from_be_bytes(prefix) as u64;
        if len > self.limit as u64 {
            return Err(DecodeError::FrameTooLarge {
                offset: self.buf.offset,
                len,
                limit: self.limit,
            });
        }
        let len = len as usize;
        if self.buf.buffered < 4 + len {
            self.buf.detach(4 + len);
            return Ok(None);
        }
        self.buf.skip(4);
        let offset = self.buf.offset;
        Ok(Some((offset, self.buf.take(len))))
    }

    /// Checks that the stream ended on a frame boundary.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when a partial frame is buffered.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.buffered == 0 {
            Ok(())
        } else {
            Err(DecodeError::Truncated {
                offset: self.buf.offset + self.buf.buffered as u64,
                context: "watch frame",
            })
        }
    }
}

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
        self.buf.compact = ratio;
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
            // `scanned_bytes` counts `partial` (always scanned) and the scanned chunks.
            let mut pos = self.scanned_bytes.max(self.buf.partial.len());
            let mut found = None;
            for c in self.buf.chunks.range(self.scanned_chunks..) {
                if let Some(i) = c.iter().position(|&b| b == b'\n') {
                    found = Some(pos + i);
                    break;
                }
                pos += c.len();
            }
            let Some(nl) = found else {
                if self.buf.buffered > self.limit {
                    return Err(DecodeError::FrameTooLarge {
                        offset: self.buf.offset,
                        len: self.buf.buffered as u64,
                        limit: self.limit,
                    });
                }
                // Everything buffered is the start of one line, scanned: copied out of the
                // received chunks (see `Chunks::detach`).
                self.buf.detach(0);
                self.scanned_chunks = self.buf.chunks.len();
                self.scanned_bytes = self.buf.buffered;
                return Ok(None);
            };
            if nl > self.limit {
                return Err(DecodeError::FrameTooLarge {
                    offset: self.buf.offset,
                    len: nl as u64,
                    limit: self.limit,
                });
            }
            let offset = self.buf.offset;
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
        let offset = self.buf.offset;
        let rest = self.buf.take(self.buf.buffered);
        self.scanned_chunks = 0;
        self.scanned_bytes = 0;
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some((offset, rest))
    }
}

/// Which framing a watch stream uses (from the response's `Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFormat {
    /// `application/vnd.kubernetes.protobuf;stream=watch`.
    Protobuf,
    /// `application/json` (one event per line).
    Json,
}

#[derive(Debug)]
enum Framer {
    Protobuf(FrameDecoder),
    Json(LineDecoder),
}

/// Incremental watch-stream decoder: push chunks as they arrive, pull [`WatchEvent`]s.
/// Object bytes are slices of the pushed chunks whenever a frame lies within one chunk and is
/// at least `1/ratio` of it ([`DEFAULT_COMPACT_RATIO`]); smaller or straddling frames are
/// copied once into a buffer of their exact size.
///
/// # Examples
/// ```
/// use bytes::Bytes;
/// use informer::object::{WatchDecoder, WatchFormat, DEFAULT_FRAME_LIMIT};
/// let mut d = WatchDecoder::new(WatchFormat::Json, DEFAULT_FRAME_LIMIT);
/// d.push(Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}}\n"));
/// let ev = d.next_event().unwrap().unwrap();
/// assert_eq!(ev.object().unwrap().name(), "a");
/// ```
#[derive(Debug)]
pub struct WatchDecoder {
    framer: Framer,
    gvks: GvkCache,
}

impl WatchDecoder {
    /// A decoder for `format` with a per-event size limit in bytes ([`DEFAULT_FRAME_LIMIT`]).
    pub fn new(format: WatchFormat, limit: usize) -> Self {
        WatchDecoder {
            framer: match format {
                WatchFormat::Protobuf => Framer::Protobuf(FrameDecoder::new(limit)),
                WatchFormat::Json => Framer::Json(LineDecoder::new(limit)),
            },
            gvks: GvkCache::default(),
        }
    }

    /// Sets the compaction ratio (see [`DEFAULT_COMPACT_RATIO`]); 0 = always zero-copy.
    #[must_use]
    pub fn with_compaction(mut self, ratio: usize) -> Self {
        match &mut self.framer {
            Framer::Protobuf(f) => f.buf.compact = ratio,
            Framer::Json(l) => l.buf.compact = ratio,
        }
        self
    }

    /// Appends a received chunk.
    pub fn push(&mut self, chunk: Bytes) {
        match &mut self.framer {
            Framer::Protobuf(f) => f.push(chunk),
            Framer::Json(l) => l.push(chunk),
        }
    }

    /// The next complete event, or `None` until more bytes arrive.
    ///
    /// # Errors
    /// Framing errors (oversized frame) and event decode errors, with stream offsets. After an
    /// error the stream should be dropped (the reflector relists).
    pub fn next_event(&mut self) -> Result<Option<WatchEvent>, DecodeError> {
        match &mut self.framer {
            Framer::Protobuf(f) => match f.next_frame()? {
                Some((off, frame)) => decode_pb_event(&frame, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
            Framer::Json(l) => match l.next_line()? {
                Some((off, line)) => decode_json_event(&line, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
        }
    }

    /// Ends the stream: returns a last unterminated JSON event if any.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when a partial protobuf frame remains; decode errors of a last
    /// JSON line.
    pub fn finish(&mut self) -> Result<Option<WatchEvent>, DecodeError> {
        match &mut self.framer {
            Framer::Protobuf(f) => f.finish().map(|()| None),
            Framer::Json(l) => match l.finish() {
                Some((off, line)) => decode_json_event(&line, &mut self.gvks)
                    .map(Some)
                    .map_err(|e| e.shifted(off)),
                None => Ok(None),
            },
        }
    }
}

/// Appends one protobuf watch frame for `event` to `out`: 4-byte big-endian length, then
/// `WatchEvent{type, RawExtension{raw}}` where raw is the object's envelope (protobuf objects)
/// or JSON document (JSON objects), or a `Status` envelope for errors.
pub fn encode_watch_frame(event: &WatchEvent, out: &mut Vec<u8>) {
    let event_type = event.event_type().as_str();
    // Protobuf objects are written straight into `out` (their bytes copied once); anything
    // else is encoded first.
    let (api_version, embedded) = match event.object() {
        Some(o) if o.encoding() == Encoding::Protobuf => (o.gvk().api_version(), None),
        Some(o) => (String::new(), Some(o.to_wire())),
        None => match event {
            WatchEvent::Error(s) => (String::new(), Some(s.encode_protobuf())),
            _ => (String::new(), Some(Bytes::new())),
        },
    };
    let raw_len = match (&embedded, event.object()) {
        (Some(b), _) => b.len(),
        (None, Some(o)) => envelope_size(&api_version, &o.gvk().kind, o.raw().len()),
        (None, None) => 0,
    };
    let msg_len = len_field_size(event_type.len()) + len_field_size(len_field_size(raw_len));
    out.reserve(4 + msg_len);
    out.extend_from_slice(&(msg_len as u32).to_be_bytes());
    put_str(out, 1, event_type);
    put_tag(out, 2, WT_LEN);
    put_varint(out, len_field_size(raw_len) as u64);
    put_tag(out, 1, WT_LEN);
    put_varint(out, raw_len as u64);
    match (embedded, event.object()) {
        (Some(b), _) => out.extend_from_slice(&b),
        (None, Some(o)) => encode_envelope_into(&api_version, &o.gvk().kind, o.raw(), out),
        (None, None) => {}
    }
}

/// Appends one JSON watch line for `event` to `out`: `{"type":..,"object":..}\n`. Protobuf
/// objects are written with `apiVersion`, `kind` and `metadata` only (their other fields need
/// the kind's schema to render as JSON).
///
/// # Errors
/// When a protobuf object's metadata cannot be rendered (never for decoded objects).
pub fn encode_watch_line(event: &WatchEvent, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let raw = match event {
        WatchEvent::Error(s) => s.encode_json(),
        other => match other.object() {
            Some(o) => json::object_json(o)?,
            None => Bytes::from_static(b"null"),
        },
    };
    // A pretty-printed document would break line framing: write it compact.
    let raw = if raw.contains(&b'\n') {
        let v: serde_json::Value =
            serde_json::from_slice(&raw).map_err(|e| DecodeError::json(&e, 0))?;
        Bytes::from(v.to_string())
    } else {
        raw
    };
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event.event_type().as_str().as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(&raw);
    out.extend_from_slice(b"}\n");
    Ok(())
}
