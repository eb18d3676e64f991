//! The trace format (`informer::trace`): a stream recorded through `RecordingListerWatcher`
//! implies the server's state, replays through a fresh informer to that state, and bad or
//! truncated files are typed errors without panics or unbounded allocation.

mod common;
mod support;
mod views;

use std::path::PathBuf;
use std::time::Duration;

use common::{start_informer, wait_converged, wait_until};
use informer::reflector::ReflectorConfig;
use informer::sim::{Fault, FloodMix, SimConfig, SimServer, StreamFault};
use informer::trace::{
    MAGIC, MAX_RECORD_BYTES, RecordKind, RecordingListerWatcher, ReplayListerWatcher, TraceError,
    TraceReader, TraceRecord, TraceWriter, expected_state_default,
};
use prost::Message;
use support::templates;
use views::store_view;

/// A scratch file in a directory of its own (tests run in parallel: none removes a directory
/// another is about to write in), both removed when dropped, so test runs leave nothing behind.
struct Temp(PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

impl std::ops::Deref for Temp {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Temp {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

fn temp(name: &str) -> Temp {
    let dir = std::env::temp_dir().join(format!("informer-trace-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Temp(dir.join(name))
}

fn sim() -> SimServer {
    SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(5)
            .initial_objects(200)
            .mix(FloodMix {
                target_objects: 200,
                create: 20,
                update: 60,
                delete: 20,
            })
            .max_page_size(Some(64)),
    )
    .unwrap()
}

/// Records a flood with a relist in the middle (a stream 410), checks the implied state against
/// the server's truth, then replays the file into a new informer and checks its store and
/// handlers against the same state.
#[tokio::test(start_paused = true)]
async fn record_then_replay_reaches_the_recorded_state() {
    let path = temp("roundtrip.trace");
    let sim = sim();
    let writer = TraceWriter::create(&path, "pods").unwrap();
    let lw = RecordingListerWatcher::new(sim.clone(), writer.clone());
    let cfg = ReflectorConfig::default().seed(Some(3)).page_size(50);
    let (informer, views) = start_informer(lw, cfg.clone(), 2);
    wait_converged(&sim, &informer, &views).await;
    sim.flood(1_000).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    sim.inject(Fault::Stream {
        after_events: 3,
        action: StreamFault::Expired,
    });
    sim.flood(1_000).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    let relists = informer.reflector_metrics().unwrap().snapshot().relists;
    assert!(relists >= 1);
    informer.shutdown();
    writer.finish().unwrap();

    let truth = sim.truth();
    let expected = expected_state_default(&path).unwrap();
    assert_eq!(expected.objects, truth.versions());
    assert_eq!(expected.resource_version, truth.resource_version);
    assert_eq!(expected.lists, 1 + relists);
    // The first flood streamed whole; part of the second arrived through the relist's list.
    assert!(expected.events >= 1_000, "{}", expected.events);

    let replay = ReplayListerWatcher::new(TraceReader::open(&path).unwrap());
    let (informer, views) = start_informer(replay.clone(), cfg, 2);
    wait_until("trace consumed", || replay.is_exhausted()).await;
    wait_until("replayed store", || {
        informer.store().resource_version() >= expected.resource_version
    })
    .await;
    informer.flush();
    assert_eq!(store_view(&informer), expected.objects);
    for v in &views {
        assert_eq!(v.objects(), expected.objects);
    }
    assert_eq!(replay.error(), None);
    assert_eq!(
        informer.reflector_metrics().unwrap().snapshot().relists,
        relists
    );
    informer.shutdown();
    std::fs::remove_file(&path).unwrap();
}

fn header() -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend(
        TraceRecord {
            kind: RecordKind::Header as i32,
            version: 1,
            resource: "pods".into(),
            ..Default::default()
        }
        .encode_length_delimited_to_vec(),
    );
    v
}

fn open_bytes(name: &str, bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError> {
    let path = temp(name);
    std::fs::write(&path, bytes).unwrap();
    let mut r = TraceReader::open(&path)?;
    let mut out = Vec::new();
    while let Some((_, rec)) = r.next_record()? {
        out.push(rec);
    }
    Ok(out)
}

#[test]
fn bad_trace_files_are_typed_errors() {
    assert!(matches!(
        open_bytes("empty", b""),
        Err(TraceError::BadMagic)
    ));
    assert!(matches!(
        open_bytes("magic", b"NOTATRACEFILE"),
        Err(TraceError::BadMagic)
    ));
    assert!(matches!(
        open_bytes("noheader", MAGIC),
        Err(TraceError::MissingHeader)
    ));
    // A record announcing more than the limit is refused before its body is read.
    let mut huge = header();
    prost::encoding::encode_varint(MAX_RECORD_BYTES + 1, &mut huge);
    match open_bytes("huge", &huge) {
        Err(TraceError::RecordTooLarge { len, limit, .. }) => {
            assert_eq!(len, MAX_RECORD_BYTES + 1);
            assert_eq!(limit, MAX_RECORD_BYTES);
        }
        other => panic!("{other:?}"),
    }
    // A length prefix that never ends.
    let mut endless = header();
    endless.extend([0xff; 12]);
    assert!(matches!(
        open_bytes("endless", &endless),
        Err(TraceError::BadLength { .. })
    ));
    // A record cut in the middle, at every point of its body and length.
    let mut full = header();
    let page = TraceRecord {
        kind: RecordKind::ListPage as i32,
        body: vec![7u8; 300].into(),
        ..Default::default()
    }
    .encode_length_delimited_to_vec();
    full.extend(&page);
    assert_eq!(open_bytes("full", &full).unwrap().len(), 1);
    let head = header().len();
    for cut in head + 1..full.len() {
        assert!(
            matches!(
                open_bytes("cut", &full[..cut]),
                Err(TraceError::Truncated { .. })
            ),
            "cut at {cut}"
        );
    }
    // Bytes that are not a record, and a record of an unknown kind.
    let mut garbage = header();
    garbage.extend([3, 0xff, 0xff, 0xff]);
    assert!(matches!(
        open_bytes("garbage", &garbage),
        Err(TraceError::Decode { .. })
    ));
    let mut unknown = header();
    unknown.extend(
        TraceRecord {
            kind: 99,
            ..Default::default()
        }
        .encode_length_delimited_to_vec(),
    );
    assert!(matches!(
        open_bytes("unknown", &unknown),
        Err(TraceError::Invalid { .. })
    ));
    // A list page that is not a list: the expected state cannot be computed.
    let path = temp("badlist");
    std::fs::write(&path, &full).unwrap();
    assert!(matches!(
        expected_state_default(&path),
        Err(TraceError::Invalid { .. })
    ));
}

/// A replay of a trace whose last stream was cut (the recording stopped mid-stream) serves
/// what exists and then waits; it never errors or panics.
#[tokio::test(start_paused = true)]
async fn replay_of_a_cut_trace_stops_at_its_end() {
    let path = temp("cut.trace");
    let sim = sim();
    let writer = TraceWriter::create(&path, "pods").unwrap();
    let (informer, views) = start_informer(
        RecordingListerWatcher::new(sim.clone(), writer.clone()),
        ReflectorConfig::default().seed(Some(1)),
        1,
    );
    wait_converged(&sim, &informer, &views).await;
    sim.flood(500).await.unwrap();
    wait_converged(&sim, &informer, &views).await;
    informer.shutdown();
    writer.finish().unwrap();
    let expected = expected_state_default(&path).unwrap();
    let replay = ReplayListerWatcher::new(TraceReader::open(&path).unwrap());
    let (informer, _views) = start_informer(replay.clone(), ReflectorConfig::default(), 1);
    wait_until("trace consumed", || replay.is_exhausted()).await;
    wait_until("store", || {
        informer.store().resource_version() >= expected.resource_version
    })
    .await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(store_view(&informer), expected.objects);
    informer.shutdown();
}

/// A body that already holds all its chunks, then ends: every read completes at once.
struct HeldChunks(std::collections::VecDeque<bytes::Bytes>);

impl informer::reflector::Body for HeldChunks {
    async fn next_chunk(&mut self) -> Option<Result<bytes::Bytes, informer::reflector::ApiError>> {
        self.0.pop_front().map(Ok)
    }
}

struct HeldLw;

impl informer::reflector::ListerWatcher for HeldLw {
    type Body = HeldChunks;

    async fn list(
        &self,
        _: &informer::reflector::ListOptions,
    ) -> Result<bytes::Bytes, informer::reflector::ApiError> {
        unreachable!("the test only watches")
    }

    async fn watch(
        &self,
        _: &informer::reflector::WatchOptions,
    ) -> Result<informer::reflector::WatchResponse<HeldChunks>, informer::reflector::ApiError> {
        Ok(informer::reflector::WatchResponse {
            format: informer::object::WatchFormat::Json,
            body: HeldChunks(
                [b"a\n".as_slice(), b"b\n"]
                    .map(bytes::Bytes::from_static)
                    .into(),
            ),
        })
    }
}

/// A reflector gathering the chunks a body already holds polls each read once; when it read a
/// stream's end that way, the replay must hand the end over at once too (not wait for the time
/// it was recorded at), or the replaying reflector stops short of it and the two diverge. The
/// trace's clock is real time, the replay's paused: the end, recorded some nanoseconds after the
/// stream opened, would be waited for.
#[tokio::test(start_paused = true)]
async fn a_stream_end_read_without_waiting_replays_without_waiting() {
    use futures_util::FutureExt;
    use informer::reflector::{Body, ListerWatcher, WatchOptions};

    let path = temp("ready.trace");
    let writer = TraceWriter::create(&path, "pods").unwrap();
    let lw = RecordingListerWatcher::new(HeldLw, writer.clone());
    let mut body = lw.watch(&WatchOptions::default()).await.unwrap().body;
    assert!(body.next_chunk().await.unwrap().is_ok());
    assert!(body.next_chunk().now_or_never().unwrap().is_some());
    assert!(body.next_chunk().now_or_never().unwrap().is_none());
    drop(body);
    writer.finish().unwrap();

    let mut reader = TraceReader::open(&path).unwrap();
    let mut records = Vec::new();
    while let Some((_, r)) = reader.next_record().unwrap() {
        records.push(r);
    }
    let end = records
        .iter()
        .find(|r| r.kind == RecordKind::WatchEnd as i32)
        .expect("the end is recorded");
    assert!(end.ready, "{end:?}");

    let replay = ReplayListerWatcher::new(TraceReader::open(&path).unwrap());
    let mut body = replay.watch(&WatchOptions::default()).await.unwrap().body;
    assert_eq!(&body.next_chunk().await.unwrap().unwrap()[..], b"a\n");
    assert_eq!(
        &body.next_chunk().now_or_never().unwrap().unwrap().unwrap()[..],
        b"b\n"
    );
    assert!(
        matches!(body.next_chunk().now_or_never(), Some(None)),
        "the end is ready at once"
    );
}
