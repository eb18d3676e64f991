//! [`SimWatch`]: one open watch, a [`Body`] yielding chunks of encoded watch events.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;
use tokio::time::Instant;

use super::rng::{SimRng, mix};
use super::server::Shared;
use super::state::{Item, encode_event};
use super::status;
use crate::object::{ApiStatus, DecodeError, WatchEvent, WatchEventType, parse_resource_version};
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
    Idle,
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
///   [`super::SimConfig::bookmark_every`]-th resourceVersion and after
///   [`super::SimConfig::bookmark_idle`] without events;
/// - the end (`None`) at the watch's `timeout`.
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
    bookmarks: bool,
    last_bookmark: Option<u64>,
    deadline: Option<Instant>,
    rx: watch::Receiver<u64>,
    /// Chunks cut but not yet returned.
    pending: VecDeque<Bytes>,
    rng: SimRng,
    scratch: Vec<Bytes>,
}

impl fmt::Debug for SimWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = match &self.phase {
            Phase::Error(_) => "error",
            Phase::Initial { .. } => "initial",
            Phase::Live => "live",
            Phase::Closed => "closed",
        };
        f.debug_struct("SimWatch")
            .field("phase", &phase)
            .field("resource_version", &self.cursor)
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
            return bad(status::too_large(r, st.rv));
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
        Ok(SimWatch {
            id,
            phase,
            cursor,
            bookmarks: opts.allow_watch_bookmarks,
            last_bookmark: None,
            deadline: opts.timeout.map(|t| Instant::now() + t),
            rx,
            pending: VecDeque::new(),
            rng,
            scratch: Vec::new(),
            shared,
        })
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

    /// Produces the next bytes to send, if any, without waiting.
    fn fill(&mut self) -> Result<Fill, DecodeError> {
        let encoding = self.shared.cfg.templates.encoding();
        let max = self.shared.cfg.max_chunk_bytes;
        match &mut self.phase {
            Phase::Closed => Ok(Fill::Closed),
            Phase::Error(s) => {
                let mut out = Vec::new();
                encode_event(encoding, &WatchEvent::Error(s.clone()), &mut out)?;
                self.close();
                Ok(Fill::Data(Bytes::from(out)))
            }
            Phase::Initial {
                items,
                next,
                end_bookmark,
            } => {
                let mut out = Vec::with_capacity(max.min(1 << 20));
                while *next < items.len() && out.len() < max {
                    let frame = self
                        .shared
                        .codec
                        .wrap(WatchEventType::Added, &items[*next].1.wire);
                    out.extend_from_slice(&frame);
                    *next += 1;
                }
                if *next == items.len() {
                    if *end_bookmark {
                        let ev = WatchEvent::bookmark(
                            self.shared.cfg.templates.gvk().clone(),
                            &self.cursor.to_string(),
                            true,
                            encoding,
                        );
                        encode_event(encoding, &ev, &mut out)?;
                        self.last_bookmark = Some(self.cursor);
                    }
                    self.phase = Phase::Live;
                }
                Ok(if out.is_empty() {
                    Fill::Wait
                } else {
                    Fill::Data(Bytes::from(out))
                })
            }
            Phase::Live => self.fill_live(),
        }
    }

    /// Takes encoded events after the cursor from the log (short lock: `Bytes` clones only).
    fn fill_live(&mut self) -> Result<Fill, DecodeError> {
        let shared = self.shared.clone();
        let max = shared.cfg.max_chunk_bytes;
        let mut frames = std::mem::take(&mut self.scratch);
        let mut bytes = 0;
        let start = self.cursor;
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
                bytes += e.frame.len();
                frames.push(e.frame.clone());
                if let (true, Some(b)) = (self.bookmarks, &e.bookmark) {
                    bytes += b.len();
                    frames.push(b.clone());
                    self.last_bookmark = Some(e.rv);
                }
                self.cursor = e.rv;
                if bytes >= max {
                    break;
                }
            }
            if let (true, Some(id)) = (self.cursor != start, self.id) {
                st.advance_watcher(id, self.cursor);
            }
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

    /// A bookmark at the cursor after an idle period (once per resourceVersion).
    fn idle_bookmark(&mut self) -> Result<(), DecodeError> {
        if !matches!(self.phase, Phase::Live) || self.last_bookmark == Some(self.cursor) {
            return Ok(());
        }
        let encoding = self.shared.cfg.templates.encoding();
        let ev = WatchEvent::bookmark(
            self.shared.cfg.templates.gvk().clone(),
            &self.cursor.to_string(),
            false,
            encoding,
        );
        let mut out = Vec::new();
        encode_event(encoding, &ev, &mut out)?;
        self.last_bookmark = Some(self.cursor);
        self.push(Bytes::from(out));
        Ok(())
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

    /// Waits for new events, the deadline, or the idle-bookmark timer.
    async fn wait(&mut self) -> Wake {
        let far = Duration::from_secs(365 * 24 * 3600);
        let deadline = self.deadline.unwrap_or_else(|| Instant::now() + far);
        let idle = match (self.bookmarks, self.shared.cfg.bookmark_idle) {
            (true, Some(d)) if self.last_bookmark != Some(self.cursor) => Some(d),
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
            () = tokio::time::sleep(idle.unwrap_or(far)), if idle.is_some() => Wake::Idle,
        }
    }
}

impl Body for SimWatch {
    /// The next chunk; `None` once the stream ended (timeout, or after an ERROR event).
    ///
    /// # Cancel safety
    /// Cancel safe: state only changes when a chunk is returned or queued.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Some(Ok(c));
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
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
                Ok(Fill::Wait) => match self.wait().await {
                    Wake::Changed => {}
                    Wake::Deadline => self.close(),
                    Wake::Idle => {
                        if let Err(e) = self.idle_bookmark() {
                            self.close();
                            return Some(Err(ApiError::Decode(e)));
                        }
                    }
                },
            }
        }
    }
}

impl Drop for SimWatch {
    fn drop(&mut self) {
        self.unregister();
    }
}
