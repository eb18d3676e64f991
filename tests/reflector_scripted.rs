//! Reflector rules checked against a scripted ListerWatcher: each list and watch request takes
//! the next scripted answer, so a test can produce server behaviour the simulator does not
//! (bookmarks older than the last version, ERROR 429 events with Retry-After, …).

mod common;
mod views;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{Call, Mirror, describe};
use informer::object::{
    ApiStatus, Encoding, GroupVersionKind, WatchEvent, WatchFormat, encode_list_protobuf,
    encode_watch_frame,
};
use informer::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, Reflector, ReflectorConfig, WatchOptions,
    WatchResponse,
};
use tokio::time::Instant;

fn pod_gvk() -> Arc<GroupVersionKind> {
    Arc::new(GroupVersionKind::new("", "v1", "Pod"))
}

fn empty_list(rv: &str) -> Result<Bytes, ApiError> {
    Ok(encode_list_protobuf(
        &GroupVersionKind::new("", "v1", "PodList"),
        rv,
        "",
        None,
        &[],
    )
    .unwrap())
}

fn frames(events: &[WatchEvent]) -> Bytes {
    let mut out = Vec::new();
    for e in events {
        encode_watch_frame(e, &mut out).unwrap();
    }
    Bytes::from(out)
}

fn bookmark(rv: &str) -> WatchEvent {
    WatchEvent::bookmark(pod_gvk(), rv, false, Encoding::Protobuf)
}

fn too_many_requests(secs: i32) -> ApiStatus {
    ApiStatus {
        code: 429,
        status: "Failure".into(),
        reason: "TooManyRequests".into(),
        message: "too many requests".into(),
        cause_reasons: Vec::new(),
        retry_after_seconds: Some(secs),
    }
}

/// A scripted watch: these bytes, then either a clean close or a connection that stays open.
#[derive(Clone)]
struct Script {
    bytes: Bytes,
    then_hang: bool,
}

struct ScriptBody {
    bytes: Option<Bytes>,
    then_hang: bool,
}

impl Body for ScriptBody {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        if let Some(b) = self.bytes.take() {
            return Some(Ok(b));
        }
        if self.then_hang {
            std::future::pending::<()>().await;
        }
        None
    }
}

/// Answers lists and watches from queues; an exhausted queue hangs the request forever, so the
/// reflector stops where the script ends. Records when each request came.
#[derive(Default)]
struct Scripted {
    lists: Mutex<VecDeque<Result<Bytes, ApiError>>>,
    watches: Mutex<VecDeque<Result<Script, ApiError>>>,
    log: Mutex<Vec<(Instant, String, String)>>,
}

impl Scripted {
    fn log(&self) -> Vec<(Instant, String, String)> {
        self.log.lock().unwrap().clone()
    }
}

impl ListerWatcher for Scripted {
    type Body = ScriptBody;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.log.lock().unwrap().push((
            Instant::now(),
            "list".into(),
            opts.resource_version.clone().unwrap_or_default(),
        ));
        let next = self.lists.lock().unwrap().pop_front();
        match next {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<ScriptBody>, ApiError> {
        self.log.lock().unwrap().push((
            Instant::now(),
            "watch".into(),
            opts.resource_version.clone(),
        ));
        let next = self.watches.lock().unwrap().pop_front();
        match next {
            Some(Ok(s)) => Ok(WatchResponse {
                format: WatchFormat::Protobuf,
                body: ScriptBody {
                    bytes: Some(s.bytes),
                    then_hang: s.then_hang,
                },
            }),
            Some(Err(e)) => Err(e),
            None => std::future::pending().await,
        }
    }
}

fn config() -> ReflectorConfig {
    ReflectorConfig::default().seed(Some(5))
}

async fn run_for(
    server: Arc<Scripted>,
    config: ReflectorConfig,
    secs: u64,
) -> (Arc<Mirror>, Vec<String>) {
    let mirror = Arc::new(Mirror::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let reflector = Reflector::new(server, mirror.clone(), config)
        .with_error_handler(Arc::new(move |e| seen.lock().unwrap().push(describe(e))));
    let _ = tokio::time::timeout(Duration::from_secs(secs), reflector.run()).await;
    let errors = errors.lock().unwrap().clone();
    (mirror, errors)
}

#[tokio::test(start_paused = true)]
async fn a_bookmark_older_than_the_last_version_is_not_passed_to_the_store() {
    let server = Arc::new(Scripted::default());
    server.lists.lock().unwrap().push_back(empty_list("100"));
    server.watches.lock().unwrap().push_back(Ok(Script {
        bytes: frames(&[bookmark("50")]),
        then_hang: true,
    }));
    let (mirror, _) = run_for(server, config(), 10).await;
    assert_eq!(
        mirror.calls(),
        [Call::Replace {
            rv: "100".into(),
            items: 0
        }]
    );
    mirror.assert_never_back_in_time();
}

#[tokio::test(start_paused = true)]
async fn an_error_event_429_waits_for_retry_after_then_watches_again() {
    let server = Arc::new(Scripted::default());
    server.lists.lock().unwrap().push_back(empty_list("100"));
    server.watches.lock().unwrap().push_back(Ok(Script {
        bytes: frames(&[bookmark("110"), WatchEvent::Error(too_many_requests(7))]),
        then_hang: false,
    }));
    let (_, errors) = run_for(server.clone(), config(), 60).await;
    let log = server.log();
    let kinds: Vec<(&str, &str)> = log
        .iter()
        .map(|(_, k, rv)| (k.as_str(), rv.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("list", "0"), ("watch", "100"), ("watch", "110")],
        "{errors:?}"
    );
    // The first backoff is 0.8–1.6 s: Retry-After (7 s) decides.
    assert_eq!(log[2].0 - log[1].0, Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_answered_429_waits_for_retry_after() {
    let server = Arc::new(Scripted::default());
    server
        .watches
        .lock()
        .unwrap()
        .push_back(Err(ApiError::Status(too_many_requests(9))));
    let (_, errors) = run_for(server.clone(), config().use_watch_list(true), 60).await;
    let log = server.log();
    assert_eq!(log.len(), 2, "{errors:?}");
    assert_eq!((log[1].1.as_str(), log[1].2.as_str()), ("watch", ""));
    assert_eq!(log[1].0 - log[0].0, Duration::from_secs(9));
}
