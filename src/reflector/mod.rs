//! The Reflector: lists and watches one resource through a [`ListerWatcher`] and feeds every
//! change into a [`ReflectorStore`] (normally the DeltaFIFO). Upstream:
//! `client-go/tools/cache/reflector.go`, `tools/cache/listwatch.go`, `tools/pager/pager.go`.

mod backoff;
mod lister_watcher;
#[allow(clippy::module_inception)]
mod reflector;

pub use backoff::{Backoff, BackoffConfig};
pub use lister_watcher::{ApiError, Body, ListOptions, ListerWatcher, WatchOptions, WatchResponse};
pub use reflector::{
    Reflector, ReflectorConfig, ReflectorError, ReflectorMetrics, ReflectorStore, StoreClosed,
    WatchChange, WatchErrorHandler, is_expired, is_too_large_resource_version,
};
