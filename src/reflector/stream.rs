//! [`OpenWatch`]: one open watch stream as the reflector reads it: chunks decoded into events,
//! a read deadline, and how the stream ended, classified the way client-go's
//! `apimachinery/pkg/watch/streamwatcher.go` and `tools/cache/reflector.go` (`handleAnyWatch`)
//! classify it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use tokio::time::Instant;

use crate::object::{DecodeError, WatchDecoder, WatchEvent, WatchFrame};

use super::decode_pool::decode_frames;

use super::lister_watcher::{ApiError, Body, TransportErrorKind, WatchResponse};
use super::metrics::ReflectorMetrics;

/// How a watch stream ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The server closed it (its timeout, EOF); a partial last frame (unexpected EOF) counts as
    /// a close too, as in client-go: nothing of it was applied.
    Closed,
    /// The reflector's own deadline passed first: the connection stalled.
    TimedOut,
    /// The connection was cut (reset, broken pipe, read timeout): client-go treats these as a
    /// closed stream ("probable EOF").
    Cut(ApiError),
    /// Anything else: bytes that do not decode, an oversized frame, another transport error.
    Failed(ApiError),
}

/// What one read produced.
#[derive(Debug)]
pub(crate) enum Received {
    /// One or more decoded events, in stream order.
    Events(Vec<WatchEvent>),
    /// The stream is over.
    Ended(End),
}

/// An open watch: its body, the incremental decoder, when it opened, the read deadline, and how
/// many events it delivered.
pub(crate) struct OpenWatch<B> {
    body: B,
    decoder: WatchDecoder,
    opened: Instant,
    deadline: Instant,
    /// Events decoded so far (bookmarks included, as client-go's `eventCount`).
    pub(crate) events: u64,
    /// The resourceVersion the watch started from.
    pub(crate) resource_version: String,
    /// An end already known, returned by the next read (after events that preceded it).
    ended: Option<End>,
    /// A read of the body already taken (while gathering ready chunks) and not yet handled.
    taken: Option<Option<Result<Bytes, ApiError>>>,
    /// Frames in the last batch: the next batch's vector starts that large.
    last_batch: usize,
    /// Whether large batches are decoded with the helper threads
    /// ([`ReflectorConfig::parallel_decode`](super::ReflectorConfig::parallel_decode)).
    share_decode: bool,
    /// An ERROR event was cut from the stream: no further chunk is read.
    error_framed: bool,
}

/// Most events one read gathers from chunks the body already holds, and most bytes it takes
/// from such chunks: one hand-over downstream per batch, bounded so a flooding body still
/// yields to the deadline check and to the consumer.
const GATHER_EVENTS: usize = 1024;
const GATHER_BYTES: usize = 4 << 20;

impl<B> std::fmt::Debug for OpenWatch<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenWatch")
            .field("resource_version", &self.resource_version)
            .field("events", &self.events)
            .field("opened", &self.opened)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<B: Body> OpenWatch<B> {
    /// Wraps a watch response opened just now from `resource_version`, reading for at most
    /// `timeout`, rejecting frames over `frame_limit` bytes, sharing the decoding of large
    /// batches with helper threads when `share_decode` is set.
    pub(crate) fn new(
        resp: WatchResponse<B>,
        resource_version: String,
        timeout: Duration,
        frame_limit: usize,
        share_decode: bool,
    ) -> Self {
        let opened = Instant::now();
        OpenWatch {
            body: resp.body,
            decoder: WatchDecoder::new(resp.format, frame_limit),
            opened,
            deadline: opened + timeout,
            events: 0,
            resource_version,
            ended: None,
            taken: None,
            last_batch: 0,
            share_decode,
            error_framed: false,
        }
    }

    /// `true` when the watch ended within a second of opening with no event (client-go's
    /// "very short watch").
    pub(crate) fn was_very_short(&self) -> bool {
        self.events == 0 && self.opened.elapsed() < Duration::from_secs(1)
    }

    /// Reads until at least one event is decoded or the stream ends. Once the deadline has
    /// passed it returns [`End::TimedOut`] even if the body has more bytes ready.
    ///
    /// # Cancel safety
    /// Cancel safe if the body's `next_chunk` is (the [`Body`] contract): a chunk is decoded in
    /// the same poll that receives it.
    pub(crate) async fn next(&mut self, metrics: &ReflectorMetrics) -> Received {
        if let Some(end) = self.ended.take() {
            return Received::Ended(end);
        }
        loop {
            // The deadline first: a body that always has bytes ready (a server flooding
            // faster than we read) must not keep a watch, or a streaming list that never
            // reaches its end bookmark, open past it.
            let chunk = match self.taken.take() {
                Some(c) => c,
                None => tokio::select! {
                    biased;
                    () = tokio::time::sleep_until(self.deadline) => {
                        return Received::Ended(End::TimedOut);
                    }
                    c = self.body.next_chunk() => c,
                },
            };
            match chunk {
                Some(Ok(chunk)) => {
                    let mut frames = Vec::with_capacity(self.last_batch);
                    let mut bytes = self.frame(chunk, metrics, &mut frames);
                    // Chunks the body already holds join this batch (one hand-over to the
                    // store instead of one per chunk); anything else a read returns is kept
                    // for the next call. Polling once and dropping a pending read is fine:
                    // `next_chunk` is cancel safe. An ERROR event ends the gathering: the
                    // watch is over once it is handled, so nothing after it is read. A frame
                    // that fails to decode is only found once the batch is decoded: chunks the
                    // body already held are read and dropped with it (a recorded trace marks
                    // reads that did not wait, so a replay reads the same).
                    while self.ended.is_none()
                        && !self.error_framed
                        && frames.len() < GATHER_EVENTS
                        && bytes < GATHER_BYTES
                        && Instant::now() < self.deadline
                    {
                        match self.body.next_chunk().now_or_never() {
                            Some(Some(Ok(chunk))) => {
                                bytes += self.frame(chunk, metrics, &mut frames);
                            }
                            Some(other) => {
                                self.taken = Some(other);
                                break;
                            }
                            None => break,
                        }
                    }
                    let mut events = Vec::new();
                    if let Some(e) = decode_frames(
                        frames,
                        self.decoder.frame_cache(),
                        self.share_decode,
                        &mut events,
                    ) {
                        // Earlier in the stream than any framing error after it.
                        self.ended = Some(End::Failed(ApiError::Decode(e)));
                    }
                    // An ERROR event ends the watch once it is handled: nothing after it is
                    // delivered, however the stream's chunks were cut.
                    match events
                        .iter()
                        .position(|e| matches!(e, WatchEvent::Error(_)))
                    {
                        Some(i) => events.truncate(i + 1),
                        // A frame that looked like an ERROR (its first `type` field) decoded
                        // as another event (a later `type` field wins): gathering resumes.
                        None => self.error_framed = false,
                    }
                    if !events.is_empty() {
                        return Received::Events(self.count(events, metrics));
                    }
                    if let Some(end) = self.ended.take() {
                        return Received::Ended(end);
                    }
                }
                Some(Err(e)) => {
                    let cut = matches!(
                        e.transport_kind(),
                        Some(
                            TransportErrorKind::ConnectionReset
                                | TransportErrorKind::Timeout
                                | TransportErrorKind::ConnectionRefused
                        )
                    );
                    return Received::Ended(if cut { End::Cut(e) } else { End::Failed(e) });
                }
                None => {
                    return match self.decoder.finish() {
                        Ok(Some(ev)) => {
                            self.ended = Some(End::Closed);
                            Received::Events(self.count(vec![ev], metrics))
                        }
                        Ok(None) | Err(DecodeError::Truncated { .. }) => {
                            Received::Ended(End::Closed)
                        }
                        Err(e) => Received::Ended(End::Failed(ApiError::Decode(e))),
                    };
                }
            }
        }
    }

    /// Cuts one received chunk into frames, appending the complete ones to `frames` (a framing
    /// error ends the stream after them). Returns the chunk's length.
    fn frame(
        &mut self,
        chunk: Bytes,
        metrics: &ReflectorMetrics,
        frames: &mut Vec<WatchFrame>,
    ) -> usize {
        let len = chunk.len();
        metrics.watch_bytes.fetch_add(len as u64, Ordering::Relaxed);
        self.decoder.push(chunk);
        loop {
            match self.decoder.next_frame() {
                Ok(Some(f)) => {
                    self.error_framed |= f.is_error();
                    frames.push(f);
                }
                Ok(None) => break,
                Err(e) => {
                    self.ended = Some(End::Failed(ApiError::Decode(e)));
                    break;
                }
            }
        }
        len
    }

    fn count(&mut self, events: Vec<WatchEvent>, metrics: &ReflectorMetrics) -> Vec<WatchEvent> {
        self.last_batch = events.len().min(GATHER_EVENTS);
        self.events += events.len() as u64;
        metrics
            .events
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        events
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::object::{Encoding, GroupVersionKind, WatchFormat, encode_watch_frame};

    /// A body that always has one more bookmark frame ready, never pending: a server sending
    /// faster than the reader reads.
    struct Flood(Bytes);

    impl Body for Flood {
        async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
            Some(Ok(self.0.clone()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_ends_a_stream_that_always_has_bytes_ready() {
        let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
        let mut frame = Vec::new();
        encode_watch_frame(
            &WatchEvent::bookmark(gvk, "7", false, Encoding::Protobuf),
            &mut frame,
        )
        .unwrap();
        let resp = WatchResponse {
            format: WatchFormat::Protobuf,
            body: Flood(Bytes::from(frame)),
        };
        let metrics = ReflectorMetrics::default();
        let mut open = OpenWatch::new(resp, "1".into(), Duration::from_secs(10), 1 << 20, true);
        // Every chunk is ready: one read gathers a bounded batch of them.
        let Received::Events(first) = open.next(&metrics).await else {
            panic!("no events")
        };
        assert_eq!(first.len(), GATHER_EVENTS);
        tokio::time::advance(Duration::from_secs(11)).await;
        // Bytes are still ready, but the deadline has passed.
        assert!(matches!(
            open.next(&metrics).await,
            Received::Ended(End::TimedOut)
        ));
        assert_eq!(open.events, GATHER_EVENTS as u64);
    }
}
