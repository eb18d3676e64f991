//! Reflector recovery rules on paused tokio time, against small hand-written ListerWatchers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use informer::object::{GroupVersionKind, Object, WatchFormat, encode_list_protobuf};
use informer::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, Reflector, ReflectorConfig, ReflectorError,
    ReflectorStore, StoreClosed, WatchChange, WatchOptions, WatchResponse,
};

/// A body the server closes at once, with nothing in it.
struct Closed;

impl Body for Closed {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        None
    }
}

/// Lists one empty page at resourceVersion 5; every watch closes at once.
#[derive(Default)]
struct ClosingServer {
    lists: AtomicU64,
    watches: AtomicU64,
    watch_rvs: Mutex<Vec<String>>,
}

impl ListerWatcher for ClosingServer {
    type Body = Closed;

    async fn list(&self, _opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.lists.fetch_add(1, Ordering::Relaxed);
        Ok(encode_list_protobuf(
            &GroupVersionKind::new("", "v1", "PodList"),
            "5",
            "",
            None,
            &[],
        ))
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<Closed>, ApiError> {
        self.watches.fetch_add(1, Ordering::Relaxed);
        self.watch_rvs
            .lock()
            .unwrap()
            .push(opts.resource_version.clone());
        Ok(WatchResponse {
            format: WatchFormat::Protobuf,
            body: Closed,
        })
    }
}

struct Discard;

impl ReflectorStore for Discard {
    fn replace(&self, _items: Vec<Arc<Object>>, _rv: &str) -> Result<(), StoreClosed> {
        Ok(())
    }
    fn apply(&self, _changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn watches_closed_at_once_back_off_instead_of_spinning() {
    let server = Arc::new(ClosingServer::default());
    let errors = Arc::new(AtomicU64::new(0));
    let seen = errors.clone();
    let reflector = Reflector::new(
        server.clone(),
        Arc::new(Discard),
        ReflectorConfig::default(),
    )
    .with_error_handler(Arc::new(move |e| {
        assert!(matches!(e, ReflectorError::VeryShortWatch { .. }), "{e}");
        seen.fetch_add(1, Ordering::Relaxed);
    }));
    // One minute of (paused, auto-advancing) time.
    let _ = tokio::time::timeout(Duration::from_secs(60), reflector.run()).await;
    let watches = server.watches.load(Ordering::Relaxed);
    // Backoff 0.8 s, 1.6 s, 3.2 s, … (+ up to 100 % jitter): a handful of watches a minute.
    assert!((3..=10).contains(&watches), "{watches} watches in a minute");
    assert_eq!(errors.load(Ordering::Relaxed), watches);
    // Re-watched from the list's resourceVersion, never relisted.
    assert_eq!(server.lists.load(Ordering::Relaxed), 1);
    assert!(server.watch_rvs.lock().unwrap().iter().all(|rv| rv == "5"));
}
