//! The Reflector: lists and watches one resource through a [`ListerWatcher`] and feeds every
//! change into a [`ReflectorStore`] (normally the DeltaFIFO). Upstream:
//! `client-go/tools/cache/reflector.go`, `tools/cache/listwatch.go`, `tools/pager/pager.go`.
//!
//! - [`ListerWatcher`], [`Body`], [`ApiError`]: the contract with the other side (HTTP or the
//!   simulator);
//! - [`Reflector`]: the list/watch state machine and its recovery rules (the table is on the
//!   type);
//! - [`ReflectorError`]: what went wrong, by phase; [`ReflectorMetrics`]: what it has done;
//! - [`Backoff`]: client-go's exponential backoff with jitter and reset.

mod backoff;
mod config;
mod decode_pool;
mod error;
mod list;
mod list_buffer;
mod lister_watcher;
mod machine;
mod metrics;
mod store;
mod stream;
mod watch;
mod watch_list;

pub use backoff::{Backoff, BackoffConfig};
pub use config::ReflectorConfig;
pub use error::{
    ReflectorError, StoreClosed, is_expired, is_internal_error, is_too_large_resource_version,
    is_too_many_requests,
};
pub use lister_watcher::{
    ApiError, Body, ListBody, ListOptions, ListerWatcher, TransportError, TransportErrorKind,
    WatchOptions, WatchResponse,
};
pub use machine::{Reflector, WatchErrorHandler};
pub use metrics::{ReflectorMetrics, ReflectorStats};
pub use store::{ReflectorStore, WatchChange};
pub use watch_list::INITIAL_EVENTS_END;
