//! [`ReplayListerWatcher`]: a trace file served back to a reflector.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use super::error::TraceError;
use super::format::{RecordKind, TraceRecord};
use super::reader::TraceReader;
use super::record::{error_of, parse_format};
use crate::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, TransportErrorKind, WatchOptions, WatchResponse,
};

/// What the replay hands out next: the reader and one record of lookahead.
#[derive(Debug)]
struct Cursor {
    reader: TraceReader,
    peeked: Option<(u64, TraceRecord)>,
    /// Set when the file is consumed or unreadable.
    end: bool,
    /// The first error met reading the file.
    error: Option<String>,
}

impl Cursor {
    fn peek(&mut self) -> Option<&(u64, TraceRecord)> {
        if self.peeked.is_none() && !self.end {
            match self.reader.next_record() {
                Ok(Some(r)) => self.peeked = Some(r),
                Ok(None) => self.end = true,
                Err(e) => {
                    self.error.get_or_insert(e.to_string());
                    self.end = true;
                }
            }
        }
        self.peeked.as_ref()
    }

    fn take(&mut self) -> Option<(u64, TraceRecord)> {
        self.peek();
        self.peeked.take()
    }
}

#[derive(Debug)]
struct ReplayShared {
    cursor: Mutex<Cursor>,
    exhausted: AtomicBool,
    skipped: AtomicU64,
    /// Skipped records by kind (indexed by the `Kind` number).
    skipped_kinds: [AtomicU64; 9],
    served: AtomicU64,
}

/// A [`ListerWatcher`] serving a trace file back.
///
/// # Replay rules
///
/// The replay answers each request with the next recorded response of the same sort, whatever
/// the request's options (the reflector that recorded the trace asked for what the responses
/// imply, and so does the replaying one). Records a replaying reflector does not ask for (a
/// stream the recording client abandoned, e.g. at its own read deadline on a stalled stream)
/// end the stream they belong to with a timeout error, as the recording client saw it; a list
/// asked for while the trace holds a watch (or the reverse) skips the records in between
/// ([`ReplayListerWatcher::skipped`]). Once the trace is exhausted, further requests and reads
/// wait forever ([`ReplayListerWatcher::is_exhausted`] tells when that point is reached).
/// Timing is not reproduced: records are served as fast as they are asked for.
#[derive(Debug, Clone)]
pub struct ReplayListerWatcher {
    shared: Arc<ReplayShared>,
}

/// The body of a replayed watch stream.
#[derive(Debug)]
pub struct ReplayBody {
    shared: Arc<ReplayShared>,
    stream: u64,
    done: bool,
    /// When the replay opened it (tokio's clock).
    opened: tokio::time::Instant,
    /// When the recording opened it (trace nanoseconds).
    open_nanos: u64,
}

/// What a request gets from the cursor.
enum Next {
    Record(u64, TraceRecord),
    Exhausted,
}

impl ReplayShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next record whose kind is in `kinds`, skipping (and counting) others.
    fn next_of(&self, kinds: &[RecordKind]) -> Next {
        let mut c = self.lock();
        loop {
            match c.take() {
                Some((off, r)) => {
                    if kinds.iter().any(|k| *k as i32 == r.kind) {
                        self.served.fetch_add(1, Ordering::Relaxed);
                        return Next::Record(off, r);
                    }
                    self.skipped.fetch_add(1, Ordering::Relaxed);
                    if let Some(c) = usize::try_from(r.kind)
                        .ok()
                        .and_then(|k| self.skipped_kinds.get(k))
                    {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => {
                    self.exhausted.store(true, Ordering::Release);
                    return Next::Exhausted;
                }
            }
        }
    }
}

impl ReplayListerWatcher {
    /// Serves the trace `reader` is reading.
    pub fn new(reader: TraceReader) -> Self {
        ReplayListerWatcher {
            shared: Arc::new(ReplayShared {
                cursor: Mutex::new(Cursor {
                    reader,
                    peeked: None,
                    end: false,
                    error: None,
                }),
                exhausted: AtomicBool::new(false),
                skipped: AtomicU64::new(0),
                skipped_kinds: Default::default(),
                served: AtomicU64::new(0),
            }),
        }
    }

    /// Whether a request or read found the trace consumed (from then on they wait forever).
    pub fn is_exhausted(&self) -> bool {
        self.shared.exhausted.load(Ordering::Acquire)
    }

    /// Records skipped because the replaying reflector asked for something else.
    pub fn skipped(&self) -> u64 {
        self.shared.skipped.load(Ordering::Relaxed)
    }

    /// Records skipped, by kind (kinds with none left out).
    pub fn skipped_by_kind(&self) -> Vec<(RecordKind, u64)> {
        self.shared
            .skipped_kinds
            .iter()
            .enumerate()
            .filter_map(|(k, c)| {
                let n = c.load(Ordering::Relaxed);
                let kind = RecordKind::try_from(i32::try_from(k).ok()?).ok()?;
                (n > 0).then_some((kind, n))
            })
            .collect()
    }

    /// Records served.
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// The first error met reading the trace (the replay ends there), as text.
    pub fn error(&self) -> Option<String> {
        self.shared.lock().error.clone()
    }
}

/// An error for a record the replay cannot serve; the replay goes on after it.
fn bad_record(e: &TraceError) -> ApiError {
    ApiError::Transport(crate::reflector::TransportError::new(
        TransportErrorKind::Other,
        format!("bad trace record: {e}"),
    ))
}

impl ListerWatcher for ReplayListerWatcher {
    type Body = ReplayBody;

    async fn list(&self, _opts: &ListOptions) -> Result<Bytes, ApiError> {
        match self
            .shared
            .next_of(&[RecordKind::ListPage, RecordKind::ListError])
        {
            Next::Record(_, r) if r.kind == RecordKind::ListPage as i32 => Ok(r.body),
            Next::Record(off, r) => Err(error_of(&r, off).unwrap_or_else(|e| bad_record(&e))),
            Next::Exhausted => std::future::pending().await,
        }
    }

    async fn watch(&self, _opts: &WatchOptions) -> Result<WatchResponse<Self::Body>, ApiError> {
        match self
            .shared
            .next_of(&[RecordKind::WatchOpen, RecordKind::WatchError])
        {
            Next::Record(off, r) if r.kind == RecordKind::WatchOpen as i32 => {
                let format = parse_format(&r.format, off).map_err(|e| bad_record(&e))?;
                Ok(WatchResponse {
                    format,
                    body: ReplayBody {
                        shared: self.shared.clone(),
                        stream: r.stream,
                        done: false,
                        opened: tokio::time::Instant::now(),
                        open_nanos: r.nanos,
                    },
                })
            }
            Next::Record(off, r) => Err(error_of(&r, off).unwrap_or_else(|e| bad_record(&e))),
            Next::Exhausted => std::future::pending().await,
        }
    }
}

impl Body for ReplayBody {
    /// The stream's next recorded chunk. Cancel safe (no await before the record is taken).
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        if self.done {
            return None;
        }
        // Where the stream ends, it stays open as long as it did when recorded (up to 1.5 s),
        // so that the reflector's "very short watch" rule (closed within 1 s with no event →
        // relist) decides as it did then. Nothing is taken before the wait: cancel safe.
        let end_at = {
            let mut c = self.shared.lock();
            match c.peek() {
                Some((_, r))
                    if r.stream == self.stream && r.kind == RecordKind::WatchChunk as i32 =>
                {
                    None
                }
                // An end the recording client read without waiting (while gathering ready
                // chunks) is ready here too, or the replaying reflector would stop short of it.
                Some((_, r)) if r.stream == self.stream && r.ready => None,
                Some((_, r)) => Some(r.nanos),
                None => None,
            }
        };
        if let Some(at) = end_at {
            let recorded = std::time::Duration::from_nanos(at.saturating_sub(self.open_nanos))
                .min(std::time::Duration::from_millis(1500));
            if let Some(wait) = recorded.checked_sub(self.opened.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let next = {
            let mut c = self.shared.lock();
            match c.peek() {
                None => None,
                Some((_, r)) if r.stream == self.stream && is_stream_record(r.kind) => c.take(),
                Some(_) => {
                    // The recording client left this stream here (its read deadline, or a
                    // decision the replaying reflector should take too).
                    self.done = true;
                    return Some(Err(ApiError::Transport(
                        crate::reflector::TransportError::new(
                            TransportErrorKind::Timeout,
                            "recorded stream abandoned by its client",
                        ),
                    )));
                }
            }
        };
        let Some((off, r)) = next else {
            self.shared.exhausted.store(true, Ordering::Release);
            return std::future::pending().await;
        };
        self.shared.served.fetch_add(1, Ordering::Relaxed);
        match RecordKind::try_from(r.kind) {
            Ok(RecordKind::WatchChunk) => Some(Ok(r.body)),
            Ok(RecordKind::WatchEnd) => {
                self.done = true;
                None
            }
            _ => {
                self.done = true;
                Some(Err(error_of(&r, off).unwrap_or_else(|e| bad_record(&e))))
            }
        }
    }
}

fn is_stream_record(kind: i32) -> bool {
    kind == RecordKind::WatchChunk as i32
        || kind == RecordKind::WatchEnd as i32
        || kind == RecordKind::WatchBroken as i32
}
