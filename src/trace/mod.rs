//! Recording and replaying what a [`ListerWatcher`](crate::reflector::ListerWatcher) returned:
//! the stream an informer consumed.
//!
//! [`RecordingListerWatcher`] wraps any `ListerWatcher` and writes every list page, watch
//! opening, watch body chunk, stream end and error, in the order the reflector received them,
//! to a trace file ([`TraceWriter`]). [`ReplayListerWatcher`] serves such a file back to a
//! reflector, and [`expected_state`] computes the objects the recorded stream implies (the
//! state a correct informer's store ends with), so a replay can be verified like a live flood.
//! `informer flood --record FILE` and `informer replay FILE` are built on these.
//!
//! # File format
//!
//! The 8 bytes [`MAGIC`], then length-delimited [`TraceRecord`] messages (protobuf, defined in
//! `proto/trace.proto`; each preceded by its length as a varint). The first record is a
//! `HEADER` with the format version ([`TRACE_VERSION`]). A record longer than
//! [`MAX_RECORD_BYTES`] is rejected before anything is allocated for it; a file cut in the
//! middle of a record is a [`TraceError::Truncated`] (a file cut between records simply ends).

mod error;
mod expected;
mod format;
mod reader;
mod record;
mod recording;
mod replay;
mod writer;

pub use error::TraceError;
pub use expected::{ExpectedState, expected_state, expected_state_default};
pub use format::{MAGIC, MAX_RECORD_BYTES, RecordKind, TRACE_VERSION, TraceRecord, proto};
pub use reader::TraceReader;
pub use recording::{RecordingBody, RecordingListerWatcher};
pub use replay::{ReplayBody, ReplayListerWatcher};
pub use writer::TraceWriter;
