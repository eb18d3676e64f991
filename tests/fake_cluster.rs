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
use support::{eventually, fixtures, request, runtime};
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
    o.meta().labels().get(k).map_or("", |v| v)
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
                    && o.meta().labels().get("version").is_some()
                    && o.namespace() == "ns-1"
                    && phase(o) != "Running"
            },
        ),
        (Some("!version"), None, |o| {
            o.meta().labels().get("version").is_none()
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
        let (code, doc) = post(&url, "/informer/v1/rate?rate=5000&resource=pods").await;
        assert_eq!(code, 200, "{doc}");
        assert_eq!(
            doc,
            serde_json::json!({"resource": "pods", "rate": 5000.0, "paused": false})
        );
        let before = events();
        assert!(eventually(Duration::from_secs(10), || events() > before + 500).await);
        // Without `resource=`: every resource's driver.
        let (_, doc) = post(&url, "/informer/v1/pause").await;
        let drivers = doc["drivers"].as_array().unwrap();
        assert_eq!(drivers.len(), 3, "{doc}");
        assert!(drivers.iter().all(|d| d["paused"] == true), "{doc}");
        // At most one batch in flight when the pause came.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let paused = events();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(events(), paused, "no change while paused");
        let (_, doc) = post(&url, "/informer/v1/resume?resource=pods").await;
        assert_eq!(doc["paused"], false);
        assert!(eventually(Duration::from_secs(10), || events() > paused + 500).await);
        let (_, doc) = post(&url, "/informer/v1/rate?rate=0&resource=pods").await;
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

fn web(image: &str) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}
            }
        },
        "status": {"replicas": 9}
    }))
    .unwrap()
}

fn code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Writes through kube-rs (JSON) with a real server's rules, each seen on a watch as the
/// event a real server sends: create (status reset, generation 1; 409 AlreadyExists again),
/// update (409 Conflict on a stale resourceVersion; status kept; generation + 1 on a spec
/// change), the status subresource (generation kept), merge, strategic and JSON patches,
/// scale, delete with preconditions.
#[test]
fn writes_follow_the_real_apis_rules_and_are_watch_events() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
    let rt = runtime();
    let sim = support::json_deployments();
    let server = rt.block_on(start(&sim));
    rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let api: Api<Deployment> = Api::namespaced(client, "ns-1");
        let pp = PostParams::default();
        let start_rv = sim.resource_version();

        let created = api.create(&pp, &web("web:1")).await.unwrap();
        let m = &created.metadata;
        assert_eq!(m.namespace.as_deref(), Some("ns-1"));
        assert_eq!(m.generation, Some(1));
        assert!(m.uid.as_deref().is_some_and(|u| u.len() == 36), "{m:?}");
        assert!(m.creation_timestamp.is_some());
        assert_eq!(
            created.status.as_ref().and_then(|s| s.replicas),
            None,
            "status is reset on create"
        );
        let (c, msg) = code(api.create(&pp, &web("web:1")).await);
        assert_eq!((c, msg.as_str()), (409, "deployments.apps \"web\" already exists"));

        // Update: stale resourceVersion → Conflict; current → spec change bumps generation,
        // the status in the body is ignored.
        let mut stale = created.clone();
        stale.metadata.resource_version = Some("1".into());
        let (c, msg) = code(api.replace("web", &pp, &stale).await);
        assert_eq!(c, 409);
        assert!(msg.contains("the object has been modified"), "{msg}");
        let mut next = web("web:2");
        next.metadata.resource_version = created.metadata.resource_version.clone();
        let updated = api.replace("web", &pp, &next).await.unwrap();
        assert_eq!(updated.metadata.generation, Some(2));
        assert_eq!(updated.metadata.uid, created.metadata.uid);
        assert_eq!(updated.status.as_ref().and_then(|s| s.replicas), None);

        // Status subresource: written; generation kept; spec changes in the body ignored.
        let mut st = updated.clone();
        st.status = Some(serde_json::from_value(serde_json::json!({"replicas": 2, "readyReplicas": 2, "observedGeneration": 2})).unwrap());
        st.spec.replicas = Some(5);
        let with_status = api.replace_status("web", &pp, &st).await.unwrap();
        assert_eq!(with_status.status.as_ref().and_then(|s| s.ready_replicas), Some(2));
        assert_eq!(with_status.spec.replicas, Some(2));
        assert_eq!(with_status.metadata.generation, Some(2));

        // Patches.
        let merged = api
            .patch("web", &PatchParams::default(), &Patch::Merge(serde_json::json!({"metadata": {"labels": {"tier": "front"}}})))
            .await
            .unwrap();
        assert_eq!(merged.metadata.labels.as_ref().unwrap()["tier"], "front");
        assert_eq!(merged.metadata.generation, Some(2), "metadata only");
        let strategic = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Strategic(serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:3"}]}}}})),
            )
            .await
            .unwrap();
        let spec = &strategic.spec;
        let containers = &spec.template.spec.as_ref().unwrap().containers;
        assert_eq!((containers.len(), containers[0].image.as_deref()), (1, Some("web:3")));
        assert_eq!(strategic.metadata.generation, Some(3));
        let failed: Result<Deployment, _> = api
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::<()>::Json(serde_json::from_value(serde_json::json!([{"op": "test", "path": "/spec/replicas", "value": 7}])).unwrap()),
            )
            .await;
        assert_eq!(code(failed).0, 422);

        // Scale.
        let scale = api.get_scale("web").await.unwrap();
        assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
        assert_eq!(scale.status.as_ref().and_then(|s| s.selector.clone()).as_deref(), Some("app=web"));
        let scaled = api
            .patch_scale("web", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"replicas": 4}})))
            .await
            .unwrap();
        assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(4));
        let d = api.get("web").await.unwrap();
        assert_eq!(d.spec.replicas, Some(4));
        assert_eq!(d.metadata.generation, Some(4));

        // Delete with preconditions.
        let wrong = DeleteParams {
            preconditions: Some(Preconditions { uid: Some("nope".into()), resource_version: None }),
            ..Default::default()
        };
        assert_eq!(code(api.delete("web", &wrong).await).0, 409);
        api.delete("web", &DeleteParams::default()).await.unwrap();
        assert_eq!(code(api.get("web").await).0, 404);
        assert_eq!(code(api.delete("web", &DeleteParams::default()).await).0, 404);

        // Every successful write was one watch event, in order, at consecutive versions.
        let lw = HttpListerWatcher::new(
            ClientOptions { server: Some(server.url()), ..Default::default() }.client().await.unwrap(),
            ApiResource::new("apps", "v1", "deployments", "Deployment"),
        );
        let mut w = lw
            .watch(&WatchOptions { resource_version: start_rv.to_string(), ..Default::default() })
            .await
            .unwrap();
        let mut dec = WatchDecoder::new(WatchFormat::Json, 1 << 24);
        let mut seen = Vec::new();
        while seen.len() < 7 {
            let chunk = tokio::time::timeout(Duration::from_secs(10), w.body.next_chunk()).await.unwrap().unwrap().unwrap();
            dec.push(chunk);
            while let Ok(Some(ev)) = dec.next_event() {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &ev {
                    seen.push((ev.event_type().as_str().to_owned(), o.resource_version().to_owned()));
                }
            }
        }
        let types: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
        );
        let rvs: Vec<u64> = seen.iter().map(|(_, rv)| rv.parse().unwrap()).collect();
        assert_eq!(rvs, (start_rv + 1..=start_rv + 7).collect::<Vec<_>>());
    });
    rt.block_on(server.shutdown());
}

/// A protobuf server (the default) takes JSON writes: metadata changes (as `kubectl label` and
/// `annotate` send them) keep the template's bytes; a spec change is converted by the schema
/// (`tests/fake_cluster_encodings.rs` has more).
#[test]
fn a_protobuf_server_takes_metadata_writes_in_json() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, Patch, PatchParams};
    let rt = runtime();
    let sim = support::sim("head", |c| c.initial_objects(5).target_objects(5));
    let server = rt.block_on(support::start(&sim));
    let key = sim.truth().objects.keys().next().unwrap().clone();
    rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let api: Api<Pod> = Api::namespaced(client, key.namespace());
        let labelled = api
            .patch(
                key.name(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}}})),
            )
            .await
            .unwrap();
        assert_eq!(labelled.metadata.labels.as_ref().unwrap()["team"], "a");
        // Stored as protobuf: what protobuf clients read.
        let stored = sim.get(&key).unwrap();
        assert_eq!(stored.encoding(), informer::object::Encoding::Protobuf);
        assert_eq!(label(&stored, "team"), "a");
        assert_eq!(stored.meta().annotations().get("note"), Some("x"));
        let spec: Result<Pod, _> = api
            .patch(
                key.name(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"nodeName": "elsewhere"}})),
            )
            .await;
        assert_eq!(spec.unwrap().spec.unwrap().node_name.as_deref(), Some("elsewhere"));
        let stored: k8s_pb::api::core::v1::Pod = sim.get(&key).unwrap().decode().unwrap();
        assert_eq!(stored.spec.unwrap().node_name.as_deref(), Some("elsewhere"));
    });
    rt.block_on(server.shutdown());
}

/// A protobuf server of Deployments keeps their JSON form when a controller writes their
/// status (in protobuf) and takes status writes in JSON: kube-rs reads and patches them.
#[test]
fn protobuf_deployments_keep_a_json_form_through_status_writes() {
    use k8s_openapi::api::apps::v1::Deployment as JsonDeployment;
    use kube::api::{Api, ListParams, Patch, PatchParams};
    let rt = runtime();
    let dir = fixtures();
    let templates = Templates::deployments(&dir).unwrap();
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("k8s-testdata/HEAD/apps.v1.Deployment.json")).unwrap(),
    )
    .unwrap();
    let twins: Vec<Object> = informer::sim::DEPLOYMENT_REPLICAS
        .iter()
        .map(|r| {
            let mut d = json.clone();
            d["spec"]["replicas"] = (*r).into();
            informer::object::decode(d.to_string().into()).unwrap()
        })
        .collect();
    let sim = SimServer::new(
        SimConfig::new(templates)
            .seed(2)
            .namespaces(2)
            .apps(5)
            .initial_objects(6)
            .target_objects(6),
    )
    .unwrap();
    let server = rt.block_on(async {
        serve(
            sim.clone(),
            ServerConfig::default().json_twins(twins),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap()
    });
    let key = sim.truth().objects.keys().next().unwrap().clone();
    // A controller's protobuf status write.
    let cur = sim.get(&key).unwrap();
    let mut d: k8s_pb::api::apps::v1::Deployment = cur.decode().unwrap();
    d.status = Some(k8s_pb::api::apps::v1::DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(3),
        ready_replicas: Some(2),
        ..Default::default()
    });
    let body = {
        use prost::Message as _;
        informer::object::encode_envelope(cur.gvk(), &d.encode_to_vec())
    };
    let written = informer::object::decode(body).unwrap();
    sim.replace_object(&key, &written, informer::sim::WriteTarget::Status)
        .unwrap();
    rt.block_on(async {
        let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
        let api: Api<JsonDeployment> = Api::namespaced(client.clone(), key.namespace());
        let got = api.get(key.name()).await.unwrap();
        let st = got.status.clone().unwrap();
        assert_eq!((st.replicas, st.ready_replicas, st.observed_generation), (Some(3), Some(2), Some(1)));
        assert_eq!(got.spec.replicas, d.spec.as_ref().unwrap().replicas);
        // The whole collection still has a JSON form.
        let all: Api<JsonDeployment> = Api::all(client);
        assert_eq!(all.list(&ListParams::default()).await.unwrap().items.len(), 6);
        // A JSON status patch is stored in protobuf.
        api.patch_status(
            key.name(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"readyReplicas": 3, "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": "2026-12-04T10:00:00Z"}]}})),
        )
        .await
        .unwrap();
        let stored: k8s_pb::api::apps::v1::Deployment = sim.get(&key).unwrap().decode().unwrap();
        let s = stored.status.unwrap();
        assert_eq!((s.replicas, s.ready_replicas), (Some(3), Some(3)));
        assert_eq!(s.conditions[0].r#type.as_deref(), Some("Available"));
        assert_eq!(
            s.conditions[0].last_update_time.as_ref().and_then(|t| t.seconds),
            Some("2026-12-04T10:00:00Z".parse::<jiff::Timestamp>().unwrap().as_second())
        );
    });
    rt.block_on(server.shutdown());
}

/// One request of a table of cases: method, path, headers, body, the code it must get.
type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, Vec<u8>, u16);

/// Writes a real server refuses are refused with its codes (422 for invalid objects and
/// patches that do not apply, 400 for bodies and patches that do not decode, 415 for unknown
/// media types, 404 for a namespace that does not exist, 403 for deleting `default`); a
/// finalizer holds a deleted object until an update removes it; uids never repeat across
/// resources; Table-only clients get a Table; list options are validated.
#[test]
fn invalid_writes_get_a_real_servers_answers_and_finalizers_hold_deletes() {
    let rt = runtime();
    let dir = fixtures();
    let config = |t: Templates, n: usize| {
        SimConfig::new(t)
            .seed(4)
            .namespaces(2)
            .apps(5)
            .initial_objects(n)
            .target_objects(n)
    };
    let deployments = SimServer::new(config(
        Templates::from_objects(Templates::deployment_twins(&dir).unwrap()).unwrap(),
        8,
    ))
    .unwrap();
    let pods = SimServer::new(config(
        Templates::from_objects(Templates::pod_state_twins(&dir).unwrap()).unwrap(),
        20,
    ))
    .unwrap();
    let server = rt.block_on(async {
        informer::server::serve_many(
            vec![
                (deployments.clone(), ServerConfig::default()),
                (pods.clone(), ServerConfig::default()),
            ],
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap()
    });
    let url = server.url();
    rt.block_on(async {
        // uids are unique across the resources of one server (same seed for both).
        let mut uids = std::collections::HashSet::new();
        for path in ["/api/v1/pods", "/apis/apps/v1/deployments", "/api/v1/namespaces"] {
            let (_, list) = request(&url, "GET", path, &[], b"").await;
            for item in list["items"].as_array().unwrap() {
                assert!(uids.insert(item["metadata"]["uid"].as_str().unwrap().to_owned()), "{path}");
            }
        }
        let d = deployments.truth().objects.keys().next().unwrap().clone();
        let d_path = format!("/apis/apps/v1/namespaces/{}/deployments/{}", d.namespace(), d.name());
        let merge = [("Content-Type", "application/merge-patch+json")];
        let json = [("Content-Type", "application/json")];
        let cases: Vec<Case<'_>> = vec![
            ("PATCH", d_path.clone(), merge.to_vec(), br#"{"spec":{"replicas":"abc"}}"#.to_vec(), 422),
            ("PATCH", d_path.clone(), merge.to_vec(), br#"{"spec":{"replicas":-3}}"#.to_vec(), 422),
            ("PATCH", d_path.clone(), merge.to_vec(), br#"{"spec":{"selector":{"matchLabels":{"zzz":"1"}}}}"#.to_vec(), 422),
            ("PATCH", d_path.clone(), merge.to_vec(), br#"{"metadata":{"labels":{"bad key!":"x"}}}"#.to_vec(), 422),
            ("PATCH", d_path.clone(), merge.to_vec(), b"{oops".to_vec(), 400),
            ("PATCH", d_path.clone(), vec![("Content-Type", "application/strategic-merge-patch+json")], br#"{"spec":{"$patch":"frob"}}"#.to_vec(), 422),
            ("PATCH", d_path.clone(), vec![("Content-Type", "application/json-patch+json")], br#"{"op":"add"}"#.to_vec(), 400),
            ("POST", "/api/v1/namespaces/ns-0/pods".into(), json.to_vec(), br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":"hello"}"#.to_vec(), 422),
            ("POST", "/api/v1/namespaces/ns-0/pods".into(), json.to_vec(), br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#.to_vec(), 422),
            ("POST", "/api/v1/namespaces/ns-0/pods".into(), json.to_vec(), br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p2"},"spec":{"containers":[]}}"#.to_vec(), 422),
            ("POST", "/api/v1/namespaces/ns-0/pods".into(), json.to_vec(), br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}"#.to_vec(), 400),
            ("POST", "/api/v1/namespaces/ns-0/pods".into(), vec![("Content-Type", ";;;")], b"{}".to_vec(), 415),
            ("POST", "/api/v1/namespaces/nope/pods".into(), json.to_vec(), br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p3"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#.to_vec(), 404),
            ("DELETE", "/api/v1/namespaces/default".into(), vec![], Vec::new(), 403),
            ("GET", format!("/api/v1/namespaces/{}/pods/x/scale", d.namespace()), vec![], Vec::new(), 404),
            ("GET", "/api/v1/pods?resourceVersionMatch=Bogus&resourceVersion=1".into(), vec![], Vec::new(), 422),
            ("GET", "/api/v1/pods?resourceVersionMatch=NotOlderThan".into(), vec![], Vec::new(), 422),
        ];
        for (method, path, headers, body, want) in cases {
            let (code, doc) = request(&url, method, &path, &headers, &body).await;
            assert_eq!(code, want, "{method} {path} {}: {doc}", String::from_utf8_lossy(&body));
            assert_eq!(doc["kind"], "Status", "{method} {path}: {doc}");
        }
        // A body nested past the decoder's limit: 400, and the server goes on.
        let deep = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"deep"}},"spec":{}{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let (code, _) = request(&url, "POST", "/api/v1/namespaces/ns-0/pods", &json, deep.as_bytes()).await;
        assert_eq!(code, 400);
        // Table only: a Table.
        let (code, t) = request(&url, "GET", "/api/v1/pods", &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")], b"").await;
        assert_eq!((code, t["kind"].as_str()), (200, Some("Table")));
        // A finalizer holds a delete: marked, then gone when the last finalizer goes.
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"held","finalizers":["example.com/hold"]},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
        let (code, _) = request(&url, "POST", "/api/v1/namespaces/ns-1/pods", &json, body).await;
        assert_eq!(code, 201);
        let p = "/api/v1/namespaces/ns-1/pods/held";
        let (code, held) = request(&url, "DELETE", p, &[], b"").await;
        assert_eq!(code, 200);
        assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
        let (code, _) = request(&url, "GET", p, &[], b"").await;
        assert_eq!(code, 200, "still there");
        let (code, _) = request(&url, "PATCH", p, &merge, br#"{"metadata":{"finalizers":null}}"#).await;
        assert_eq!(code, 200);
        let (code, _) = request(&url, "GET", p, &[], b"").await;
        assert_eq!(code, 404, "deleted with its last finalizer");
        // A Deployment's annotations count as a change of generation; a status writer may not
        // change its labels.
        let generation = |doc: &serde_json::Value| doc["metadata"]["generation"].as_i64().unwrap();
        let (_, before) = request(&url, "GET", &d_path, &[], b"").await;
        let (_, after) = request(&url, "PATCH", &d_path, &merge, br#"{"metadata":{"annotations":{"bump":"x"}}}"#).await;
        assert_eq!(generation(&after), generation(&before) + 1);
        let (code, st) = request(&url, "PATCH", &format!("{d_path}/status"), &merge, br#"{"metadata":{"labels":{"st":"1"}}}"#).await;
        assert_eq!(code, 200);
        assert!(st["metadata"]["labels"].get("st").is_none(), "{st}");
        // status.podIP selects Pods that have only the old single field.
        let (_, list) = request(&url, "GET", "/api/v1/pods?fieldSelector=status.podIP%3D10.244.2.8", &[], b"").await;
        let n = list["items"].as_array().unwrap().len();
        let (_, all) = request(&url, "GET", "/api/v1/pods", &[], b"").await;
        let with_ip = all["items"].as_array().unwrap().iter().filter(|p| p["status"]["podIP"] == "10.244.2.8").count();
        assert!(with_ip > 0);
        assert_eq!(n, with_ip);
    });
    rt.block_on(server.shutdown());
}
