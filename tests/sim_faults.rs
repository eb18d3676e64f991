//! The simulator's fault switches on their own: what each one puts on the wire (decoded with
//! the real decoders), that one-shot faults fire once and in order, the request log, and that
//! everything stays deterministic for a seed.

mod support;

use std::time::Duration;

use bytes::Bytes;
use informer::object::{DecodeError, WatchDecoder, WatchEvent, WatchFormat, decode_list};
use informer::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, TransportErrorKind, WatchOptions,
    is_too_large_resource_version,
};
use informer::sim::{ErrorAnswer, Fault, SimConfig, SimServer, SimWatch, StreamFault};
use support::templates;

fn sim(template: &str, objects: usize) -> SimServer {
    SimServer::new(
        SimConfig::new(templates(template))
            .seed(3)
            .initial_objects(objects)
            .target_objects(objects),
    )
    .unwrap()
}

fn from(rv: u64) -> WatchOptions {
    WatchOptions {
        resource_version: rv.to_string(),
        ..Default::default()
    }
}

fn list_at(rv: &str) -> ListOptions {
    ListOptions {
        resource_version: Some(rv.to_owned()),
        ..Default::default()
    }
}

fn stream(after_events: u64, action: StreamFault) -> Fault {
    Fault::Stream {
        after_events,
        action,
    }
}

/// Every chunk until the end (or until `limit` chunks), concatenated.
async fn drain(body: &mut SimWatch) -> (Bytes, Option<ApiError>) {
    let mut out = Vec::new();
    loop {
        match body.next_chunk().await {
            Some(Ok(c)) => out.extend_from_slice(&c),
            Some(Err(e)) => return (Bytes::from(out), Some(e)),
            None => return (Bytes::from(out), None),
        }
    }
}

fn decode_all(
    format: WatchFormat,
    bytes: Bytes,
    limit: usize,
) -> Result<Vec<WatchEvent>, DecodeError> {
    let mut d = WatchDecoder::new(format, limit);
    d.push(bytes);
    let mut v = Vec::new();
    while let Some(e) = d.next_event()? {
        v.push(e);
    }
    v.extend(d.finish()?);
    Ok(v)
}

fn changes(events: &[WatchEvent]) -> usize {
    events
        .iter()
        .filter(|e| !matches!(e, WatchEvent::Bookmark(_)))
        .count()
}

#[tokio::test]
async fn list_and_watch_answers_are_upstreams_statuses_and_fire_once_in_order() {
    let sim = sim("etcd", 5);
    let rv = sim.resource_version();
    for answer in [
        ErrorAnswer::Expired,
        ErrorAnswer::TooManyRequests {
            retry_after_seconds: 7,
        },
        ErrorAnswer::InternalError,
        ErrorAnswer::TooLarge,
        ErrorAnswer::TooLargeLegacy,
        ErrorAnswer::ConnectionRefused,
    ] {
        sim.inject(Fault::List(answer));
    }
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(sim.list(&list_at(&rv.to_string())).await.unwrap_err());
    }
    let status = |e: &ApiError| e.status().cloned().unwrap();
    assert_eq!(
        (status(&got[0]).code, status(&got[0]).reason.as_str()),
        (410, "Expired")
    );
    assert!(
        status(&got[0])
            .message
            .starts_with("too old resource version")
    );
    assert_eq!(status(&got[1]).code, 429);
    assert_eq!(status(&got[1]).retry_after_seconds, Some(7));
    assert_eq!(
        (status(&got[2]).code, status(&got[2]).reason.as_str()),
        (500, "InternalError")
    );
    let current = status(&got[3]);
    assert_eq!((current.code, current.reason.as_str()), (504, "Timeout"));
    assert_eq!(current.cause_reasons, ["ResourceVersionTooLarge"]);
    let legacy = status(&got[4]);
    assert_eq!((legacy.code, legacy.reason.as_str()), (504, "Timeout"));
    assert!(legacy.cause_reasons.is_empty());
    assert!(legacy.message.starts_with("Too large resource version"));
    assert!(is_too_large_resource_version(&current) && is_too_large_resource_version(&legacy));
    assert_eq!(
        got[5].transport_kind(),
        Some(TransportErrorKind::ConnectionRefused)
    );
    // Spent: the next list is served.
    let page = decode_list(sim.list(&list_at("0")).await.unwrap()).unwrap();
    assert_eq!(page.items.len(), 5);
    assert_eq!(sim.stats().faults_fired, 6);

    sim.inject(Fault::Watch(ErrorAnswer::InternalError));
    assert_eq!(
        sim.watch(&from(rv))
            .await
            .unwrap_err()
            .status()
            .unwrap()
            .code,
        500
    );
    assert!(sim.watch(&from(rv)).await.is_ok());
    // The request log holds all of it, with the answers.
    let codes: Vec<i32> = sim.requests().iter().map(|r| r.code()).collect();
    assert_eq!(codes, [410, 429, 500, 504, 504, 0, 200, 500, 200]);
    assert_eq!(sim.stats().faults_pending, 0);
}

#[tokio::test(start_paused = true)]
async fn stream_faults_fire_after_exactly_n_events() {
    for (template, format) in [("etcd", WatchFormat::Protobuf), ("json", WatchFormat::Json)] {
        let sim = sim(template, 5);
        let rv = sim.resource_version();
        // Close after 7 of 20 events.
        sim.inject(stream(7, StreamFault::Close));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        sim.step(20).unwrap();
        let (bytes, err) = drain(&mut w).await;
        assert!(err.is_none());
        let ev = decode_all(format, bytes, 1 << 24).unwrap();
        assert_eq!(changes(&ev), 7, "{template}");

        // ERROR 410 after 3.
        sim.inject(stream(3, StreamFault::Expired));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        let (bytes, _) = drain(&mut w).await;
        let ev = decode_all(format, bytes, 1 << 24).unwrap();
        assert_eq!(changes(&ev), 4, "{template}: 3 changes then the error");
        match ev.last().unwrap() {
            WatchEvent::Error(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
            other => panic!("{template}: {other:?}"),
        }

        // Reset after 2: a connection-reset error, then the end.
        sim.inject(stream(2, StreamFault::Reset));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        let (bytes, err) = drain(&mut w).await;
        assert_eq!(
            err.unwrap().transport_kind(),
            Some(TransportErrorKind::ConnectionReset)
        );
        assert_eq!(changes(&decode_all(format, bytes, 1 << 24).unwrap()), 2);
        assert!(w.next_chunk().await.is_none());

        // Corrupt after 1: one good event, then bytes that do not decode.
        sim.inject(stream(1, StreamFault::Corrupt));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        let (bytes, _) = drain(&mut w).await;
        let mut d = WatchDecoder::new(format, 1 << 24);
        d.push(bytes);
        assert!(matches!(
            d.next_event(),
            Ok(Some(
                WatchEvent::Modified(_) | WatchEvent::Added(_) | WatchEvent::Deleted(_)
            ))
        ));
        assert!(d.next_event().is_err(), "{template}: corrupt frame");
        assert_eq!(sim.stats().faults_fired, 4);
    }
}

#[tokio::test(start_paused = true)]
async fn oversized_frames_have_the_asked_size_and_are_valid_bookmarks() {
    for (template, format) in [("etcd", WatchFormat::Protobuf), ("json", WatchFormat::Json)] {
        let sim = sim(template, 3);
        let rv = sim.resource_version();
        sim.inject(stream(0, StreamFault::Oversized { bytes: 300_000 }));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        // The whole frame: the 4-byte prefix and 300 000 bytes, or the line and its "\n".
        let total = match format {
            WatchFormat::Protobuf => 300_004,
            WatchFormat::Json => 300_001,
        };
        let mut bytes = Vec::new();
        let mut chunks = 0;
        while bytes.len() < total {
            bytes.extend_from_slice(&w.next_chunk().await.unwrap().unwrap());
            chunks += 1;
        }
        assert_eq!(bytes.len(), total, "{template}");
        assert!(
            chunks > 4,
            "{template}: streamed in pieces, not built whole"
        );
        let bytes = Bytes::from(bytes);
        let size = match format {
            WatchFormat::Protobuf => u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize,
            WatchFormat::Json => bytes.iter().position(|&b| b == b'\n').unwrap(),
        };
        assert_eq!(size, 300_000, "{template}");
        // Within a large limit it is a bookmark at the current version…
        let ev = decode_all(format, bytes.clone(), 1 << 20).unwrap();
        match &ev[0] {
            WatchEvent::Bookmark(b) => assert_eq!(b.resource_version(), rv.to_string()),
            other => panic!("{template}: {other:?}"),
        }
        // …and over a smaller one, an error.
        assert!(matches!(
            decode_all(format, bytes, 256 << 10),
            Err(DecodeError::FrameTooLarge { .. })
        ));
        // The stream goes on after it.
        sim.step(2).unwrap();
        let mut d = WatchDecoder::new(format, 1 << 20);
        let mut n = 0;
        while n < 2 {
            d.push(w.next_chunk().await.unwrap().unwrap());
            while let Some(e) = d.next_event().unwrap() {
                n += usize::from(!matches!(e, WatchEvent::Bookmark(_)));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_sends_nothing_and_never_ends_even_past_its_timeout() {
    let sim = sim("etcd", 3);
    let rv = sim.resource_version();
    let mut w = sim
        .watch(&WatchOptions {
            timeout: Some(Duration::from_secs(60)),
            ..from(rv)
        })
        .await
        .unwrap()
        .body;
    sim.step(2).unwrap();
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, 1 << 20);
    d.push(w.next_chunk().await.unwrap().unwrap());
    assert!(d.next_event().unwrap().is_some());
    // Injected while the watch is open: it takes the fault on its next look.
    sim.inject(stream(0, StreamFault::Stall));
    sim.step(5).unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(3_600), w.next_chunk()).await;
    assert!(
        waited.is_err(),
        "a stalled stream yields nothing: {waited:?}"
    );
    assert_eq!(sim.stats().faults_fired, 1);
}

#[tokio::test(start_paused = true)]
async fn every_watch_closes_after_n_events_with_the_standing_switch() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(3)
            .initial_objects(10)
            .target_objects(10)
            .watch_close_after(Some(4)),
    )
    .unwrap();
    // Initial events count: a watch from "0" sends 4 of the 10 ADDED and ends.
    let mut w = sim.watch(&from(0)).await.unwrap().body;
    let (bytes, _) = drain(&mut w).await;
    assert_eq!(
        changes(&decode_all(WatchFormat::Protobuf, bytes, 1 << 20).unwrap()),
        4
    );
    let rv = sim.resource_version();
    sim.step(9).unwrap();
    for _ in 0..2 {
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        let (bytes, _) = drain(&mut w).await;
        assert_eq!(
            changes(&decode_all(WatchFormat::Protobuf, bytes, 1 << 20).unwrap()),
            4
        );
    }
}

#[tokio::test]
async fn a_lagging_list_cache_serves_old_state_unless_asked_for_empty() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(3)
            .initial_objects(50)
            .target_objects(50)
            .list_lag(20),
    )
    .unwrap();
    let rv = sim.resource_version();
    let at = |o: ListOptions| {
        let sim = sim.clone();
        async move {
            decode_list(sim.list(&o).await.unwrap())
                .unwrap()
                .resource_version
        }
    };
    let old = (rv - 20).to_string();
    assert_eq!(at(list_at("0")).await, old);
    // Asked for the current version, served 20 older: what a correct server never does.
    assert_eq!(at(list_at(&rv.to_string())).await, old);
    assert_eq!(at(list_at("")).await, rv.to_string());
    assert_eq!(at(ListOptions::default()).await, rv.to_string());
    let exact = ListOptions {
        resource_version_match: Some("Exact".into()),
        ..list_at(&(rv - 5).to_string())
    };
    assert_eq!(at(exact).await, (rv - 5).to_string());
    // The old state is the real one at that version.
    let page = decode_list(sim.list(&list_at("0")).await.unwrap()).unwrap();
    assert_eq!(page.items.len(), 30);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_come_every_interval_even_while_events_flow() {
    let sim = SimServer::new(
        SimConfig::new(templates("etcd"))
            .seed(3)
            .target_objects(20)
            .bookmark_every(0)
            .bookmark_interval(Some(Duration::from_secs(5))),
    )
    .unwrap();
    let rv = sim.resource_version();
    let mut w = sim
        .watch(&WatchOptions {
            allow_watch_bookmarks: true,
            ..from(rv)
        })
        .await
        .unwrap()
        .body;
    let mut d = WatchDecoder::new(WatchFormat::Protobuf, 1 << 20);
    let mut bookmarks = Vec::new();
    // One change a second for 60 s: a bookmark every 5 s among them.
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        sim.step(1).unwrap();
        loop {
            d.push(w.next_chunk().await.unwrap().unwrap());
            let mut got_change = false;
            while let Some(e) = d.next_event().unwrap() {
                match e {
                    WatchEvent::Bookmark(b) => bookmarks.push(b.resource_version().to_owned()),
                    _ => got_change = true,
                }
            }
            if got_change {
                break;
            }
        }
    }
    assert!((11..=12).contains(&bookmarks.len()), "{bookmarks:?}");
}

#[tokio::test]
async fn faults_are_deterministic_for_a_seed() {
    let run = || async {
        let sim = sim("head", 20);
        let rv = sim.resource_version();
        sim.inject(stream(13, StreamFault::Corrupt));
        let mut w = sim.watch(&from(rv)).await.unwrap().body;
        sim.step(40).unwrap();
        drain(&mut w).await.0
    };
    let a = run().await;
    let b = run().await;
    assert!(a.len() > 1_000);
    assert_eq!(a, b);
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_zero_on_an_empty_server_sees_changes_made_before_its_first_read() {
    let sim = SimServer::new(SimConfig::new(templates("etcd")).seed(3)).unwrap();
    let mut w = sim
        .watch(&WatchOptions {
            timeout: Some(Duration::from_secs(60)),
            ..from(0)
        })
        .await
        .unwrap()
        .body;
    sim.step(3).unwrap();
    let (bytes, _) = drain(&mut w).await;
    let ev = decode_all(WatchFormat::Protobuf, bytes, 1 << 20).unwrap();
    assert_eq!(changes(&ev), 3);
}
