//! [`RecordingListerWatcher`]: any lister-watcher, with what it returns written to a trace.

use std::sync::Arc;

use bytes::Bytes;

use super::format::{RecordKind, TraceRecord};
use super::record::{error_fields, format_name};
use super::writer::TraceWriter;
use crate::reflector::{ApiError, Body, ListOptions, ListerWatcher, WatchOptions, WatchResponse};

/// A [`ListerWatcher`] that passes every call to `inner` and records what came back.
#[derive(Debug)]
pub struct RecordingListerWatcher<L> {
    inner: L,
    writer: Arc<TraceWriter>,
}

impl<L> RecordingListerWatcher<L> {
    /// Records `inner`'s responses to `writer`.
    pub fn new(inner: L, writer: Arc<TraceWriter>) -> Self {
        RecordingListerWatcher { inner, writer }
    }

    /// The trace writer.
    pub fn writer(&self) -> &Arc<TraceWriter> {
        &self.writer
    }
}

/// A watch body that records each chunk, its end or its error as the reflector reads it.
#[derive(Debug)]
pub struct RecordingBody<B> {
    inner: B,
    stream: u64,
    writer: Arc<TraceWriter>,
    done: bool,
}

impl<B: Body> Body for RecordingBody<B> {
    /// The inner body's next chunk, recorded once it arrived. Cancel safe as the inner body:
    /// the record is written in the same poll that returns the chunk.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        // Whether the read completed at its first poll: a reflector gathering the chunks a body
        // holds polls once, so a replay must hand such a record over without waiting.
        let mut polls = 0u32;
        let mut read = std::pin::pin!(self.inner.next_chunk());
        let next = std::future::poll_fn(|cx| {
            polls += 1;
            read.as_mut().poll(cx)
        })
        .await;
        if self.done {
            return next;
        }
        let mut record = TraceRecord {
            stream: self.stream,
            ready: polls == 1,
            ..Default::default()
        };
        match &next {
            Some(Ok(chunk)) => {
                record.kind = RecordKind::WatchChunk as i32;
                record.body = chunk.clone();
            }
            Some(Err(e)) => {
                record.kind = RecordKind::WatchBroken as i32;
                error_fields(&mut record, e);
                self.done = true;
            }
            None => {
                record.kind = RecordKind::WatchEnd as i32;
                self.done = true;
            }
        }
        self.writer.write(record);
        next
    }
}

/// `list_chunks` keeps its default (`list`, whole): a trace records each page as one body,
/// so a recorded informer reads its pages whole.
impl<L: ListerWatcher> ListerWatcher for RecordingListerWatcher<L> {
    type Body = RecordingBody<L::Body>;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let res = self.inner.list(opts).await;
        let mut record = TraceRecord::default();
        match &res {
            Ok(body) => {
                record.kind = RecordKind::ListPage as i32;
                record.body = body.clone();
            }
            Err(e) => {
                record.kind = RecordKind::ListError as i32;
                error_fields(&mut record, e);
            }
        }
        self.writer.write(record);
        res
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<Self::Body>, ApiError> {
        match self.inner.watch(opts).await {
            Ok(resp) => {
                let stream = self.writer.next_stream();
                self.writer.write(TraceRecord {
                    kind: RecordKind::WatchOpen as i32,
                    stream,
                    format: format_name(resp.format).to_owned(),
                    ..Default::default()
                });
                Ok(WatchResponse {
                    format: resp.format,
                    body: RecordingBody {
                        inner: resp.body,
                        stream,
                        writer: self.writer.clone(),
                        done: false,
                    },
                })
            }
            Err(e) => {
                let mut record = TraceRecord {
                    kind: RecordKind::WatchError as i32,
                    ..Default::default()
                };
                error_fields(&mut record, &e);
                self.writer.write(record);
                Err(e)
            }
        }
    }
}
