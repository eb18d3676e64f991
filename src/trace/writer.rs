//! [`TraceWriter`]: appends records to a trace file, shared by a recording and its watch bodies.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use prost::Message;

use super::error::TraceError;
use super::format::{MAGIC, RecordKind, TRACE_VERSION, TraceRecord};

fn now_nanos(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Writes a trace file; shared by a [`RecordingListerWatcher`](super::RecordingListerWatcher)
/// and its watch bodies. Write errors do not disturb the informer: the first one is kept and
/// returned by [`TraceWriter::finish`].
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    start: Instant,
    out: Mutex<Option<BufWriter<File>>>,
    error: Mutex<Option<std::io::Error>>,
    next_stream: AtomicU64,
    records: AtomicU64,
}

impl TraceWriter {
    /// Creates (truncates) `path` and writes the magic and the `HEADER` record for `resource`.
    ///
    /// # Errors
    /// [`TraceError::Io`].
    pub fn create(path: impl AsRef<Path>, resource: &str) -> Result<Arc<Self>, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io)?);
        out.write_all(MAGIC).map_err(io)?;
        let header = TraceRecord {
            kind: RecordKind::Header as i32,
            version: TRACE_VERSION,
            resource: resource.to_owned(),
            ..Default::default()
        };
        out.write_all(&header.encode_length_delimited_to_vec())
            .map_err(io)?;
        Ok(Arc::new(TraceWriter {
            path,
            start: Instant::now(),
            out: Mutex::new(Some(out)),
            error: Mutex::new(None),
            next_stream: AtomicU64::new(1),
            records: AtomicU64::new(1),
        }))
    }

    /// Appends `record`, stamped with the time since the writer was created.
    pub(super) fn write(&self, mut record: TraceRecord) {
        record.nanos = now_nanos(self.start);
        let bytes = record.encode_length_delimited_to_vec();
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = out.as_mut() {
            if let Err(e) = w.write_all(&bytes) {
                self.error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                *out = None;
            } else {
                self.records.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A new watch stream's number (1, 2, ...), for its records' `stream` field.
    pub(super) fn next_stream(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// Records written so far (the header included).
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Flushes and closes the file; later records are dropped.
    ///
    /// # Errors
    /// [`TraceError::Io`] with the first write error, or the flush error.
    pub fn finish(&self) -> Result<(), TraceError> {
        let out = self
            .out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let first = self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let io = |source| TraceError::Io {
            path: self.path.clone(),
            source,
        };
        if let Some(e) = first {
            return Err(io(e));
        }
        if let Some(mut w) = out {
            w.flush().map_err(io)?;
            w.get_ref().sync_all().map_err(io)?;
        }
        Ok(())
    }
}
