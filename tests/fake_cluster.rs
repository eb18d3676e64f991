//! `informer serve` as a fake cluster: what a controller under test needs of it beyond a
//! flood of watch events (label and field selectors evaluated on list and watch, ...).

mod support;
mod views;

use std::collections::BTreeMap;
use std::time::Duration;

use informer::client::{ApiResource, ClientOptions, HttpListerWatcher};
use informer::object::{Object, ObjectKey, WatchDecoder, WatchEvent, WatchFormat, decode_list};
use informer::reflector::{
    ApiError, BackoffConfig, Body as _, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions,
};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{SimConfig, SimServer, Templates};
use informer::{Informer, InformerConfig};
use support::{eventually, fixtures, runtime};
use views::{ViewMap, store_view, version};

async fn lister(server: &ServerHandle) -> HttpListerWatcher {
    let client = ClientOptions {
        server: Some(server.url()),
        ..Default::default()
    }
    .client()
    .await
    .unwrap();
    HttpListerWatcher::new(
        client,
        ApiResource::core("v1", "pods", "Pod").with_protobuf(true),
    )
}

/// Pods that move between the four states of becoming ready (`status.phase` Pending ↔
/// Running) and change their `version` label on every update.
fn pod_states(objects: usize) -> SimServer {
    let templates = Templates::pod_states(&fixtures()).unwrap();
    SimServer::new(
        SimConfig::new(templates)
            .seed(11)
            .namespaces(3)
            .initial_objects(objects)
            .target_objects(objects)
            .update_template(true)
            .history_window(100_000)
            .bookmark_every(50),
    )
    .unwrap()
}

async fn start(sim: &SimServer) -> ServerHandle {
    serve(
        sim.clone(),
        ServerConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn phase(o: &Object) -> String {
    let p: k8s_pb::api::core::v1::Pod = o.decode().unwrap();
    p.status.and_then(|s| s.phase).unwrap_or_default()
}

fn label<'a>(o: &'a Object, k: &str) -> &'a str {
    o.meta().labels.get(k).map_or("", |v| &**v)
}

/// Informers with label and field selectors over HTTP, through a flood that moves objects in
/// and out of their selections: each store ends equal to the server's objects that match,
/// computed here from the truth.
#[test]
fn selectors_filter_lists_and_watches_as_objects_enter_and_leave() {
    let rt = runtime();
    let sim = pod_states(400);
    let server = rt.block_on(start(&sim));
    type Pred = fn(&Object) -> bool;
    let cases: [(Option<&str>, Option<&str>, Pred); 4] = [
        (Some("version in (v1,v3,v5,v7)"), None, |o| {
            ["v1", "v3", "v5", "v7"].contains(&label(o, "version"))
        }),
        (None, Some("status.phase=Running"), |o| {
            phase(o) == "Running"
        }),
        (
            Some("app!=app-0,version"),
            Some("metadata.namespace=ns-1,status.phase!=Running"),
            |o| {
                label(o, "app") != "app-0"
                    && o.meta().labels.get("version").is_some()
                    && o.namespace() == "ns-1"
                    && phase(o) != "Running"
            },
        ),
        (Some("!version"), None, |o| {
            o.meta().labels.get("version").is_none()
        }),
    ];
    let mut informers = Vec::new();
    for (l, f, _) in &cases {
        let lw = rt.block_on(lister(&server));
        let reflector = ReflectorConfig {
            page_size: 70,
            backoff: BackoffConfig {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(200),
                ..Default::default()
            },
            ..Default::default()
        }
        .label_selector(l.map(str::to_owned))
        .field_selector(f.map(str::to_owned));
        let informer = Informer::new(
            lw,
            InformerConfig {
                reflector,
                ..Default::default()
            },
        );
        informer.start(rt.handle());
        rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(60)))
            .unwrap();
        informers.push(informer);
    }
    rt.block_on(async {
        for _ in 0..10 {
            sim.flood(300).await.unwrap();
        }
    });
    let truth = sim.truth();
    for ((l, f, pred), informer) in cases.iter().zip(&informers) {
        let expected: ViewMap = truth
            .objects
            .iter()
            .filter(|(_, o)| pred(o))
            .map(|(k, o)| (k.clone(), version(o)))
            .collect();
        if l != &Some("!version") {
            assert!(
                !expected.is_empty() && expected.len() < truth.objects.len(),
                "{l:?} {f:?} selects {} of {}",
                expected.len(),
                truth.objects.len()
            );
        }
        let ok = rt.block_on(eventually(Duration::from_secs(30), || {
            store_view(informer) == expected
        }));
        assert!(
            ok,
            "{l:?} {f:?}: {:?}",
            views::diff(&expected, &store_view(informer))
        );
    }
    for informer in informers {
        informer.shutdown();
    }
    rt.block_on(server.shutdown());
}

/// The events of one watch until `n` objects events arrived (or 10 s passed).
async fn events(
    lw: &HttpListerWatcher,
    opts: &WatchOptions,
    n: usize,
) -> Vec<(&'static str, ObjectKey, String)> {
    let mut w = lw.watch(opts).await.unwrap();
    let mut dec = WatchDecoder::new(WatchFormat::Protobuf, 1 << 24);
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, w.body.next_chunk()).await;
        let Ok(Some(Ok(chunk))) = chunk else { break };
        dec.push(chunk);
        while let Ok(Some(ev)) = dec.next_event() {
            let (t, o) = match ev {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                _ => continue,
            };
            out.push((t, o.key(), o.resource_version().to_owned()));
        }
    }
    out
}

/// A watch with a label selector: an object that stops matching arrives as DELETED (at the
/// change's resourceVersion, with its last matching labels), one that starts matching as
/// ADDED, changes outside the selection not at all. Malformed selectors and unsupported
/// fields are 400s with upstream's wording.
#[test]
fn a_watch_sees_objects_leave_and_enter_its_selection() {
    let rt = runtime();
    let sim = pod_states(20);
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        let lw = lister(&server).await;
        let truth = sim.truth();
        let keys: Vec<ObjectKey> = truth.objects.keys().take(3).cloned().collect();
        let set = |k: &ObjectKey, v: &str| {
            let v = v.to_owned();
            sim.update_with(k, move |m| {
                m.labels.insert("selected".into(), v.into());
            })
            .unwrap()
        };
        set(&keys[0], "yes");
        set(&keys[1], "yes");
        let start = sim.resource_version();
        let leave = set(&keys[0], "no"); // leaves
        let enter = set(&keys[2], "yes"); // enters
        let stay = set(&keys[1], "yes"); // stays
        set(&keys[2], "no"); // leaves again
        let opts = WatchOptions {
            resource_version: start.to_string(),
            label_selector: Some("selected=yes".into()),
            ..Default::default()
        };
        let got = events(&lw, &opts, 4).await;
        let rv = |o: &Object| o.resource_version().to_owned();
        assert_eq!(
            got,
            vec![
                ("DELETED", keys[0].clone(), rv(&leave)),
                ("ADDED", keys[2].clone(), rv(&enter)),
                ("MODIFIED", keys[1].clone(), rv(&stay)),
                ("DELETED", keys[2].clone(), (start + 4).to_string()),
            ]
        );
        // A list with the same selector at the end: only the object that stayed.
        let page = lw
            .list(&ListOptions {
                label_selector: Some("selected in (yes)".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let items: BTreeMap<ObjectKey, String> = decode_list(page)
            .unwrap()
            .items
            .iter()
            .map(|o| (o.key(), rv(o)))
            .collect();
        assert_eq!(items, BTreeMap::from([(keys[1].clone(), rv(&stay))]));
        for (l, f, want) in [
            (Some("selected in yes"), None, "invalid label selector"),
            (None, Some("spec.nodeName"), "invalid selector"),
            (
                None,
                Some("spec.foo=x"),
                "field label not supported: spec.foo",
            ),
        ] {
            let err = lw
                .list(&ListOptions {
                    label_selector: l.map(str::to_owned),
                    field_selector: f.map(str::to_owned),
                    ..Default::default()
                })
                .await
                .unwrap_err();
            match err {
                ApiError::Status(s) => {
                    assert_eq!(s.code, 400, "{l:?} {f:?}");
                    assert!(s.message.contains(want), "{l:?} {f:?}: {}", s.message);
                }
                other => panic!("{l:?} {f:?}: {other:?}"),
            }
        }
    });
    rt.block_on(server.shutdown());
}

/// `POST path` to the server at `url` (no body); the JSON answer and its status code.
async fn post(url: &str, path: &str) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).unwrap())
}

/// The control endpoint pauses, resumes and re-rates the flood driver of a running server.
#[test]
fn the_control_endpoint_pauses_resumes_and_sets_the_rate_of_a_flood() {
    let rt = runtime();
    let sim = pod_states(50);
    let server = rt.block_on(start(&sim));
    let url = server.url();
    let driver = {
        let sim = sim.clone();
        rt.spawn(async move { informer::server::drive(&sim, 0.0).await })
    };
    rt.block_on(async {
        let events = || sim.stats().events;
        let (code, doc) = post(&url, "/informer/v1/rate?rate=5000").await;
        assert_eq!(code, 200, "{doc}");
        assert_eq!(
            doc,
            serde_json::json!({"resource": "pods", "rate": 5000.0, "paused": false})
        );
        let before = events();
        assert!(eventually(Duration::from_secs(10), || events() > before + 500).await);
        let (_, doc) = post(&url, "/informer/v1/pause").await;
        assert_eq!(doc["paused"], true);
        // At most one batch in flight when the pause came.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let paused = events();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(events(), paused, "no change while paused");
        let (_, doc) = post(&url, "/informer/v1/resume").await;
        assert_eq!(doc["paused"], false);
        assert!(eventually(Duration::from_secs(10), || events() > paused + 500).await);
        let (_, doc) = post(&url, "/informer/v1/rate?rate=0").await;
        assert_eq!(doc["rate"], 0.0);
        for bad in [
            "/informer/v1/rate",
            "/informer/v1/rate?rate=-1",
            "/informer/v1/rate?rate=x",
        ] {
            let (code, doc) = post(&url, bad).await;
            assert_eq!(code, 400, "{bad}: {doc}");
        }
        let (code, _) = post(&url, "/informer/v1/pause?resource=widgets").await;
        assert_eq!(code, 404);
    });
    driver.abort();
    rt.block_on(server.shutdown());
}
