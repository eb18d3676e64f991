//! [`SimWatch`]: one open watch, a [`Body`] yielding chunks of encoded watch events, with the
//! stream faults of [`super::Fault::Stream`] and [`super::SimConfig::watch_close_after`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;
use tokio::time::Instant;

use super::codec::encode_event;
use super::fault::StreamFault;
use super::oversized::{Padded, pad_event};
use super::rng::{SimRng, mix};
use super::shared::Shared;
use super::state::Item;
use super::status;
use crate::object::{
    ApiStatus, DecodeError, Encoding, WatchEvent, WatchEventType, parse_resource_version,
};
use crate::reflector::{ApiError, Body, WatchOptions};

/// Where a watch stands.
enum Phase {
    /// Send this ERROR event, then close.
    Error(ApiStatus),
    /// Sending the state at `cursor` as ADDED events (`items[next..]` left), then (for
    /// `sendInitialEvents`) the `k8s.io/initial-events-end` bookmark.
    Initial {
        items: Arc<[Item]>,
        next: usize,
        end_bookmark: bool,
    },
    /// Sending events after `cursor` from the history log.
    Live,
    /// Sending the padding of an oversized frame (`remaining` bytes of `fill`), then `tail`,
    /// then going on with `resume`.
    Padding {
        remaining: usize,
        fill: &'static [u8],
        tail: Bytes,
        resume: Box<Phase>,
    },
    /// The stream ended.
    Closed,
}

/// What one fill step produced.
enum Fill {
    Data(Bytes),
    Wait,
    Closed,
}

/// What woke a waiting watch.
enum Wake {
    Changed,
    Deadline,
    Bookmark,
}

/// The body of a simulated watch: chunks of protobuf frames or JSON lines, several events per
/// chunk (up to [`super::SimConfig::max_chunk_bytes`]), optionally cut at random points
/// ([`super::SimConfig::split_chunks`]).
///
/// The stream, in order:
/// - an ERROR event with 410 Expired, then the end, if the watch started before the history
///   window or fell behind it (without flow control);
/// - for `resourceVersion` `""`/`"0"` or `send_initial_events`: the current state as ADDED
///   events; with `send_initial_events`, then a BOOKMARK annotated
///   `k8s.io/initial-events-end: "true"`;
/// - every change after the start, in resourceVersion order, each encoded once by the server
///   and shared by all watches; with `allow_watch_bookmarks`, a BOOKMARK after every
///   [`super::SimConfig::bookmark_every`]-th resourceVersion and whenever
///   [`super::SimConfig::bookmark_interval`] has passed since the last one;
/// - the end (`None`) at the watch's `timeout`, or after
///   [`super::SimConfig::watch_close_after`] events.
///
/// An injected [`super::Fault::Stream`] is taken by the first watch that looks for one (each
/// time it is about to send, and when woken by [`super::SimServer::inject`]) and fires after
/// its number of further events: see [`StreamFault`] for what each does.
///
/// Waiting for events does not spin: the watch sleeps on a tokio `watch` channel the server
/// publishes its resourceVersion on once per batch of changes. Dropping the body closes the
/// watch.
pub struct SimWatch {
    shared: Arc<Shared>,
    /// Registered watcher id (for flow control), while live or sending initial events.
    id: Option<u64>,
    phase: Phase,
    /// Every event up to this resourceVersion has been taken.
    cursor: u64,
    /// The resourceVersion the watch started after.
    start: u64,
    bookmarks: bool,
    last_bookmark: Option<u64>,
    last_bookmark_at: Instant,
    deadline: Option<Instant>,
    rx: watch::Receiver<u64>,
    /// Chunks cut but not yet returned.
    pending: VecDeque<Bytes>,
    rng: SimRng,
    scratch: Vec<Bytes>,
    /// ADDED/MODIFIED/DELETED events sent.
    sent: u64,
    /// A stream fault taken from the server: fires once `sent` reaches the first value.
    armed: Option<(u64, StreamFault)>,
    /// `SimConfig::watch_close_after`: the stream ends once `sent` reaches it.
    close_at: Option<u64>,
    /// A stall fault fired: nothing more is ever sent.
    stalled: bool,
}

impl fmt::Debug for SimWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = match &self.phase {
            Phase::Error(_) => "error",
            Phase::Initial { .. } => "initial",
            Phase::Live => "live",
            Phase::Padding { .. } => "padding",
            Phase::Closed => "closed",
        };
        f.debug_struct("SimWatch")
            .field("phase", &phase)
            .field("resource_version", &self.cursor)
            .field("sent", &self.sent)
            .field("armed", &self.armed)
            .field("stalled", &self.stalled)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl SimWatch {
    /// Validates `opts` and positions the watch (see [`crate::reflector::ListerWatcher::watch`]).
    pub(crate) fn open(shared: Arc<Shared>, opts: &WatchOptions) -> Result<Self, ApiError> {
        let cfg = &shared.cfg;
        let bad = |s: ApiStatus| Err(ApiError::Status(s));
        if let Some(s) = status::reject_selectors(
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        ) {
            return bad(s);
        }
        if opts.send_initial_events {
            if !cfg.watch_list {
                return bad(status::invalid(
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate \
                     is enabled",
                ));
            }
            if !opts.allow_watch_bookmarks {
                return bad(status::invalid(
                    "sendInitialEvents is forbidden for watch unless allowWatchBookmarks=true",
                ));
            }
        }
        let requested = match opts.resource_version.as_str() {
            "" | "0" => None,
            s => match parse_resource_version(s) {
                Some(v) => Some(v),
                None => {
                    return bad(status::bad_request(format!(
                        "invalid resource version {s:?}"
                    )));
                }
            },
        };
        let n = shared.watches_opened.fetch_add(1, Ordering::Relaxed);
        let rng = SimRng::new(mix(cfg.seed ^ mix(n.wrapping_add(1))));
        let mut st = shared.lock();
        if let Some(r) = requested.filter(|&r| r > st.rv) {
            return bad(status::too_large(r, st.rv, cfg.too_large_retry_after));
        }
        let (phase, cursor, id) = match requested {
            Some(r) if !opts.send_initial_events => {
                if r < st.compacted {
                    (Phase::Error(status::too_old(r, st.compacted + 1)), r, None)
                } else {
                    (Phase::Live, r, Some(st.register_watcher(r)))
                }
            }
            // "" / "0" / sendInitialEvents: the current state first.
            _ => {
                let rv = st.rv;
                let items = st.current_items();
                (
                    Phase::Initial {
                        items,
                        next: 0,
                        end_bookmark: opts.send_initial_events,
                    },
                    rv,
                    Some(st.register_watcher(rv)),
                )
            }
        };
        drop(st);
        let rx = shared.rv_tx.subscribe();
        let now = Instant::now();
        Ok(SimWatch {
            id,
            phase,
            cursor,
            start: cursor,
            bookmarks: opts.allow_watch_bookmarks,
            last_bookmark: None,
            last_bookmark_at: now,
            deadline: opts.timeout.map(|t| now + t),
            rx,
            pending: VecDeque::new(),
            rng,
            scratch: Vec::new(),
            sent: 0,
            armed: None,
            close_at: cfg.watch_close_after,
            stalled: false,
            shared,
        })
    }

    /// The resourceVersion the watch started after (its events are newer).
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Ends the stream and unregisters the watcher.
    fn close(&mut self) {
        self.phase = Phase::Closed;
        self.unregister();
    }

    fn unregister(&mut self) {
        if let Some(id) = self.id.take() {
            let cfg = &self.shared.cfg;
            let hold = cfg.flow_control.then(|| Instant::now() + cfg.linger);
            self.shared.lock().unregister_watcher(id, hold);
            self.shared.watcher_progressed();
        }
    }

    fn encoding(&self) -> Encoding {
        self.shared.cfg.templates.encoding()
    }

    /// An encoded BOOKMARK at the cursor.
    fn bookmark_at_cursor(&mut self, initial_events_end: bool) -> Result<Bytes, DecodeError> {
        let encoding = self.encoding();
        let ev = WatchEvent::bookmark(
            self.shared.cfg.templates.gvk().clone(),
            &self.cursor.to_string(),
            initial_events_end,
            encoding,
        );
        let mut out = Vec::new();
        encode_event(encoding, &ev, &mut out)?;
        self.last_bookmark = Some(self.cursor);
        self.last_bookmark_at = Instant::now();
        Ok(Bytes::from(out))
    }

    /// Whether the periodic bookmark is due now.
    fn bookmark_due(&self, now: Instant) -> bool {
        match (self.bookmarks, self.shared.cfg.bookmark_interval) {
            (true, Some(every)) => {
                self.last_bookmark != Some(self.cursor) && now >= self.last_bookmark_at + every
            }
            _ => false,
        }
    }

    /// How many more change events may go out before a fault or the standing close fires.
    fn budget(&self) -> Option<u64> {
        let limits = [self.armed.map(|a| a.0), self.close_at];
        limits
            .into_iter()
            .flatten()
            .min()
            .map(|at| at.saturating_sub(self.sent))
    }

    /// Produces the next bytes to send, if any, without waiting; at most `budget` change
    /// events.
    fn fill(&mut self) -> Result<Fill, DecodeError> {
        let encoding = self.encoding();
        let max = self.shared.cfg.max_chunk_bytes;
        let budget = self.budget().unwrap_or(u64::MAX);
        match &mut self.phase {
            Phase::Closed => Ok(Fill::Closed),
            Phase::Error(s) => {
                let mut out = Vec::new();
                encode_event(encoding, &WatchEvent::Error(s.clone()), &mut out)?;
                self.close();
                Ok(Fill::Data(Bytes::from(out)))
            }
            Phase::Padding {
                remaining,
                fill,
                tail,
                resume,
            } => {
                if *remaining == 0 {
                    let tail = std::mem::take(tail);
                    self.phase = std::mem::replace(&mut **resume, Phase::Closed);
                    // Without a tail, go on with the resumed phase now: the caller has already
                    // taken the change notification this fill must answer.
                    return if tail.is_empty() {
                        self.fill()
                    } else {
                        Ok(Fill::Data(tail))
                    };
                }
                let n = (*remaining).min(max).min(fill.len());
                *remaining -= n;
                Ok(Fill::Data(Bytes::from_static(&fill[..n])))
            }
            Phase::Initial {
                items,
                next,
                end_bookmark,
            } => {
                let mut out = Vec::with_capacity(max.min(1 << 20));
                let mut taken = 0u64;
                while *next < items.len() && out.len() < max && taken < budget {
                    let frame = self
                        .shared
                        .codec
                        .wrap(WatchEventType::Added, &items[*next].1.wire);
                    out.extend_from_slice(&frame);
                    *next += 1;
                    taken += 1;
                }
                let done = *next == items.len();
                let end_bookmark = *end_bookmark;
                self.sent += taken;
                if done {
                    if end_bookmark {
                        let b = self.bookmark_at_cursor(true)?;
                        out.extend_from_slice(&b);
                    }
                    self.phase = Phase::Live;
                }
                if out.is_empty() && matches!(self.phase, Phase::Live) {
                    // Nothing initial to send: go live now (the caller has already taken the
                    // change notification this fill must answer).
                    return self.fill_live(budget);
                }
                Ok(if out.is_empty() {
                    Fill::Wait
                } else {
                    Fill::Data(Bytes::from(out))
                })
            }
            Phase::Live => self.fill_live(budget),
        }
    }

    /// Takes encoded events after the cursor from the log (short lock: `Bytes` clones only).
    fn fill_live(&mut self, budget: u64) -> Result<Fill, DecodeError> {
        let shared = self.shared.clone();
        let max = shared.cfg.max_chunk_bytes;
        let mut frames = std::mem::take(&mut self.scratch);
        let mut bytes = 0;
        let start = self.cursor;
        let mut taken = 0u64;
        let mut bookmarked = false;
        {
            let mut st = shared.lock();
            if self.cursor < st.compacted {
                // Fell behind the window: a real server ends such a watch; the client's next
                // watch from here gets 410, which is what we send.
                let s = status::too_old(self.cursor, st.compacted + 1);
                drop(st);
                self.unregister();
                self.phase = Phase::Error(s);
                self.scratch = frames;
                return self.fill();
            }
            let from = (self.cursor - st.compacted) as usize;
            for e in st.log.range(from..) {
                if taken >= budget || bytes >= max {
                    break;
                }
                bytes += e.frame.len();
                frames.push(e.frame.clone());
                taken += 1;
                if let (true, Some(b)) = (self.bookmarks, &e.bookmark) {
                    bytes += b.len();
                    frames.push(b.clone());
                    self.last_bookmark = Some(e.rv);
                    bookmarked = true;
                }
                self.cursor = e.rv;
            }
            if let (true, Some(id)) = (self.cursor != start, self.id) {
                st.advance_watcher(id, self.cursor);
            }
        }
        self.sent += taken;
        let now = Instant::now();
        if bookmarked {
            self.last_bookmark_at = now;
        }
        if self.bookmark_due(now) {
            let b = self.bookmark_at_cursor(false)?;
            bytes += b.len();
            frames.push(b);
        }
        if self.cursor != start {
            shared.watcher_progressed();
        }
        let fill = match frames.len() {
            0 => Fill::Wait,
            1 => Fill::Data(frames.pop().unwrap_or_default()),
            _ => {
                let mut buf = BytesMut::with_capacity(bytes);
                for f in frames.drain(..) {
                    buf.extend_from_slice(&f);
                }
                Fill::Data(buf.freeze())
            }
        };
        frames.clear();
        self.scratch = frames;
        Ok(fill)
    }

    /// Queues bytes to return, cut into random pieces if configured.
    fn push(&mut self, mut data: Bytes) {
        match self.shared.cfg.split_chunks {
            None => self.pending.push_back(data),
            Some(max) => {
                while !data.is_empty() {
                    let n = self.rng.range_inclusive(1, max as u64) as usize;
                    self.pending.push_back(data.split_to(n.min(data.len())));
                }
            }
        }
    }

    /// Takes a waiting stream fault from the server, if this watch has none armed and is
    /// still sending.
    fn take_fault(&mut self) {
        if self.armed.is_some()
            || !matches!(self.phase, Phase::Initial { .. } | Phase::Live)
            || self.shared.stream_faults.load(Ordering::SeqCst) == 0
        {
            return;
        }
        if let Some((after, action)) = self.shared.lock().faults.take_stream() {
            self.shared.stream_faults.fetch_sub(1, Ordering::SeqCst);
            self.armed = Some((self.sent.saturating_add(after), action));
        }
    }

    /// Fires `action`; returns what `next_chunk` must return at once, if anything.
    fn fire(&mut self, action: StreamFault) -> Result<Option<ApiError>, DecodeError> {
        self.shared.lock().faults.fired += 1;
        let encoding = self.encoding();
        match action {
            StreamFault::Close => self.close(),
            StreamFault::Expired => {
                let oldest = self.shared.lock().compacted + 1;
                self.unregister();
                self.phase =
                    Phase::Error(status::too_old(self.cursor, oldest.max(self.cursor + 1)));
            }
            StreamFault::Corrupt => {
                let garbage: &'static [u8] = match encoding {
                    // A frame of 8 bytes that are all varint continuation bytes: no WatchEvent.
                    Encoding::Protobuf => b"\x00\x00\x00\x08\xff\xff\xff\xff\xff\xff\xff\xff",
                    Encoding::Json => b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\xff\xfe}\n",
                };
                self.push(Bytes::from_static(garbage));
                self.close();
            }
            StreamFault::Oversized { bytes } => {
                let event = self.bookmark_at_cursor(false)?;
                let Padded {
                    head,
                    pad: remaining,
                    fill,
                    tail,
                } = pad_event(encoding, event, bytes);
                let resume = std::mem::replace(&mut self.phase, Phase::Closed);
                self.phase = Phase::Padding {
                    remaining,
                    fill,
                    tail,
                    resume: Box::new(resume),
                };
                self.push(head);
            }
            StreamFault::Stall => self.stalled = true,
            StreamFault::Reset => {
                self.close();
                return Ok(Some(ApiError::connection_reset(
                    "read: connection reset by peer (simulated)",
                )));
            }
        }
        Ok(None)
    }

    /// Waits for new events, the deadline, or the periodic bookmark.
    async fn wait(&mut self) -> Wake {
        let far = Duration::from_secs(365 * 24 * 3600);
        let now = Instant::now();
        let deadline = self.deadline.unwrap_or(now + far);
        let bookmark_at = match (self.bookmarks, self.shared.cfg.bookmark_interval) {
            (true, Some(every)) if self.last_bookmark != Some(self.cursor) => {
                Some(self.last_bookmark_at + every)
            }
            _ => None,
        };
        tokio::select! {
            biased;
            r = self.rx.changed() => match r {
                Ok(()) => Wake::Changed,
                // The server is gone (cannot happen while this body holds it).
                Err(_) => Wake::Deadline,
            },
            () = tokio::time::sleep_until(deadline) => Wake::Deadline,
            () = tokio::time::sleep_until(bookmark_at.unwrap_or(now + far)), if bookmark_at.is_some() => {
                Wake::Bookmark
            }
        }
    }
}

impl Body for SimWatch {
    /// The next chunk; `None` once the stream ended (timeout, after an ERROR event, a close
    /// fault); `Some(Err(..))` once for a reset fault; never anything after a stall fault.
    ///
    /// # Cancel safety
    /// Cancel safe: state only changes when a chunk is returned or queued, or a fault is armed
    /// (kept by the watch).
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Some(Ok(c));
            }
            if self.stalled {
                // A stalled connection: no byte, no end. Only dropping the body ends it.
                std::future::pending::<()>().await;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.close();
            }
            self.take_fault();
            if let Some((at, action)) = self.armed
                && self.sent >= at
            {
                self.armed = None;
                match self.fire(action) {
                    Ok(Some(e)) => return Some(Err(e)),
                    Ok(None) => continue,
                    Err(e) => {
                        self.close();
                        return Some(Err(ApiError::Decode(e)));
                    }
                }
            }
            if self.close_at.is_some_and(|c| self.sent >= c)
                && matches!(self.phase, Phase::Initial { .. } | Phase::Live)
            {
                self.close();
            }
            self.rx.borrow_and_update();
            match self.fill() {
                Err(e) => {
                    self.close();
                    return Some(Err(ApiError::Decode(e)));
                }
                Ok(Fill::Data(b)) => self.push(b),
                Ok(Fill::Closed) => return None,
                Ok(Fill::Wait) => {
                    if matches!(self.phase, Phase::Padding { .. }) || self.budget() == Some(0) {
                        // A padding tail, or a fault/close due now: no need to wait.
                        continue;
                    }
                    match self.wait().await {
                        Wake::Changed => {}
                        Wake::Deadline => self.close(),
                        Wake::Bookmark => match self.bookmark_at_cursor(false) {
                            Ok(b) => self.push(b),
                            Err(e) => {
                                self.close();
                                return Some(Err(ApiError::Decode(e)));
                            }
                        },
                    }
                }
            }
        }
    }
}

impl Drop for SimWatch {
    fn drop(&mut self) {
        self.unregister();
    }
}
