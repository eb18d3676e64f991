//! The simulated API server: resourceVersions, list pagination and expiry, watches from every
//! kind of starting point, bookmarks, streaming initial lists, both encodings, flow control and
//! determinism. Watch streams are decoded with the real `WatchDecoder`, lists with
//! `decode_list`.

mod views;

use std::collections::BTreeMap;
use std::time::Duration;

use informer::object::{
    DEFAULT_FRAME_LIMIT, ObjectKey, Str, WatchDecoder, WatchEvent, decode_list,
};
use informer::reflector::{ApiError, Body, ListOptions, ListerWatcher, WatchOptions};
use informer::sim::{SimConfig, SimServer, SimWatch, Templates, default_fixtures_dir};
use views::{ViewMap, items_view, version};

fn head() -> Templates {
    Templates::head_pod(&default_fixtures_dir().unwrap()).unwrap()
}
fn etcd() -> Templates {
    Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap()
}
fn json() -> Templates {
    Templates::openshift_json(&default_fixtures_dir().unwrap()).unwrap()
}
fn all_templates() -> Vec<(&'static str, Templates)> {
    vec![
        ("head-pb", head()),
        ("etcd-pb", etcd()),
        (
            "both-pb",
            Templates::protobuf_pods(&default_fixtures_dir().unwrap()).unwrap(),
        ),
        ("openshift-json", json()),
    ]
}

/// A watch body and a decoder: yields decoded events.
struct Reader {
    body: SimWatch,
    decoder: WatchDecoder,
    chunks: usize,
}

impl Reader {
    async fn open(sim: &SimServer, opts: WatchOptions) -> Reader {
        let resp = sim.watch(&opts).await.unwrap();
        assert_eq!(resp.format, sim.watch_format());
        Reader {
            body: resp.body,
            decoder: WatchDecoder::new(resp.format, DEFAULT_FRAME_LIMIT),
            chunks: 0,
        }
    }

    /// The next event; `None` when the stream ended.
    async fn next(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.decoder.next_event().unwrap() {
                return Some(e);
            }
            match self.body.next_chunk().await {
                Some(chunk) => {
                    self.chunks += 1;
                    self.decoder.push(chunk.unwrap());
                }
                None => {
                    self.decoder.finish().unwrap();
                    return None;
                }
            }
        }
    }

    async fn take(&mut self, n: usize) -> Vec<WatchEvent> {
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            v.push(self.next().await.expect("stream ended early"));
        }
        v
    }

    /// The next `n` change events, skipping bookmarks.
    async fn changes(&mut self, n: usize) -> Vec<WatchEvent> {
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            let e = self.next().await.expect("stream ended early");
            if !matches!(e, WatchEvent::Bookmark(_)) {
                v.push(e);
            }
        }
        v
    }
}

fn watch_from(rv: u64) -> WatchOptions {
    WatchOptions {
        resource_version: rv.to_string(),
        ..Default::default()
    }
}

fn rv_of(e: &WatchEvent) -> u64 {
    e.object().unwrap().meta().resource_version_u64().unwrap()
}

fn api_status(e: ApiError) -> informer::object::ApiStatus {
    match e {
        ApiError::Status(s) => s,
        other => panic!("expected a Status, got {other:?}"),
    }
}

/// Applies change events to a view.
fn apply(view: &mut ViewMap, events: &[WatchEvent]) {
    for e in events {
        let o = e.object().unwrap();
        let v = version(o);
        match e {
            WatchEvent::Added(_) | WatchEvent::Modified(_) => {
                view.insert(o.key(), v);
            }
            WatchEvent::Deleted(_) => {
                view.remove(&o.key());
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn resource_versions_strictly_increase_and_watch_replays_to_truth() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(SimConfig::new(t).seed(1).target_objects(40)).unwrap();
        let start = sim.resource_version();
        let mut r = Reader::open(&sim, watch_from(start)).await;
        let n = if what == "openshift-json" { 300 } else { 1500 };
        let end = sim.step(n).unwrap();
        assert_eq!(end, start + n, "{what}: one resourceVersion per change");
        let events = r.take(n as usize).await;
        let rvs: Vec<u64> = events.iter().map(rv_of).collect();
        assert!(
            rvs.windows(2).all(|w| w[1] > w[0]),
            "{what}: strictly increasing"
        );
        assert_eq!(rvs, (start + 1..=end).collect::<Vec<_>>(), "{what}");
        let kinds = |f: fn(&WatchEvent) -> bool| events.iter().filter(|e| f(e)).count();
        assert!(kinds(|e| matches!(e, WatchEvent::Added(_))) >= 40, "{what}");
        assert!(
            kinds(|e| matches!(e, WatchEvent::Modified(_))) > 0,
            "{what}"
        );
        assert!(kinds(|e| matches!(e, WatchEvent::Deleted(_))) > 0, "{what}");
        let mut view = BTreeMap::new();
        apply(&mut view, &events);
        let truth = sim.truth();
        assert_eq!(truth.resource_version, end);
        assert_eq!(view, truth.versions(), "{what}: replayed watch = truth");
        // Objects keep their template's kind and non-metadata bytes are from a real fixture.
        let any = truth.objects.values().next().unwrap();
        assert_eq!(any.gvk().kind, "Pod");
        assert!(any.raw_len() > 1000, "{what}: real-sized objects");
        // Count stays around the target.
        assert!(
            (40..=44).contains(&truth.objects.len()),
            "{what}: {}",
            truth.objects.len()
        );
    }
}

#[tokio::test]
async fn create_update_delete_arrive_in_order_with_their_content() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(SimConfig::new(t).seed(2).initial_objects(5)).unwrap();
        let rv0 = sim.resource_version();
        let mut r = Reader::open(&sim, watch_from(rv0)).await;
        let a = sim.create("ns-x", "a").unwrap();
        let key = ObjectKey::new("ns-x", "a");
        assert!(matches!(
            sim.create("ns-x", "a"),
            Err(informer::sim::SimError::AlreadyExists(_))
        ));
        let a2 = sim
            .update_with(&key, |m| {
                m.labels.insert("team".into(), "blue".into());
            })
            .unwrap();
        let a3 = sim.delete(&key).unwrap();
        assert!(sim.get(&key).is_none());
        assert!(matches!(
            sim.delete(&key),
            Err(informer::sim::SimError::NotFound(_))
        ));
        let ev = r.take(3).await;
        match (&ev[0], &ev[1], &ev[2]) {
            (WatchEvent::Added(x), WatchEvent::Modified(y), WatchEvent::Deleted(z)) => {
                assert_eq!(x.meta(), a.meta(), "{what}");
                assert_eq!(x.resource_version(), (rv0 + 1).to_string());
                assert_eq!(y.meta().labels().get("team").unwrap(), "blue");
                assert_eq!(y.meta(), a2.meta());
                assert_eq!(y.meta().generation(), Some(2));
                assert_eq!(y.uid(), x.uid());
                // DELETED: the last state, at the deletion's resourceVersion.
                assert_eq!(z.meta(), a3.meta());
                assert_eq!(z.resource_version(), (rv0 + 3).to_string());
                assert_eq!(z.meta().labels().get("team").unwrap(), "blue");
                if x.encoding() == informer::object::Encoding::Protobuf {
                    let pod: k8s_pb::api::core::v1::Pod = y.decode().unwrap();
                    assert_eq!(pod.metadata.unwrap().name.as_deref(), Some("a"));
                    assert!(pod.spec.is_some(), "{what}: spec kept from the fixture");
                } else {
                    let v = y.to_json_value().unwrap();
                    assert_eq!(v["metadata"]["name"], "a");
                    assert!(v["spec"]["containers"].is_array(), "{what}");
                }
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn list_pages_are_one_consistent_snapshot() {
    for (what, t) in all_templates() {
        let n = if what == "openshift-json" { 120 } else { 1234 };
        let sim = SimServer::new(
            SimConfig::new(t)
                .seed(3)
                .initial_objects(n)
                .target_objects(n),
        )
        .unwrap();
        let truth = sim.truth();
        let mut opts = ListOptions {
            resource_version: Some("0".into()),
            limit: Some(100),
            ..Default::default()
        };
        let mut seen = BTreeMap::new();
        let mut pages = 0;
        loop {
            let list = decode_list(sim.list(&opts).await.unwrap()).unwrap();
            pages += 1;
            assert_eq!(list.list_gvk.kind, "PodList");
            assert_eq!(list.resource_version, truth.resource_version.to_string());
            for o in &list.items {
                let prev = seen.insert(o.key(), version(o));
                assert!(prev.is_none(), "{what}: {} listed twice", o.key());
            }
            if list.continue_token.is_empty() {
                assert_eq!(list.remaining_item_count, None);
                break;
            }
            assert_eq!(list.items.len(), 100, "{what}");
            assert_eq!(
                list.remaining_item_count,
                Some((n - seen.len()) as i64),
                "{what}"
            );
            // The server moves on between pages; the list must not.
            sim.step(37).unwrap();
            opts = ListOptions {
                limit: Some(100),
                continue_token: Some(list.continue_token),
                ..Default::default()
            };
        }
        assert_eq!(pages, n.div_ceil(100), "{what}");
        assert_eq!(
            seen,
            truth.versions(),
            "{what}: every object once, at the list's rv"
        );
        // A continue token with an explicit resourceVersion is a 400, as upstream.
        let l = decode_list(
            sim.list(&ListOptions {
                limit: Some(10),
                ..Default::default()
            })
            .await
            .unwrap(),
        )
        .unwrap();
        let e = sim
            .list(&ListOptions {
                resource_version: Some("5".into()),
                continue_token: Some(l.continue_token),
                limit: Some(10),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(api_status(e).code, 400);
    }
}

#[tokio::test]
async fn unpaginated_and_exact_lists() {
    let sim = SimServer::new(SimConfig::new(etcd()).seed(4).initial_objects(50)).unwrap();
    let then = sim.truth();
    sim.step(200).unwrap();
    let now = sim.truth();
    let all = decode_list(sim.list(&ListOptions::default()).await.unwrap()).unwrap();
    assert_eq!(all.items.len(), now.objects.len());
    assert_eq!(all.continue_token, "");
    assert_eq!(all.resource_version, now.resource_version.to_string());
    // Exact at an older resourceVersion is rebuilt from history.
    let exact = decode_list(
        sim.list(&ListOptions {
            resource_version: Some(then.resource_version.to_string()),
            resource_version_match: Some("Exact".into()),
            ..Default::default()
        })
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(items_view(&exact.items), then.versions());
    assert_eq!(exact.resource_version, then.resource_version.to_string());
    // NotOlderThan an old version: the current state.
    let newer = decode_list(
        sim.list(&ListOptions {
            resource_version: Some(then.resource_version.to_string()),
            resource_version_match: Some("NotOlderThan".into()),
            ..Default::default()
        })
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(newer.resource_version, now.resource_version.to_string());
}

#[tokio::test]
async fn too_large_resource_version_is_504_with_the_cause() {
    let sim = SimServer::new(SimConfig::new(etcd()).initial_objects(3)).unwrap();
    let big = (sim.resource_version() + 10).to_string();
    let s = api_status(
        sim.list(&ListOptions {
            resource_version: Some(big.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
    assert_eq!(s.cause_reasons, ["ResourceVersionTooLarge"]);
    assert!(s.message.starts_with("Too large resource version"));
    let s = api_status(
        sim.watch(&watch_from(big.parse().unwrap()))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.cause_reasons, ["ResourceVersionTooLarge"]);
}

#[tokio::test]
async fn expired_continue_token_is_410() {
    let sim = SimServer::new(
        SimConfig::new(etcd())
            .initial_objects(20)
            .target_objects(20)
            .history_window(10),
    )
    .unwrap();
    let first = decode_list(
        sim.list(&ListOptions {
            limit: Some(5),
            ..Default::default()
        })
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(first.items.len(), 5);
    assert_eq!(first.remaining_item_count, Some(15));
    sim.step(50).unwrap();
    let s = api_status(
        sim.list(&ListOptions {
            limit: Some(5),
            continue_token: Some(first.continue_token),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(
        s.message
            .starts_with("The provided continue parameter is too old")
    );
    // Exact at a compacted resourceVersion: 410 too.
    let s = api_status(
        sim.list(&ListOptions {
            resource_version: Some(first.resource_version),
            resource_version_match: Some("Exact".into()),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );
    assert_eq!(s.code, 410);
}

#[tokio::test(start_paused = true)]
async fn continue_tokens_expire_after_their_ttl() {
    let sim = SimServer::new(
        SimConfig::new(etcd())
            .initial_objects(20)
            .continue_ttl(Some(Duration::from_secs(30))),
    )
    .unwrap();
    let page = |token: String| ListOptions {
        limit: Some(5),
        continue_token: Some(token),
        ..Default::default()
    };
    let first = decode_list(sim.list(&page(String::new())).await.unwrap()).unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let second = decode_list(sim.list(&page(first.continue_token)).await.unwrap()).unwrap();
    assert_eq!(second.items.len(), 5);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let s = api_status(sim.list(&page(second.continue_token)).await.unwrap_err());
    assert_eq!(s.code, 410);
}

#[tokio::test]
async fn watch_from_before_the_window_gets_an_error_410_event() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(SimConfig::new(t).history_window(10).target_objects(5)).unwrap();
        let start = sim.resource_version();
        sim.step(30).unwrap();
        let mut r = Reader::open(&sim, watch_from(start)).await;
        match r.next().await {
            Some(WatchEvent::Error(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{what}");
                assert_eq!(
                    s.message,
                    format!("too old resource version: {start} ({})", start + 21),
                    "{what}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(r.next().await.is_none(), "{what}: closed after the error");
        // The oldest allowed start still works.
        let oldest = sim.stats().oldest_resource_version;
        let mut r = Reader::open(&sim, watch_from(oldest)).await;
        assert_eq!(rv_of(&r.next().await.unwrap()), oldest + 1, "{what}");
    }
}

#[tokio::test]
async fn lagging_watcher_gets_410_without_flow_control() {
    let sim = SimServer::new(SimConfig::new(etcd()).history_window(50).target_objects(10)).unwrap();
    let mut r = Reader::open(&sim, watch_from(sim.resource_version())).await;
    let first = r.next_or_step(&sim).await;
    assert!(matches!(first, WatchEvent::Added(_)));
    sim.step(500).unwrap();
    let mut saw_error = false;
    while let Some(e) = r.next().await {
        if let WatchEvent::Error(s) = e {
            assert_eq!(s.code, 410);
            saw_error = true;
        }
    }
    assert!(saw_error);
}

impl Reader {
    /// Makes one change, then reads the next event.
    async fn next_or_step(&mut self, sim: &SimServer) -> WatchEvent {
        sim.step(1).unwrap();
        self.next().await.unwrap()
    }
}

#[tokio::test]
async fn flow_control_floods_without_losing_history() {
    let sim = SimServer::new(
        SimConfig::new(etcd())
            .seed(9)
            .target_objects(100)
            .history_window(300)
            .flow_control(true)
            .split_chunks(Some(333)),
    )
    .unwrap();
    let start = sim.resource_version();
    let mut r = Reader::open(&sim, watch_from(start)).await;
    let total = 20_000u64;
    let reader = tokio::spawn(async move {
        let events = r.changes(total as usize).await;
        (events, r.chunks)
    });
    let end = sim.flood(total).await.unwrap();
    let (events, chunks) = reader.await.unwrap();
    assert_eq!(end, start + total);
    assert!(chunks > 100, "split into many chunks");
    let rvs: Vec<u64> = events.iter().map(rv_of).collect();
    assert_eq!(rvs, (start + 1..=end).collect::<Vec<_>>());
    let mut view = BTreeMap::new();
    apply(&mut view, &events);
    assert_eq!(view, sim.truth().versions());
    // The window held: history never grew far beyond it.
    assert!(sim.stats().history <= 300 + 256 + 1);
}

#[tokio::test(start_paused = true)]
async fn flow_control_keeps_history_between_list_and_watch() {
    let sim = SimServer::new(
        SimConfig::new(etcd())
            .initial_objects(20)
            .target_objects(20)
            .history_window(10)
            .flow_control(true),
    )
    .unwrap();
    let list = decode_list(sim.list(&ListOptions::default()).await.unwrap()).unwrap();
    let rv: u64 = list.resource_version.parse().unwrap();
    // step() never waits but keeps what the list's client will need.
    sim.step(100).unwrap();
    let mut r = Reader::open(&sim, watch_from(rv)).await;
    let ev = r.changes(100).await;
    assert_eq!(rv_of(&ev[0]), rv + 1);
    // Once the hold is released (by that watch starting) and the watcher caught up, the
    // window applies again.
    drop(r);
    tokio::time::sleep(Duration::from_secs(11)).await;
    sim.step(20).unwrap();
    assert_eq!(sim.stats().history, 10);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_every_n_events_and_every_interval() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(
            SimConfig::new(t)
                .target_objects(5)
                .bookmark_every(10)
                .bookmark_interval(Some(Duration::from_secs(2))),
        )
        .unwrap();
        let start = sim.resource_version();
        let mut r = Reader::open(
            &sim,
            WatchOptions {
                resource_version: start.to_string(),
                allow_watch_bookmarks: true,
                ..Default::default()
            },
        )
        .await;
        let end = sim.step(35).unwrap();
        let ev = r.take(35 + 3).await;
        let marks: Vec<u64> = ev
            .iter()
            .filter(|e| matches!(e, WatchEvent::Bookmark(_)))
            .map(rv_of)
            .collect();
        let expected: Vec<u64> = (start + 1..=end).filter(|v| v % 10 == 0).collect();
        assert_eq!(marks, expected, "{what}");
        for e in &ev {
            if let WatchEvent::Bookmark(b) = e {
                assert!(b.meta().annotations().is_empty(), "{what}");
            }
        }
        // Interval: a bookmark at the current resourceVersion 2 s after the last one (paused time).
        let t0 = tokio::time::Instant::now();
        let idle = r.next().await.unwrap();
        assert!(matches!(idle, WatchEvent::Bookmark(_)), "{what}");
        assert_eq!(rv_of(&idle), end, "{what}");
        assert_eq!(t0.elapsed(), Duration::from_secs(2), "{what}");
        // No bookmarks for watches that did not ask.
        let mut plain = Reader::open(&sim, watch_from(start)).await;
        let ev = plain.take(35).await;
        assert!(
            ev.iter().all(|e| !matches!(e, WatchEvent::Bookmark(_))),
            "{what}"
        );
    }
}

#[tokio::test]
async fn streaming_initial_events_end_with_the_annotated_bookmark() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(
            SimConfig::new(t)
                .seed(5)
                .initial_objects(50)
                .target_objects(50),
        )
        .unwrap();
        let truth = sim.truth();
        let mut r = Reader::open(
            &sim,
            WatchOptions {
                send_initial_events: true,
                allow_watch_bookmarks: true,
                ..Default::default()
            },
        )
        .await;
        let ev = r.take(51).await;
        assert!(
            ev[..50].iter().all(|e| matches!(e, WatchEvent::Added(_))),
            "{what}"
        );
        let mut view = BTreeMap::new();
        apply(&mut view, &ev[..50]);
        assert_eq!(view, truth.versions(), "{what}");
        match &ev[50] {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.resource_version(), truth.resource_version.to_string());
                assert_eq!(
                    b.meta().annotations().get("k8s.io/initial-events-end"),
                    Some("true"),
                    "{what}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
        // Then live.
        sim.step(3).unwrap();
        let live = r.changes(3).await;
        assert_eq!(rv_of(&live[0]), truth.resource_version + 1, "{what}");
    }
}

#[tokio::test]
async fn watch_from_zero_starts_with_the_current_state() {
    let sim = SimServer::new(SimConfig::new(etcd()).initial_objects(7)).unwrap();
    let mut r = Reader::open(&sim, watch_from(0)).await;
    let ev = r.take(7).await;
    assert!(ev.iter().all(|e| matches!(e, WatchEvent::Added(_))));
    sim.step(1).unwrap();
    assert_eq!(rv_of(&r.next().await.unwrap()), sim.resource_version());
}

#[tokio::test]
async fn streaming_lists_are_validated_like_upstream() {
    let sim = SimServer::new(SimConfig::new(etcd())).unwrap();
    let opts = WatchOptions {
        send_initial_events: true,
        ..Default::default()
    };
    assert_eq!(api_status(sim.watch(&opts).await.unwrap_err()).code, 422);
    let off = SimServer::new(SimConfig::new(etcd()).watch_list(false)).unwrap();
    let opts = WatchOptions {
        send_initial_events: true,
        allow_watch_bookmarks: true,
        ..Default::default()
    };
    assert_eq!(api_status(off.watch(&opts).await.unwrap_err()).code, 422);
    let opts = WatchOptions {
        label_selector: Some("a=b".into()),
        ..Default::default()
    };
    assert_eq!(api_status(sim.watch(&opts).await.unwrap_err()).code, 400);
}

#[tokio::test(start_paused = true)]
async fn watch_timeout_closes_cleanly() {
    let sim = SimServer::new(SimConfig::new(etcd()).initial_objects(2)).unwrap();
    let mut r = Reader::open(
        &sim,
        WatchOptions {
            resource_version: sim.resource_version().to_string(),
            timeout: Some(Duration::from_secs(300)),
            ..Default::default()
        },
    )
    .await;
    let t0 = tokio::time::Instant::now();
    sim.step(2).unwrap();
    assert_eq!(r.changes(2).await.len(), 2);
    assert!(r.next().await.is_none());
    assert_eq!(t0.elapsed(), Duration::from_secs(300));
    assert_eq!(sim.stats().watchers, 0);
}

#[tokio::test]
async fn same_seed_same_truth() {
    for (what, t) in all_templates() {
        let n = if what == "openshift-json" { 300 } else { 3000 };
        let run = |seed: u64| {
            let sim = SimServer::new(
                SimConfig::new(t.clone())
                    .seed(seed)
                    .initial_objects(20)
                    .target_objects(60),
            )
            .unwrap();
            sim.step(n).unwrap();
            sim.truth()
        };
        let (a, b, c) = (run(42), run(42), run(43));
        assert_eq!(a.resource_version, b.resource_version);
        assert_eq!(a.versions(), b.versions(), "{what}");
        assert!(
            a.objects
                .values()
                .zip(b.objects.values())
                .all(|(x, y)| x == y),
            "{what}: identical bytes"
        );
        assert_ne!(a.versions(), c.versions(), "{what}: another seed differs");
    }
}

#[tokio::test]
async fn objects_keep_the_fixture_bytes_apart_from_metadata() {
    for (what, t) in all_templates() {
        let sim = SimServer::new(SimConfig::new(t.clone()).seed(6)).unwrap();
        let a = sim.create("ns-1", "keep").unwrap();
        let key = a.key();
        let b = sim.update(&key).unwrap();
        let c = sim.delete(&key).unwrap();
        for o in [&a, &b, &c] {
            // The template (one of them) with this object's metadata is this object, byte for
            // byte (protobuf) or value for value (JSON).
            let same = t.objects().iter().any(|tpl| {
                let re = tpl.with_meta(o.meta().clone()).unwrap();
                match o.encoding() {
                    informer::object::Encoding::Protobuf => {
                        let mine = o.with_meta(o.meta().clone()).unwrap();
                        mine.raw().unwrap() == re.raw().unwrap()
                    }
                    informer::object::Encoding::Json => {
                        o.to_json_value().unwrap() == re.to_json_value().unwrap()
                    }
                }
            });
            assert!(same, "{what}: {} differs from its template", o.key());
        }
        // Metadata: fresh, with the template's annotations and one ReplicaSet owner.
        let m = a.meta();
        assert_eq!(m.name(), "keep");
        assert_eq!(m.namespace(), "ns-1");
        assert_eq!(m.uid().len(), 36);
        assert_eq!(m.generation(), Some(1));
        assert!(m.labels().get("app").unwrap().starts_with("app-"));
        assert!(m.deletion_timestamp().is_none());
        assert_eq!(m.owner_references().len(), 1);
        assert_eq!(m.owner_references().next().unwrap().kind, "ReplicaSet");
        assert!(
            !m.annotations().is_empty(),
            "{what}: template annotations kept"
        );
        assert_ne!(
            b.meta().labels().get("version").unwrap(),
            m.labels().get("version").unwrap(),
            "{what}: relabelled"
        );
        assert_eq!(b.meta().generation(), Some(2));
        assert_eq!(c.meta().generation(), Some(2));
        assert_eq!(c.meta().labels(), b.meta().labels());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_flood_to_two_watchers_on_two_threads() {
    let sim = SimServer::new(
        SimConfig::new(etcd())
            .seed(11)
            .initial_objects(200)
            .target_objects(200)
            .history_window(500)
            .flow_control(true),
    )
    .unwrap();
    let start = sim.resource_version();
    let total = 30_000u64;
    let initial = sim_initial(&sim, start).await;
    assert_eq!(initial.len(), 200);
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut r = Reader::open(&sim, watch_from(start)).await;
        readers.push(tokio::spawn(async move { r.changes(total as usize).await }));
    }
    let end = sim.flood(total).await.unwrap();
    let truth = sim.truth().versions();
    for r in readers {
        let events = r.await.unwrap();
        assert_eq!(rv_of(events.last().unwrap()), end);
        // Replay on top of the initial 200 objects (created before `start`).
        let mut view = initial.clone();
        apply(&mut view, &events);
        assert_eq!(view, truth);
    }
}

/// The state at `rv`, through an exact list.
async fn sim_initial(sim: &SimServer, rv: u64) -> ViewMap {
    let l = decode_list(
        sim.list(&ListOptions {
            resource_version: Some(rv.to_string()),
            resource_version_match: Some("Exact".into()),
            ..Default::default()
        })
        .await
        .unwrap(),
    )
    .unwrap();
    items_view(&l.items)
}

#[tokio::test]
async fn deployments_are_named_by_app_and_own_nothing() {
    let dir = default_fixtures_dir().unwrap();
    let sim = SimServer::new(
        SimConfig::new(Templates::deployments(&dir).unwrap())
            .seed(4)
            .namespaces(3)
            .apps(5)
            .initial_objects(10),
    )
    .unwrap();
    // Creates beyond namespaces * apps (15) turn into updates.
    sim.step(500).unwrap();
    let truth = sim.truth();
    assert!(truth.objects.len() <= 15 && truth.objects.len() >= 10);
    for (key, d) in &truth.objects {
        let m = d.meta();
        let app: u32 = key.name().strip_prefix("app-").unwrap().parse().unwrap();
        assert!(app < 5, "{key}");
        assert_eq!(m.labels().get("app").unwrap(), key.name());
        assert!(!m.labels().contains_key("pod-template-hash"));
        assert!(m.owner_references().is_empty(), "{key}: no owner");
        assert!(m.generate_name().is_empty());
        assert_eq!(d.gvk().kind, "Deployment");
    }
    // More initial objects than names: the server holds one per namespace and app.
    let full = SimServer::new(
        SimConfig::new(Templates::deployments(&dir).unwrap())
            .namespaces(3)
            .apps(5)
            .initial_objects(100),
    )
    .unwrap();
    assert_eq!(full.stats().objects, 15);
    // A Deployment created by name takes its app from the name.
    let d = sim.delete(truth.objects.keys().next().unwrap()).unwrap();
    let again = sim.create(d.namespace(), d.name()).unwrap();
    assert_eq!(again.meta().labels().get("app").unwrap(), d.name());
}

#[tokio::test]
async fn pods_are_owned_by_their_namespaces_replica_set_of_their_app() {
    let dir = default_fixtures_dir().unwrap();
    let sim = SimServer::new(
        SimConfig::new(Templates::pod_states(&dir).unwrap())
            .seed(4)
            .namespaces(3)
            .apps(2)
            .initial_objects(60),
    )
    .unwrap();
    // (namespace, app) → the owner's (name, uid), which must be one per pair.
    let mut owners: BTreeMap<(Str, Str), (Str, Str)> = BTreeMap::new();
    for pod in sim.truth().objects.values() {
        let m = pod.meta();
        let [o] = m.owner_references().collect::<Vec<_>>()[..] else {
            panic!("{}: one owner", pod.key());
        };
        let hash = &m.labels().get("pod-template-hash").unwrap();
        assert_eq!((o.kind, o.api_version), ("ReplicaSet", "apps/v1"));
        assert_eq!(o.controller, Some(true));
        assert_eq!(o.name, format!("{}-{hash}", m.labels().get("app").unwrap()));
        let k = (
            Str::from(m.namespace()),
            Str::from(m.labels().get("app").unwrap()),
        );
        let v = (Str::from(o.name), Str::from(o.uid));
        assert_eq!(owners.entry(k).or_insert_with(|| v.clone()), &v);
    }
    assert_eq!(owners.len(), 6, "every namespace has pods of both apps");
    let uids: std::collections::BTreeSet<_> = owners.values().map(|v| v.1.clone()).collect();
    assert_eq!(
        uids.len(),
        6,
        "ReplicaSets of two namespaces are two objects"
    );
}

#[tokio::test]
async fn update_template_moves_objects_between_templates() {
    let dir = default_fixtures_dir().unwrap();
    let states = Templates::pod_states(&dir).unwrap();
    let phase_of = |o: &informer::object::Object| {
        let p: k8s_pb::api::core::v1::Pod = o.decode().unwrap();
        p.status.unwrap().phase.unwrap()
    };
    for (on, expect_moves) in [(false, false), (true, true)] {
        let sim =
            SimServer::new(SimConfig::new(states.clone()).seed(8).update_template(on)).unwrap();
        let first = sim.create("ns-0", "p").unwrap();
        let key = first.key();
        let mut phases = std::collections::BTreeSet::new();
        let mut generations = Vec::new();
        for _ in 0..40 {
            let o = sim.update(&key).unwrap();
            phases.insert(phase_of(&o));
            generations.push(o.meta().generation().unwrap());
            // Metadata is the object's whatever the template.
            assert_eq!((o.meta().uid(), o.name()), (first.meta().uid(), "p"));
        }
        assert_eq!(generations, (2..42).collect::<Vec<i64>>());
        if expect_moves {
            assert_eq!(phases.len(), 2, "Pending and Running both seen: {phases:?}");
        } else {
            assert_eq!(phases, [phase_of(&first)].into(), "kept its template");
        }
    }
}

/// The flood driver follows its rate, stops while paused (no burst on resume for the paused
/// time), and follows a new rate: on tokio's paused clock, so the counts are exact up to one
/// 10 ms tick.
#[tokio::test(start_paused = true)]
async fn the_flood_driver_pauses_resumes_and_changes_rate() {
    let templates = Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap();
    let sim = SimServer::new(SimConfig::new(templates).seed(3).target_objects(50)).unwrap();
    assert_eq!(sim.drive_state(), informer::sim::DriveState::default());
    let driver = {
        let sim = sim.clone();
        tokio::spawn(async move { sim.drive().await })
    };
    let events = || sim.stats().events;
    // Rate 0: nothing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(events(), 0);
    sim.set_rate(1_000.0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let at_1000 = events();
    assert!((1_980..=2_000).contains(&at_1000), "{at_1000}");
    sim.pause();
    assert!(sim.drive_state().paused);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let paused_at = events();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(events(), paused_at, "no change while paused");
    sim.set_rate(200.0);
    sim.resume();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed = events() - paused_at;
    assert!(
        (190..=200).contains(&resumed),
        "{resumed} (no burst for the paused 5 s)"
    );
    sim.set_rate(f64::NAN);
    assert_eq!(sim.drive_state().rate, 0.0);
    driver.abort();
}

/// The protobuf metadata the simulator writes is what the API server writes: re-encoding the
/// decoded metadata gives back the object's leading metadata field byte for byte (field order,
/// labels in key order, `version` among them), after creates and after label changes that sort
/// before and after `version`.
#[test]
fn protobuf_metadata_is_written_in_the_api_servers_order() {
    for t in [head(), etcd()] {
        let sim = SimServer::new(SimConfig::new(t).seed(3).initial_objects(3)).unwrap();
        let key = ObjectKey::new("ns-x", "a");
        let mut objs = vec![sim.create("ns-x", "a").unwrap()];
        for label in ["aaa", "zone", "version-b"] {
            objs.push(
                sim.update_with(&key, |m| {
                    m.labels.insert(label.into(), "x".into());
                })
                .unwrap(),
            );
        }
        for o in objs {
            let mut meta = Vec::new();
            informer::object::encode_object_meta(o.meta(), &mut meta);
            let mut field = vec![0x0a];
            let mut len = meta.len() as u64;
            while len >= 0x80 {
                field.push((len as u8) | 0x80);
                len >>= 7;
            }
            field.push(len as u8);
            field.extend_from_slice(&meta);
            let labels: Vec<&str> = o.meta().labels().keys().collect();
            assert!(o.raw().unwrap().starts_with(&field), "labels {labels:?}");
        }
    }
}
