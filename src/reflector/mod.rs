//! The Reflector: lists and watches one resource through a [`ListerWatcher`] and feeds every
//! change into a DeltaFIFO. Upstream: `client-go/tools/cache/reflector.go`.

mod lister_watcher;

pub use lister_watcher::{ApiError, Body, ListOptions, ListerWatcher, WatchOptions, WatchResponse};
