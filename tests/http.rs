//! Our HTTP client against our HTTP server on loopback, in protobuf and JSON: informers
//! converge to the server's truth (through floods, 410 relists, filtered and paginated lists),
//! watches honour bookmarks, streaming lists and timeouts, errors arrive as typed `Status`es,
//! and a captured protobuf watch stream decodes with `informer decode`.

mod support;
mod views;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use informer::client::{ApiResource, ClientOptions, HttpListerWatcher, discover};
use informer::object::{
    DecodeError, ListStream, ObjectKey, WatchDecoder, WatchEvent, WatchFormat, decode_list,
};
use informer::reflector::{
    ApiError, BackoffConfig, Body, ListOptions, ListerWatcher, ReflectorConfig, WatchOptions,
};
use informer::sim::{Fault, SimServer};
use informer::{Informer, InformerConfig};
use support::{eventually, runtime, sim, start};
use views::{ViewMap, store_view};

async fn lister(url: &str, resource: ApiResource) -> HttpListerWatcher {
    let client = ClientOptions {
        server: Some(url.to_owned()),
        ..Default::default()
    }
    .client()
    .await
    .unwrap();
    HttpListerWatcher::new(client, resource)
}

fn pods(protobuf: bool) -> ApiResource {
    ApiResource::core("v1", "pods", "Pod").with_protobuf(protobuf)
}

fn fast_reflector() -> ReflectorConfig {
    ReflectorConfig {
        page_size: 50,
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Waits (60 s) until the store reflects the server's last change and equals its truth.
fn assert_converges<L: ListerWatcher>(
    rt: &tokio::runtime::Runtime,
    sim: &SimServer,
    informer: &Informer<L>,
) {
    let truth = sim.truth();
    let ok = rt.block_on(eventually(Duration::from_secs(60), || {
        informer.store().resource_version() >= truth.resource_version
            && truth.diff(&store_view(informer)).is_none()
    }));
    assert!(ok, "{:?}", truth.diff(&store_view(informer)));
}

/// Floods `sim` while an informer over HTTP watches it; the store must end equal to the truth.
fn converge(protobuf: bool, lossless: bool) {
    let rt = runtime();
    let sim = sim("head", |c| {
        c.initial_objects(300)
            .target_objects(300)
            .history_window(if lossless { 2_000 } else { 300 })
            .flow_control(lossless)
            .max_page_size(Some(40))
    });
    let server = rt.block_on(start(&sim));
    let lw = rt.block_on(lister(&server.url(), pods(protobuf)));
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector: fast_reflector(),
            ..Default::default()
        },
    );
    informer.start(rt.handle());
    rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(informer.store().len(), 300);
    rt.block_on(async {
        for _ in 0..20 {
            if lossless {
                sim.flood(500).await.unwrap();
            } else {
                // Faster than a lagging watcher can keep up with a 300-event window: 410s.
                sim.step(500).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    assert_converges(&rt, &sim, &informer);
    let m = informer.reflector_metrics().unwrap();
    let relists = m.relists.load(std::sync::atomic::Ordering::Relaxed);
    if lossless {
        assert_eq!(relists, 0, "flow control: no 410, no relist");
    } else {
        assert!(
            relists > 0,
            "a 300-event window under a 10 000-event burst must expire"
        );
    }
    informer.shutdown();
    rt.block_on(server.shutdown());
}

#[test]
fn protobuf_informer_converges_lossless() {
    converge(true, true);
}

#[test]
fn json_informer_converges_lossless() {
    converge(false, true);
}

#[test]
fn protobuf_informer_converges_through_410_relists() {
    converge(true, false);
}

#[test]
fn json_informer_converges_through_410_relists() {
    converge(false, false);
}

/// A namespace-scoped informer with tiny pages: the server filters and pages with its own
/// continue tokens; the store holds exactly the namespace's objects.
#[test]
fn namespaced_informer_with_pagination() {
    let rt = runtime();
    let sim = sim("head", |c| {
        c.initial_objects(200)
            .target_objects(200)
            .flow_control(true)
    });
    let server = rt.block_on(start(&sim));
    for protobuf in [true, false] {
        let lw = rt.block_on(lister(&server.url(), pods(protobuf).in_namespace("ns-3")));
        let informer = Informer::new(
            lw,
            InformerConfig {
                reflector: ReflectorConfig {
                    page_size: 3,
                    ..fast_reflector()
                },
                ..Default::default()
            },
        );
        informer.start(rt.handle());
        rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(30)))
            .unwrap();
        rt.block_on(sim.flood(2_000)).unwrap();
        let truth = sim.truth();
        let expected: ViewMap = truth
            .versions()
            .into_iter()
            .filter(|(k, _)| k.namespace() == "ns-3")
            .collect();
        assert!(expected.len() > 5);
        let ok = rt.block_on(eventually(Duration::from_secs(30), || {
            store_view(&informer) == expected
        }));
        assert!(
            ok,
            "protobuf={protobuf}: {} vs {}",
            store_view(&informer).len(),
            expected.len()
        );
        let m = informer.reflector_metrics().unwrap();
        assert!(m.list_pages.load(std::sync::atomic::Ordering::Relaxed) > 2);
        informer.shutdown();
    }
    rt.block_on(server.shutdown());
}

#[test]
fn an_unpaginated_list_is_decoded_as_its_chunks_arrive() {
    let rt = runtime();
    let sim = sim("etcd", |c| c.initial_objects(2_000).vary(true));
    let server = rt.block_on(start(&sim));
    let lw = rt.block_on(lister(&server.url(), pods(true)));
    rt.block_on(async {
        let all = ListOptions::default();
        let expected = decode_list(lw.list(&all).await.unwrap()).unwrap();
        let mut body = lw.list_chunks(&all).await.unwrap();
        let (mut stream, mut items, mut chunks) = (ListStream::new(1 << 20), Vec::new(), 0);
        while let Some(chunk) = body.next_chunk().await {
            chunks += 1;
            items.extend(stream.feed(chunk.unwrap()).unwrap());
        }
        let list = stream.finish().unwrap();
        // About 3 MB: hyper hands it over in several chunks, each decoded as it comes.
        assert!(chunks > 1, "{chunks} chunks");
        assert_eq!(items.len(), 2_000);
        assert_eq!(items, expected.items);
        assert_eq!(list.resource_version, expected.resource_version);

        // Past the page cap: an error chunk, with nothing kept of the body.
        let capped = lw.clone().max_list_bytes(100_000);
        let mut body = capped.list_chunks(&all).await.unwrap();
        let mut failed = None;
        while let Some(chunk) = body.next_chunk().await {
            if let Err(e) = chunk {
                failed = Some(e);
                break;
            }
        }
        assert!(
            matches!(
                failed,
                Some(ApiError::Decode(DecodeError::FrameTooLarge {
                    limit: 100_000,
                    ..
                }))
            ),
            "{failed:?}"
        );
    });

    // An informer listing everything in one response (page size 0), relisting after a 410.
    let lw = rt.block_on(lister(&server.url(), pods(true)));
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector: ReflectorConfig {
                page_size: 0,
                ..fast_reflector()
            },
            ..Default::default()
        },
    );
    informer.start(rt.handle());
    rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(informer.store().len(), 2_000);
    sim.inject("stream:410".parse::<Fault>().unwrap());
    rt.block_on(sim.flood(500)).unwrap();
    assert_converges(&rt, &sim, &informer);
    let m = informer.reflector_metrics().unwrap();
    // One page per list: the first, and the relist after the 410.
    let (pages, lists) = (&m.list_pages, &m.lists);
    let ordering = std::sync::atomic::Ordering::Relaxed;
    assert!(lists.load(ordering) >= 2);
    assert_eq!(pages.load(ordering), lists.load(ordering));
    informer.shutdown();
    rt.block_on(server.shutdown());
}

async fn drain(
    body: &mut impl Body,
    format: WatchFormat,
    until: impl Fn(&[WatchEvent]) -> bool,
) -> Vec<WatchEvent> {
    let mut d = WatchDecoder::new(format, 1 << 24);
    let mut events = Vec::new();
    while !until(&events) {
        match tokio::time::timeout(Duration::from_secs(20), body.next_chunk()).await {
            Ok(Some(chunk)) => {
                d.push(chunk.unwrap());
                while let Some(ev) = d.next_event().unwrap() {
                    events.push(ev);
                }
            }
            Ok(None) => break,
            Err(_) => panic!("watch stalled after {} events", events.len()),
        }
    }
    events
}

/// Streaming list, bookmarks, timeoutSeconds and 410 on a watch, in both encodings.
#[test]
fn watch_semantics_over_http() {
    let rt = runtime();
    let sim = sim("head", |c| {
        c.initial_objects(50)
            .target_objects(50)
            .history_window(100)
            .bookmark_every(10)
    });
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        for protobuf in [true, false] {
            let lw = lister(&server.url(), pods(protobuf)).await;
            let want = if protobuf {
                WatchFormat::Protobuf
            } else {
                WatchFormat::Json
            };
            // sendInitialEvents: every object ADDED, then the initial-events-end bookmark.
            let mut w = lw
                .watch(&WatchOptions {
                    allow_watch_bookmarks: true,
                    send_initial_events: true,
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(w.format, want);
            let n = sim.stats().objects;
            let evs = drain(&mut w.body, w.format, |e| e.len() > n).await;
            assert!(evs[..n].iter().all(|e| matches!(e, WatchEvent::Added(_))));
            match &evs[n] {
                WatchEvent::Bookmark(o) => {
                    assert_eq!(
                        o.meta().annotations().get("k8s.io/initial-events-end"),
                        Some("true")
                    );
                    assert_eq!(o.resource_version(), sim.resource_version().to_string());
                }
                other => panic!("expected the end bookmark, got {:?}", other.event_type()),
            }
            // Live changes with bookmarks every 10 resourceVersions, then the timeout ends it.
            let rv = sim.resource_version();
            let mut w = lw
                .watch(&WatchOptions {
                    resource_version: rv.to_string(),
                    allow_watch_bookmarks: true,
                    timeout: Some(Duration::from_secs(1)),
                    ..Default::default()
                })
                .await
                .unwrap();
            sim.step(30).unwrap();
            let evs = drain(&mut w.body, w.format, |_| false).await;
            let changes = evs
                .iter()
                .filter(|e| !matches!(e, WatchEvent::Bookmark(_)))
                .count();
            let bookmarks = evs
                .iter()
                .filter(|e| matches!(e, WatchEvent::Bookmark(_)))
                .count();
            assert_eq!(changes, 30);
            assert!(bookmarks >= 3, "{bookmarks} bookmarks");
            // A resourceVersion older than the 100-event window: ERROR 410 on the stream.
            sim.step(150).unwrap();
            let mut w = lw
                .watch(&WatchOptions {
                    resource_version: rv.to_string(),
                    ..Default::default()
                })
                .await
                .unwrap();
            let evs = drain(&mut w.body, w.format, |e| !e.is_empty()).await;
            match &evs[0] {
                WatchEvent::Error(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
                other => panic!("expected 410, got {:?}", other.event_type()),
            }
            // ... and on an exact list, a 410 Status.
            let err = lw
                .list(&ListOptions {
                    resource_version: Some(rv.to_string()),
                    resource_version_match: Some("Exact".into()),
                    ..Default::default()
                })
                .await
                .unwrap_err();
            match err {
                ApiError::Status(s) => assert_eq!(s.code, 410),
                other => panic!("{other:?}"),
            }
            // A version the server has not reached: 504 with ResourceVersionTooLarge.
            let err = lw
                .watch(&WatchOptions {
                    resource_version: (sim.resource_version() + 1000).to_string(),
                    ..Default::default()
                })
                .await
                .unwrap_err();
            match err {
                ApiError::Status(s) => {
                    assert_eq!(s.code, 504);
                    assert!(informer::reflector::is_too_large_resource_version(&s));
                }
                other => panic!("{other:?}"),
            }
        }
    });
    rt.block_on(server.shutdown());
}

/// The JSON form of a protobuf object (through the template's JSON twin) is the same Pod:
/// compare the typed decodes of both answers.
#[test]
fn json_and_protobuf_lists_describe_the_same_pods() {
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(5).target_objects(5));
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        let pb = decode_list(
            lister(&server.url(), pods(true))
                .await
                .list(&ListOptions::default())
                .await
                .unwrap(),
        )
        .unwrap();
        let js = lister(&server.url(), pods(false))
            .await
            .list(&ListOptions::default())
            .await
            .unwrap();
        let js: k8s_openapi::List<k8s_openapi::api::core::v1::Pod> =
            serde_json::from_slice(&js).unwrap();
        assert_eq!(pb.items.len(), 5);
        assert_eq!(js.items.len(), 5);
        for (p, j) in pb.items.iter().zip(&js.items) {
            let typed: k8s_pb::api::core::v1::Pod = p.decode().unwrap();
            assert_eq!(j.metadata.name.as_deref(), Some(p.name()));
            assert_eq!(j.metadata.namespace.as_deref(), Some(p.namespace()));
            assert_eq!(j.metadata.uid.as_deref(), Some(p.uid()));
            assert_eq!(
                j.metadata.resource_version.as_deref(),
                Some(p.resource_version())
            );
            assert_eq!(
                j.metadata.labels.as_ref().map(|l| l.len()),
                Some(p.meta().labels().len())
            );
            assert_eq!(
                j.metadata.managed_fields.as_ref().map(Vec::len),
                Some(p.meta().managed_fields().len())
            );
            let (ts, js_spec) = (typed.spec.unwrap(), j.spec.as_ref().unwrap());
            assert_eq!(ts.containers.len(), js_spec.containers.len());
            assert_eq!(ts.containers[0].image, js_spec.containers[0].image);
            assert_eq!(ts.node_name, js_spec.node_name);
            assert_eq!(
                ts.volumes.len(),
                js_spec.volumes.as_ref().map_or(0, Vec::len)
            );
            assert_eq!(
                typed.status.unwrap().phase,
                j.status.as_ref().unwrap().phase
            );
        }
    });
    rt.block_on(server.shutdown());
}

/// Discovery resolves kubectl-style names against our server.
#[test]
fn discovery_by_kubectl_names() {
    let rt = runtime();
    let sim = sim("head", |c| c);
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        let client = ClientOptions {
            server: Some(server.url()),
            ..Default::default()
        }
        .client()
        .await
        .unwrap();
        for name in ["pods", "pod", "po", "Pod"] {
            let d = discover(&client, name).await.unwrap();
            assert_eq!(d.resource, ApiResource::core("v1", "pods", "Pod"));
            assert!(d.namespaced);
        }
        assert!(matches!(
            discover(&client, "deployments.apps").await,
            Err(informer::client::DiscoveryError::NotFound(_))
        ));
    });
    rt.block_on(server.shutdown());
}

/// A raw watch capture (the bytes a client receives) decodes with `informer decode`.
#[test]
fn captured_protobuf_watch_decodes_with_informer_decode() {
    let rt = runtime();
    let sim = sim("head", |c| {
        c.initial_objects(10).target_objects(10).bookmark_every(5)
    });
    let server = rt.block_on(start(&sim));
    let start_rv = sim.resource_version();
    sim.step(20).unwrap();
    let capture: Vec<Bytes> = rt.block_on(async {
        let lw = lister(&server.url(), pods(true)).await;
        let mut w = lw
            .watch(&WatchOptions {
                resource_version: start_rv.to_string(),
                allow_watch_bookmarks: true,
                timeout: Some(Duration::from_secs(1)),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(w.format, WatchFormat::Protobuf);
        let mut chunks = Vec::new();
        while let Some(c) = w.body.next_chunk().await {
            chunks.push(c.unwrap());
        }
        chunks
    });
    let dir = std::env::temp_dir().join(format!("informer-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("watch.pb");
    std::fs::write(&file, capture.concat()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_informer"))
        .args(["decode", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    let truth = sim.truth();
    let last = truth
        .objects
        .values()
        .max_by_key(|o| o.resource_version().parse::<u64>().unwrap())
        .unwrap();
    assert!(text.contains(&format!("\"{}\"", last.name())), "{text}");
    assert!(
        text.contains("MODIFIED") || text.contains("ADDED"),
        "{text}"
    );
    assert!(text.contains("BOOKMARK"), "{text}");
    rt.block_on(server.shutdown());
}

/// Names, namespaces and resourceVersions of a JSON list answered by our server, through the
/// field selector path (`metadata.name`), for a single object.
#[test]
fn field_selector_and_get() {
    let rt = runtime();
    let sim = sim("head", |c| c.initial_objects(30).target_objects(30));
    let server = rt.block_on(start(&sim));
    let truth = sim.truth();
    let (key, obj) = truth
        .objects
        .iter()
        .next()
        .map(|(k, o)| (k.clone(), o.clone()))
        .unwrap();
    rt.block_on(async {
        let lw = lister(&server.url(), pods(true)).await;
        let page = lw
            .list(&ListOptions {
                field_selector: Some(format!("metadata.name={}", obj.name())),
                ..Default::default()
            })
            .await
            .unwrap();
        let list = decode_list(page).unwrap();
        let got: BTreeMap<ObjectKey, String> = list
            .items
            .iter()
            .map(|o| (o.key(), o.resource_version().to_owned()))
            .collect();
        assert_eq!(
            got,
            BTreeMap::from([(key.clone(), obj.resource_version().to_owned())])
        );
        let err = lw
            .list(&ListOptions {
                field_selector: Some("spec.foo=x".into()),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApiError::Status(ref s) if s.code == 400),
            "{err:?}"
        );
    });
    rt.block_on(server.shutdown());
}

/// A server that answers every request with one canned response, chosen by path.
async fn canned() -> std::net::SocketAddr {
    use http_body_util::Full;
    use hyper::{Response, StatusCode};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        let (code, ctype, retry, body): (u16, &str, Option<&str>, Bytes) = match req.uri().path() {
                        "/api/v1/namespaces/throttled/pods" => (429, "text/plain", Some("3"), Bytes::from_static(b"Too many requests, please try again later.")),
                        "/api/v1/namespaces/gone/pods" => {
                            let s = informer::object::ApiStatus {
                                code: 410,
                                status: "Failure".into(),
                                reason: "Expired".into(),
                                message: "too old resource version: 5 (10)".into(),
                                ..Default::default()
                            };
                            (410, "application/vnd.kubernetes.protobuf", None, s.encode_protobuf())
                        }
                        "/api/v1/namespaces/large/pods" => (504, "application/json", None, Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Too large resource version: 99, current: 7","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#)),
                        "/api/v1/namespaces/broken/pods" => (502, "text/html", None, Bytes::from_static(b"<html>bad gateway</html>")),
                        "/api/v1/namespaces/weird/pods" => (200, "application/yaml", None, Bytes::from_static(b"kind: PodList")),
                        _ => (404, "text/plain", None, Bytes::new()),
                    };
                        let mut r = Response::new(Full::new(body));
                        *r.status_mut() = StatusCode::from_u16(code).unwrap();
                        r.headers_mut()
                            .insert("content-type", ctype.parse().unwrap());
                        if let Some(s) = retry {
                            r.headers_mut().insert("retry-after", s.parse().unwrap());
                        }
                        Ok::<_, std::convert::Infallible>(r)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    addr
}

/// Error answers become typed `Status`es the reflector acts on; connection failures are
/// transport errors; an unknown watch Content-Type is a decode error.
#[test]
fn error_responses_map_to_api_errors() {
    let rt = runtime();
    rt.block_on(async {
        let url = format!("http://{}", canned().await);
        let status = |ns: &str| {
            let url = url.clone();
            let ns = ns.to_owned();
            async move {
                let lw = lister(&url, pods(true).in_namespace(&ns)).await;
                match lw.list(&ListOptions::default()).await {
                    Err(ApiError::Status(s)) => s,
                    other => panic!("{ns}: {other:?}"),
                }
            }
        };
        let s = status("throttled").await;
        assert_eq!(
            (s.code, s.reason.as_str(), s.retry_after_seconds),
            (429, "TooManyRequests", Some(3))
        );
        let s = status("gone").await;
        assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        assert!(informer::reflector::is_expired(&s));
        let s = status("large").await;
        assert_eq!(s.code, 504);
        assert!(informer::reflector::is_too_large_resource_version(&s));
        let s = status("broken").await;
        assert_eq!(s.code, 502);
        assert!(s.message.contains("bad gateway"), "{}", s.message);
        let lw = lister(&url, pods(true).in_namespace("weird")).await;
        let err = lw.watch(&WatchOptions::default()).await.unwrap_err();
        assert!(matches!(err, ApiError::Decode(_)), "{err:?}");
        // Nothing listens on port 1.
        let lw = lister("http://127.0.0.1:1", pods(true)).await;
        let err = lw.list(&ListOptions::default()).await.unwrap_err();
        assert_eq!(
            err.transport_kind(),
            Some(informer::reflector::TransportErrorKind::ConnectionRefused),
            "{err:?}"
        );
    });
}

/// The simulator's faults reach an HTTP client as a real server's failures would, and an
/// informer over HTTP recovers from each of them to the server's truth.
#[test]
fn simulator_faults_over_http() {
    use informer::reflector::TransportErrorKind;
    let rt = runtime();
    let sim = sim("head", |c| {
        c.initial_objects(100)
            .target_objects(100)
            .flow_control(true)
    });
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        let lw = lister(&server.url(), pods(true)).await;
        // Error answers: a Status with the HTTP code, Retry-After for 429.
        sim.inject("list:429:4".parse::<Fault>().unwrap());
        let s = lw.list(&ListOptions::default()).await.unwrap_err();
        let s = s.status().unwrap();
        assert_eq!((s.code, s.retry_after_seconds), (429, Some(4)));
        // (A real server can answer it only to a watch from a resourceVersion.)
        sim.inject("watch:too-large".parse::<Fault>().unwrap());
        let from = WatchOptions {
            resource_version: sim.resource_version().to_string(),
            ..Default::default()
        };
        let e = lw.watch(&from).await.unwrap_err();
        assert!(informer::reflector::is_too_large_resource_version(
            e.status().unwrap()
        ));
        // "refused": the connection closes without an answer.
        sim.inject("list:refused".parse::<Fault>().unwrap());
        let e = lw.list(&ListOptions::default()).await.unwrap_err();
        assert_eq!(
            e.transport_kind(),
            Some(TransportErrorKind::ConnectionReset),
            "{e:?}"
        );
        // A stream reset cuts the response mid-body: a transport error on the stream.
        let rv = sim.resource_version();
        let mut w = lw
            .watch(&WatchOptions {
                resource_version: rv.to_string(),
                ..Default::default()
            })
            .await
            .unwrap();
        sim.inject("stream:reset@3".parse::<Fault>().unwrap());
        sim.step(10).unwrap();
        let mut events = 0;
        let mut d = WatchDecoder::new(w.format, 1 << 24);
        let err = loop {
            match tokio::time::timeout(Duration::from_secs(20), w.body.next_chunk())
                .await
                .unwrap()
            {
                Some(Ok(c)) => {
                    d.push(c);
                    while d.next_event().unwrap().is_some() {
                        events += 1;
                    }
                }
                Some(Err(e)) => break e,
                None => panic!("the stream ended cleanly after {events} events"),
            }
        };
        assert_eq!(events, 3);
        assert_eq!(
            err.transport_kind(),
            Some(TransportErrorKind::ConnectionReset),
            "{err:?}"
        );
    });
    // The whole informer through one fault of every kind, armed over the control endpoint.
    let lw = rt.block_on(lister(&server.url(), pods(true)));
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector: fast_reflector(),
            ..Default::default()
        },
    );
    informer.start(rt.handle());
    rt.block_on(informer.wait_for_cache_sync(Duration::from_secs(30)))
        .unwrap();
    for spec in [
        "stream:410@2",
        "stream:reset@5",
        "stream:close@1",
        "watch:500",
        "list:410",
        "stream:corrupt@4",
        "watch:refused",
    ] {
        let (url, spec) = (server.url(), spec.to_owned());
        let armed = rt.block_on(async move {
            let client = ClientOptions {
                server: Some(url),
                ..Default::default()
            }
            .client()
            .await
            .unwrap();
            let req = http::Request::post(format!("/informer/v1/faults?fault={spec}"))
                .body(kube::client::Body::empty())
                .unwrap();
            client.send(req).await.unwrap().status()
        });
        assert!(armed.is_success());
        rt.block_on(sim.flood(50)).unwrap();
    }
    assert_converges(&rt, &sim, &informer);
    informer.shutdown();
    rt.block_on(server.shutdown());
}

/// One server, two simulators (the Deployments and Pods of one simulated cluster): discovery
/// lists both, each resource's paths reach its own simulator, control requests pick one by
/// `resource=`, and a server cannot serve one resource twice.
#[test]
fn one_server_serves_the_resources_of_several_simulators() {
    use informer::server::{ServerConfig, ServerError, serve_many};
    use informer::sim::{SimConfig, Templates};

    let rt = runtime();
    let dir = support::fixtures();
    let make = |t: Templates, n: usize| {
        SimServer::new(
            SimConfig::new(t)
                .seed(3)
                .initial_objects(n)
                .target_objects(n),
        )
        .unwrap()
    };
    let deployments = make(Templates::deployments(&dir).unwrap(), 80);
    let pods = make(Templates::pod_states(&dir).unwrap(), 300);
    let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    rt.block_on(async {
        let both = vec![
            (deployments.clone(), ServerConfig::default()),
            (pods.clone(), ServerConfig::default()),
        ];
        let server = serve_many(both, addr).await.unwrap();
        let client = ClientOptions {
            server: Some(server.url()),
            ..Default::default()
        }
        .client()
        .await
        .unwrap();
        let get = |path: &str| {
            let client = client.clone();
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            async move {
                let text = client.request_text(req).await.unwrap();
                serde_json::from_str::<serde_json::Value>(&text).unwrap()
            }
        };
        let names = |v: serde_json::Value| -> Vec<String> {
            v["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_owned())
                .filter(|n| !n.contains('/'))
                .collect()
        };
        assert_eq!(
            names(get("/api/v1").await),
            ["pods", "namespaces", "events"]
        );
        assert_eq!(names(get("/apis/apps/v1").await), ["deployments"]);
        let groups = get("/apis").await;
        assert_eq!(groups["groups"][0]["name"], "apps");
        assert_eq!(groups["groups"].as_array().unwrap().len(), 1);
        for (name, resource) in [
            (
                "deploy",
                ApiResource::new("apps", "v1", "deployments", "Deployment"),
            ),
            ("pods", ApiResource::core("v1", "pods", "Pod")),
        ] {
            assert_eq!(discover(&client, name).await.unwrap().resource, resource);
        }

        // Each collection lists its own simulator's objects, cluster-wide and per namespace.
        for (sim, resource) in [
            (
                &deployments,
                ApiResource::new("apps", "v1", "deployments", "Deployment"),
            ),
            (&pods, ApiResource::core("v1", "pods", "Pod")),
        ] {
            let lw = HttpListerWatcher::new(client.clone(), resource.clone());
            let list = decode_list(lw.list(&ListOptions::default()).await.unwrap()).unwrap();
            let truth = sim.truth();
            assert_eq!(
                list.items.len(),
                truth.objects.len(),
                "{}",
                resource.resource
            );
            assert!(list.items.iter().all(|o| o.gvk().kind == resource.kind));
            let ns = HttpListerWatcher::new(client.clone(), resource.in_namespace("ns-1"));
            let list = decode_list(ns.list(&ListOptions::default()).await.unwrap()).unwrap();
            let in_ns = truth
                .objects
                .keys()
                .filter(|k| k.namespace() == "ns-1")
                .count();
            assert_eq!(list.items.len(), in_ns);
        }

        // Paths of nothing served: 404.
        for path in [
            "/apis/apps/v1/replicasets",
            "/api/v1/nodes",
            "/apis/batch/v1/jobs",
        ] {
            let req = http::Request::get(path)
                .body(kube::client::Body::empty())
                .unwrap();
            assert_eq!(client.send(req).await.unwrap().status(), 404, "{path}");
        }

        // Control requests: `resource=` picks the simulator.
        let before = (deployments.resource_version(), pods.resource_version());
        let post = |path: &str| {
            let client = client.clone();
            let req = http::Request::post(path)
                .body(kube::client::Body::empty())
                .unwrap();
            async move { client.send(req).await.unwrap().status() }
        };
        assert!(
            post("/informer/v1/flood?events=7&resource=pods")
                .await
                .is_success()
        );
        assert_eq!(
            (deployments.resource_version(), pods.resource_version()),
            (before.0, before.1 + 7)
        );
        assert!(
            post("/informer/v1/flood?events=5").await.is_success(),
            "first by default"
        );
        assert_eq!(deployments.resource_version(), before.0 + 5);
        assert_eq!(
            post("/informer/v1/flood?events=5&resource=nodes").await,
            404
        );
        let stats = get("/informer/v1/stats?resource=pods").await;
        assert_eq!(stats["resource"], "pods");
        assert_eq!(stats["resourceVersion"], (before.1 + 7).to_string());
        server.shutdown().await;

        let twice = vec![
            (pods.clone(), ServerConfig::default()),
            (pods.clone(), ServerConfig::default()),
        ];
        assert!(matches!(
            serve_many(twice, addr).await,
            Err(ServerError::DuplicateResource(r)) if r == "v1/pods"
        ));
        assert!(matches!(
            serve_many(Vec::new(), addr).await,
            Err(ServerError::NoResources)
        ));
    });
}
