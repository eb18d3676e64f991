//! The engine against a real kube-apiserver with etcd (`interop/apiserver`, built from the
//! `k8s.io/kubernetes` module; see `tests/kube_apiserver/mod.rs`). Objects are written through
//! the real API with the `kube` crate; the caches are checked against fresh lists from the
//! server.

mod interop;
mod kube_apiserver;
mod views;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::client::{ApiResource, HttpListerWatcher};
use informer::object::Encoding;
use informer::reflector::{BackoffConfig, ListerWatcher, ReflectorConfig};
use informer::{HandlerOptions, Informer, InformerConfig};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube_apiserver::fixtures::{Fixture, labelled_pod, widget_crd};
use kube_apiserver::gate::Gate;
use kube_apiserver::workloads::{add_pod, deployment_family, expected_statuses, set_ready};
use kube_apiserver::{CONCURRENCY, KubeApiServer, delete_each, each, namespace, replace_each};
use views::{Recorder, View, ViewMap, diff, meta_view, store_view};

fn reflector() -> ReflectorConfig {
    ReflectorConfig::default().backoff(BackoffConfig {
        initial: Duration::from_millis(50),
        max: Duration::from_millis(500),
        ..Default::default()
    })
}

/// Polls `f` every 50 ms until it gives `None` or `timeout` passes; the last answer.
async fn settle<F: FnMut() -> Option<String>>(timeout: Duration, mut f: F) -> Option<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let r = f();
        if r.is_none() || tokio::time::Instant::now() >= deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An informer over HTTP with `handlers` recording handlers, started and synced.
async fn started<L: ListerWatcher>(
    lw: L,
    config: ReflectorConfig,
    handlers: usize,
) -> (Informer<L>, Vec<Arc<Mutex<View>>>) {
    let informer = Informer::new(
        lw,
        InformerConfig {
            reflector: config,
            ..Default::default()
        },
    );
    let views: Vec<_> = (0..handlers)
        .map(|i| {
            let r = Recorder::default();
            informer
                .add_event_handler(r.clone(), HandlerOptions::new().name(format!("view-{i}")))
                .unwrap();
            r.0
        })
        .collect();
    informer.start(&tokio::runtime::Handle::current());
    if let Err(e) = informer.wait_for_cache_sync(Duration::from_secs(60)).await {
        panic!(
            "{e} (60 s): {:?}",
            informer.reflector_metrics().map(|m| m.snapshot())
        );
    }
    (informer, views)
}

/// The store and every handler's view equal `expected` (waiting up to 60 s for the store),
/// and no handler saw a contract violation.
async fn assert_converged<L: ListerWatcher>(
    informer: &Informer<L>,
    views: &[Arc<Mutex<View>>],
    expected: &ViewMap,
    what: &str,
) {
    let d = settle(Duration::from_secs(60), || {
        diff(expected, &store_view(informer))
    })
    .await;
    assert!(
        d.is_none(),
        "{what}: store differs from the server's list: {d:?}"
    );
    tokio::task::block_in_place(|| informer.flush());
    for (i, v) in views.iter().enumerate() {
        // Copied out: a failed assertion must not poison the lock the handler still takes.
        let (violations, objects) = {
            let v = v.lock().unwrap();
            (v.violations.clone(), v.objects.clone())
        };
        assert!(violations.is_empty(), "{what}: handler {i}: {violations:?}");
        assert_eq!(diff(expected, &objects), None, "{what}: handler {i}'s view");
    }
}

/// Writes `objects` objects of `K` through the real API into a fresh namespace while an
/// informer (3 handlers) watches it: a first batch before the informer starts (the initial
/// list), then creates, two rounds of updates and deletes in batches. The store and every view
/// must end equal to a fresh list from the server.
async fn writes_converge<K: Fixture>(resource: ApiResource, objects: usize) {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ns = namespace(&client, &resource.resource).await;
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    let create = |range: std::ops::Range<usize>| {
        let api = api.clone();
        each(range.collect(), CONCURRENCY, move |i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &K::make(i)).await }
        })
    };

    let before = objects / 5;
    let mut live: Vec<K> = create(0..before).await;
    let lw = HttpListerWatcher::new(client.clone(), resource.clone().in_namespace(&ns));
    // The first list asks for resourceVersion 0, served from the watch cache, which may not
    // hold the newest writes yet (a real server's "any version"); the watch brings the rest.
    let (informer, views) = started(lw, reflector(), 3).await;

    // Creates, updates and deletes in batches of about a tenth each, while the informer runs.
    let batch = (objects / 10).max(1);
    let mut next = before;
    let mut round = 0;
    while next < objects {
        let end = (next + batch).min(objects);
        live.extend(create(next..end).await);
        next = end;
        round += 1;
        // Update every third live object, then delete every seventh.
        let picked: Vec<K> = live.iter().step_by(3).cloned().collect();
        let updated = replace_each(&api, picked, move |o: &mut K| o.change(round)).await;
        for u in updated {
            if let Some(slot) = live.iter_mut().find(|o| o.meta().name == u.meta().name) {
                *slot = u;
            }
        }
        let (gone, kept): (Vec<_>, Vec<_>) = live
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 7 == round % 7);
        live = kept.into_iter().map(|(_, o)| o).collect();
        let gone = gone
            .iter()
            .map(|(_, o)| o.meta().name.clone().unwrap())
            .collect();
        delete_each(&api, gone).await;
    }

    let fresh = api.list(&ListParams::default()).await.unwrap();
    let expected = meta_view(fresh.items.iter().map(|o| o.meta()));
    assert!(expected.len() > objects / 3, "{} left", expected.len());
    assert_converged(&informer, &views, &expected, &resource.resource).await;

    let snap = informer.store().snapshot();
    let wire = if resource.protobuf {
        Encoding::Protobuf
    } else {
        Encoding::Json
    };
    assert!(
        snap.iter().all(|(_, o)| o.encoding() == wire),
        "{}: every cached object as {wire:?}",
        resource.resource
    );
    let stats = informer.reflector_metrics().unwrap().snapshot();
    assert_eq!(stats.relists, 0, "{stats:?}");
    assert!(stats.events as usize >= objects, "{stats:?}");
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_configmaps_converge_with_the_server() {
    writes_converge::<ConfigMap>(ApiResource::core("v1", "configmaps", "ConfigMap"), 1_500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_pods_converge_with_the_server() {
    writes_converge::<Pod>(ApiResource::core("v1", "pods", "Pod"), 1_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_deployments_converge_with_the_server() {
    writes_converge::<Deployment>(
        ApiResource::new("apps", "v1", "deployments", "Deployment"),
        1_000,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_custom_resources_converge_with_the_server() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ar = widget_crd(&client).await;
    let ns = namespace(&client, "widgets").await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let make = |i: usize, round: usize| {
        DynamicObject::new(&format!("w-{i}"), &ar)
            .within(&ns)
            .data(serde_json::json!({"spec": {"size": i, "round": round}}))
    };
    let create = |range: std::ops::Range<usize>| {
        let (api, objs) = (api.clone(), range.map(|i| make(i, 0)).collect());
        each(objs, CONCURRENCY, move |o: DynamicObject| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &o).await }
        })
    };
    create(0..200).await;
    let resource = ApiResource::new("example.com", "v1", "widgets", "Widget").in_namespace(&ns);
    assert!(!resource.protobuf, "custom resources speak JSON");
    let (informer, views) = started(
        HttpListerWatcher::new(client.clone(), resource),
        reflector(),
        3,
    )
    .await;
    let mut live: Vec<DynamicObject> = create(200..1_000).await;
    for round in 1..=2 {
        let picked: Vec<DynamicObject> = live.iter().step_by(2).cloned().collect();
        let updated = replace_each(&api, picked, move |o: &mut DynamicObject| {
            o.data["spec"]["round"] = round.into();
        })
        .await;
        for u in updated {
            if let Some(slot) = live.iter_mut().find(|o| o.metadata.name == u.metadata.name) {
                *slot = u;
            }
        }
    }
    let gone: Vec<String> = live
        .iter()
        .step_by(5)
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    delete_each(&api, gone).await;
    let fresh = api.list(&ListParams::default()).await.unwrap();
    let expected = meta_view(fresh.items.iter().map(|o| &o.metadata));
    assert_eq!(expected.len(), 1_000 - 800 / 5);
    assert_converged(&informer, &views, &expected, "widgets").await;
    let snap = informer.store().snapshot();
    assert!(snap.iter().all(|(_, o)| o.encoding() == Encoding::Json));
    assert_eq!(informer.reflector_metrics().unwrap().snapshot().relists, 0);
    tokio::task::block_in_place(|| informer.shutdown());
}

/// Creates `n` ConfigMaps `o-<from>`.. in `ns`; returns them as the server answered.
async fn configmaps(
    client: &kube::Client,
    ns: &str,
    range: std::ops::Range<usize>,
) -> Vec<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    each(range.collect(), CONCURRENCY, move |i| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &ConfigMap::make(i))
                .await
        }
    })
    .await
}

/// The ConfigMaps of `ns` as a fresh list from the server sees them.
async fn fresh_configmaps(client: &kube::Client, ns: &str) -> ViewMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await.unwrap();
    meta_view(list.items.iter().map(|o| &o.metadata))
}

fn configmaps_in(client: &kube::Client, ns: &str) -> HttpListerWatcher {
    HttpListerWatcher::new(
        client.clone(),
        ApiResource::core("v1", "configmaps", "ConfigMap").in_namespace(ns),
    )
}

fn rv_of(o: &ConfigMap) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_arrive_and_advance_the_resource_version() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ns = namespace(&client, "bookmarks").await;
    configmaps(&client, &ns, 0..5).await;
    // Watches of 5-10 s: the watch cache sends a bookmark 2 s before a watch's deadline.
    let config = reflector().min_watch_timeout(Duration::from_secs(5));
    let (informer, _views) = started(configmaps_in(&client, &ns), config, 1).await;
    let listed = informer.store().resource_version();

    // Writes in another namespace move the server's resourceVersion past anything this
    // informer holds; only a bookmark can tell it.
    let other = namespace(&client, "bookmarks-other").await;
    let newest = configmaps(&client, &other, 0..3)
        .await
        .iter()
        .map(rv_of)
        .max()
        .unwrap();
    assert!(newest > listed);
    let snap = tokio::time::timeout(Duration::from_secs(40), informer.store().wait_for(newest))
        .await
        .expect("no bookmark brought the store to the newest resourceVersion within 40 s")
        .unwrap();
    assert!(snap.resource_version() >= newest);
    assert_eq!(snap.len(), 5, "a bookmark carries no object");
    let stats = informer.reflector_metrics().unwrap().snapshot();
    assert!(stats.bookmarks >= 1, "{stats:?}");
    assert_eq!(stats.relists, 0, "{stats:?}");
    tokio::task::block_in_place(|| informer.shutdown());
}

/// A streaming initial list against `server`: with WatchList on, no list request is made and
/// the same stream goes on live; with it off, the informer falls back to list + watch.
async fn streaming_list(server: &KubeApiServer, gate_on: bool) {
    let client = server.client().await;
    let ns = namespace(&client, "watchlist").await;
    configmaps(&client, &ns, 0..300).await;
    let gate = Gate::new(configmaps_in(&client, &ns));
    let (informer, views) = started(gate.clone(), reflector().use_watch_list(true), 2).await;
    let stats = informer.reflector_metrics().unwrap().snapshot();
    let lists = gate.lists.lock().unwrap().len();
    if gate_on {
        // A streaming list at "" is a consistent read: all 300, where a list at "0" may lag.
        assert_eq!(informer.store().len(), 300);
        assert_eq!(lists, 0, "the initial state came on the watch: {stats:?}");
        assert!(stats.watch_lists >= 1, "{stats:?}");
        assert_eq!(stats.watch_list_fallbacks, 0, "{stats:?}");
        tokio::task::block_in_place(|| informer.flush());
        for v in &views {
            let initial_adds = v.lock().unwrap().initial_adds;
            assert_eq!(initial_adds, 300);
        }
    } else {
        assert!(stats.watch_list_fallbacks >= 1, "{stats:?}");
        assert!(lists >= 1, "fell back to a list: {stats:?}");
    }
    // Live changes after the initial state.
    let created = configmaps(&client, &ns, 300..400).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let picked = created.into_iter().step_by(2).collect();
    replace_each(&api, picked, |o: &mut ConfigMap| o.change(1)).await;
    let expected = fresh_configmaps(&client, &ns).await;
    assert_eq!(expected.len(), 400);
    assert_converged(&informer, &views, &expected, "watch-list").await;
    if gate_on {
        assert_eq!(gate.lists.lock().unwrap().len(), 0, "still no list");
    }
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_initial_list_against_the_real_server() {
    streaming_list(KubeApiServer::shared(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_initial_list_falls_back_when_the_gate_is_off() {
    let server = KubeApiServer::start(&["--feature-gates=WatchList=false"]);
    streaming_list(&server, false).await;
}

/// The first event of a raw watch from `rv` (JSON, through kube): `Some(code)` for an
/// `ERROR` event, `None` for anything else or nothing within 3 s.
async fn watch_error(client: &kube::Client, ns: &str, rv: u64) -> Option<u16> {
    use futures_util::StreamExt;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let params = kube::api::WatchParams::default().timeout(3);
    let stream = api.watch(&params, &rv.to_string()).await.ok()?;
    let mut stream = std::pin::pin!(stream);
    match tokio::time::timeout(Duration::from_secs(4), stream.next()).await {
        Ok(Some(Ok(kube::api::WatchEvent::Error(e)))) => Some(e.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_410_relists_with_tombstones_and_loses_nothing() {
    // No watch cache: watches read etcd, which the apiserver compacts every second.
    let server = KubeApiServer::start(&["--watch-cache=false", "--etcd-compaction-interval=1s"]);
    let client = server.client().await;
    let ns = namespace(&client, "gone").await;
    let initial = configmaps(&client, &ns, 0..200).await;
    let gate = Gate::new(configmaps_in(&client, &ns));
    let (informer, views) = started(gate.clone(), reflector(), 3).await;
    // One event through the watch first: a watch cut before any event within a second of
    // opening is a "very short watch", which relists instead of watching again.
    let marker = configmaps(&client, &ns, 999..1_000).await;
    let synced_rv = rv_of(&marker[0]);
    tokio::time::timeout(
        Duration::from_secs(30),
        informer.store().wait_for(synced_rv),
    )
    .await
    .expect("the watch did not deliver the marker")
    .unwrap();

    // The informer loses its connection; meanwhile 50 objects are deleted, 50 created, 50
    // changed, and etcd's compaction passes the informer's resourceVersion. It keeps trying to
    // watch from that version (refused: no relist).
    gate.block(true);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let deleted: Vec<String> = initial
        .iter()
        .take(50)
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    delete_each(&api, deleted).await;
    configmaps(&client, &ns, 1_000..1_050).await;
    replace_each(&api, initial[50..100].to_vec(), |o: &mut ConfigMap| {
        o.change(1)
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while watch_error(&client, &ns, synced_rv).await != Some(410) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "etcd was not compacted past {synced_rv} within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    gate.block(false);
    let expected = fresh_configmaps(&client, &ns).await;
    assert_eq!(expected.len(), 201);
    assert_converged(&informer, &views, &expected, "after the 410").await;
    let stats = informer.reflector_metrics().unwrap().snapshot();
    // The informer's own watch from `synced_rv` got the server's 410, then it relisted.
    assert!(stats.expired >= 1, "{stats:?}");
    assert_eq!(stats.relists, 1, "{stats:?}");
    for (i, v) in views.iter().enumerate() {
        let tombstones = v.lock().unwrap().tombstones;
        assert_eq!(
            tombstones, 50,
            "handler {i}: the deletions found by the relist"
        );
    }
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_of_10_000_objects_and_an_expired_continue_token() {
    // No watch cache (lists read etcd page by page) and no compaction but the test's own.
    let server = KubeApiServer::start(&["--watch-cache=false", "--etcd-compaction-interval=0"]);
    let client = server.client().await;
    let ns = namespace(&client, "pages").await;
    configmaps(&client, &ns, 0..10_000).await;

    let gate = Gate::new(configmaps_in(&client, &ns));
    let (informer, views) = started(gate.clone(), reflector(), 1).await;
    let expected = fresh_configmaps(&client, &ns).await;
    assert_converged(&informer, &views, &expected, "paginated list").await;
    let stats = informer.reflector_metrics().unwrap().snapshot();
    assert_eq!(
        stats.list_pages, 20,
        "10 000 objects in pages of 500: {stats:?}"
    );
    {
        let lists = gate.lists.lock().unwrap();
        assert_eq!(lists.len(), 20);
        assert!(lists.iter().all(|o| o.limit == Some(500)));
        assert!(lists[1..].iter().all(|o| o.continue_token.is_some()));
    }
    tokio::task::block_in_place(|| informer.shutdown());

    // A second informer's continue token expires between its first and second page.
    let gate = Gate::new(configmaps_in(&client, &ns));
    let (paused_tx, paused) = tokio::sync::oneshot::channel();
    let (resume, resume_rx) = tokio::sync::oneshot::channel();
    *gate.pause_second_page.lock().unwrap() = Some((paused_tx, resume_rx));
    let informer = Informer::new(
        gate.clone(),
        InformerConfig {
            reflector: reflector(),
            ..Default::default()
        },
    );
    let view = Recorder::default();
    informer
        .add_event_handler(view.clone(), informer::HandlerOptions::new())
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    tokio::time::timeout(Duration::from_secs(30), paused)
        .await
        .unwrap()
        .unwrap();
    let newer = configmaps(&client, &ns, 10_000..10_001).await;
    server.compact(server.etcd_revision());
    resume.send(()).unwrap();
    informer
        .wait_for_cache_sync(Duration::from_secs(60))
        .await
        .unwrap();
    let expected = fresh_configmaps(&client, &ns).await;
    assert_eq!(expected.len(), 10_001);
    assert_converged(
        &informer,
        std::slice::from_ref(&view.0),
        &expected,
        "after the expired token",
    )
    .await;
    assert!(informer.store().contains_key(&format!(
        "{ns}/{}",
        newer[0].metadata.name.as_deref().unwrap()
    )));
    let lists = gate.lists.lock().unwrap().clone();
    assert!(lists.len() >= 3, "{lists:?}");
    assert!(lists[1].continue_token.is_some());
    let full = &lists[2];
    assert_eq!(
        (full.limit, &full.continue_token),
        (None, &None),
        "one full list after the 410"
    );
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_field_and_namespace_selectors_are_evaluated_by_the_server() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let (ns_a, ns_b) = (
        namespace(&client, "sel-a").await,
        namespace(&client, "sel-b").await,
    );
    let tier = ns_a.clone(); // a label value no other test uses
    for ns in [&ns_a, &ns_b] {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let tier = tier.clone();
        each((0..210).collect(), CONCURRENCY, move |i| {
            let (api, p) = (api.clone(), labelled_pod(i, &tier));
            async move { api.create(&PostParams::default(), &p).await }
        })
        .await;
    }
    let pods = ApiResource::core("v1", "pods", "Pod");
    let label = format!("tier={tier},app in (app-1,app-2)");
    let field = "spec.nodeName=node-1".to_owned();
    // (informer resource, label selector, field selector, the list that must equal its store)
    let cases = [
        (
            pods.clone().in_namespace(&ns_a),
            None,
            None,
            Some(ns_a.clone()),
        ),
        (pods.clone(), Some(label.clone()), None, None),
        (
            pods.clone().in_namespace(&ns_b),
            Some(label.clone()),
            Some(field.clone()),
            Some(ns_b.clone()),
        ),
    ];
    let mut running = Vec::new();
    for (resource, l, f, _) in &cases {
        let config = reflector()
            .label_selector(l.clone())
            .field_selector(f.clone());
        running.push(
            started(
                HttpListerWatcher::new(client.clone(), resource.clone()),
                config,
                2,
            )
            .await,
        );
    }
    // Move pods into and out of the label selector: the server sends DELETED to a watch
    // whose selector an object leaves, ADDED when it enters.
    for ns in [&ns_a, &ns_b] {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let list = api.list(&ListParams::default()).await.unwrap().items;
        let picked = list.into_iter().step_by(4).collect();
        replace_each(&api, picked, |p: &mut Pod| {
            let labels = p.metadata.labels.get_or_insert_default();
            let moved = if labels["app"] == "app-1" {
                "app-3"
            } else {
                "app-1"
            };
            labels.insert("app".into(), moved.into());
        })
        .await;
    }
    for ((resource, l, f, ns), (informer, views)) in cases.iter().zip(&running) {
        let api: Api<Pod> = match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let mut params = ListParams::default();
        if let Some(l) = l {
            params = params.labels(l);
        }
        if let Some(f) = f {
            params = params.fields(f);
        }
        let list = api.list(&params).await.unwrap();
        let expected = meta_view(list.items.iter().map(|o| &o.metadata));
        let what = format!("{} {l:?} {f:?}", resource.collection_path());
        assert!(
            !expected.is_empty() && expected.len() < 420,
            "{what}: {} pods",
            expected.len()
        );
        assert_converged(informer, views, &expected, &what).await;
    }
    // The label selector spans both namespaces; the field selector keeps a third of one.
    let across = running[1].0.store().snapshot();
    assert!(
        across.iter().any(|(k, _)| k.namespace() == ns_a)
            && across.iter().any(|(k, _)| k.namespace() == ns_b)
    );
    assert!(
        running[1].1.iter().all(|v| v.lock().unwrap().deletes > 0),
        "pods left the selector"
    );
    for (informer, _) in &running {
        tokio::task::block_in_place(|| informer.shutdown());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_watch_command_against_the_real_server() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ns = namespace(&client, "cli").await;
    configmaps(&client, &ns, 0..120).await;
    // `informer watch --kubeconfig ...` for 3 s; its stdout.
    let watch = |extra: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_informer"));
        command
            .args(["watch", "--resource", "configmaps", "-n", &ns])
            .args(["--duration", "3", "--interval", "1", "--kubeconfig"])
            .arg(&server.kubeconfig)
            .args(extra);
        async move {
            let out = tokio::task::spawn_blocking(move || command.output())
                .await
                .unwrap()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{stdout}\n{stderr}");
            stdout
        }
    };
    let stdout = watch(&[]).await;
    assert!(
        stdout.contains(&format!("watching /api/v1/namespaces/{ns}/configmaps")),
        "{stdout}"
    );
    assert!(stdout.contains("synced:            true"), "{stdout}");
    assert!(
        stdout.contains("objects:           120 in 1 namespaces"),
        "{stdout}"
    );
    assert!(stdout.contains("120 adds"), "{stdout}");
    // Selectors the server evaluates, and JSON on the wire: o-1, o-8, ..., o-113 but o-1.
    let filters = [
        "-l",
        "app=app-1",
        "--field-selector",
        "metadata.name!=o-1",
        "--json",
    ];
    let stdout = watch(&filters).await;
    assert!(stdout.contains("synced:            true"), "{stdout}");
    assert!(
        stdout.contains("objects:           16 in 1 namespaces"),
        "{stdout}"
    );
}

/// The controller example's binary, built by `cargo test` beside the `informer` binary.
fn controller_example() -> std::path::PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_informer"))
        .parent()
        .unwrap()
        .join("examples/controller");
    assert!(
        bin.exists(),
        "{} missing: cargo test builds the examples",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_example_against_the_real_server() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    let ns = namespace(&client, "controller").await;
    for (i, (replicas, ready)) in [(2, 2), (3, 1), (1, 0), (2, 2)].into_iter().enumerate() {
        deployment_family(&client, &ns, i, replicas, ready).await;
    }

    let mut child = std::process::Command::new(controller_example())
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "--namespace",
            &ns,
            "--json",
            "--status-every",
            "0",
            "--workers",
            "2",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let synced = tokio::task::block_in_place(|| {
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(l) => {
                    let done = l.starts_with("caches synced");
                    lines.push(l);
                    if done {
                        break true;
                    }
                }
                Err(_) => break false,
            }
        }
    });
    assert!(synced, "the controller did not sync: {lines:?}");
    assert!(
        lines.last().unwrap().contains("4 deployments, 8 pods"),
        "{lines:?}"
    );

    // Changes while it runs: a scale-up (a new generation) with two more Pods, a Pod turning
    // Ready, one deleted, a Deployment deleted (its Pods stay, owned by nothing cached).
    let (deployments, pods, sets): (Api<Deployment>, Api<Pod>, Api<ReplicaSet>) = (
        Api::namespaced(client.clone(), &ns),
        Api::namespaced(client.clone(), &ns),
        Api::namespaced(client.clone(), &ns),
    );
    let scale = serde_json::json!({"spec": {"replicas": 4}});
    deployments
        .patch("d-0", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    let rs0 = sets.get("d-0-h0").await.unwrap();
    add_pod(&pods, &rs0, 2, true).await;
    add_pod(&pods, &rs0, 3, false).await;
    set_ready(&pods, "d-1-h1-2", true).await;
    pods.delete("d-2-h2-0", &DeleteParams::default())
        .await
        .unwrap();
    deployments
        .delete("d-3", &DeleteParams::default())
        .await
        .unwrap();

    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    lines.extend(rx.try_iter());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {lines:#?}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let expected = expected_statuses(&client, &ns).await;
    assert_eq!(report["statuses"], expected, "{lines:#?}");
    assert_eq!(expected.as_object().unwrap().len(), 3);
    assert_eq!(expected[format!("{ns}/d-0")]["pods"], 4);
    assert_eq!(report["deployments_cached"], 3);
    assert_eq!(report["pods_cached"], 9);
    assert_eq!(report["worker_panics"], 0);
    assert!(
        !lines.iter().any(|l| l.contains("still differ")),
        "{lines:#?}"
    );
}

/// A metadata-only informer (`as=PartialObjectMetadata`, controller-runtime's metadata
/// informers) against the real server, over protobuf and over JSON: the store holds
/// `meta.k8s.io/v1` `PartialObjectMetadata` objects equal, by key, uid and resourceVersion, to a
/// fresh list, through creates, updates and deletes; the server sent no `data`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_informers_hold_partial_object_metadata() {
    let server = KubeApiServer::shared();
    let client = server.client().await;
    for protobuf in [true, false] {
        let ns = namespace(&client, "metadata-only").await;
        let created = configmaps(&client, &ns, 0..40).await;
        let resource = ApiResource::core("v1", "configmaps", "ConfigMap")
            .in_namespace(&ns)
            .metadata_only()
            .with_protobuf(protobuf);
        let (informer, views) = started(
            HttpListerWatcher::new(client.clone(), resource),
            reflector(),
            1,
        )
        .await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        replace_each(&api, created[..20].to_vec(), |c: &mut ConfigMap| {
            c.data
                .get_or_insert_with(Default::default)
                .insert("changed".into(), "a-value-kept-out-of-metadata".into());
        })
        .await;
        delete_each(
            &api,
            created[20..30]
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect(),
        )
        .await;
        configmaps(&client, &ns, 40..45).await;
        let expected = fresh_configmaps(&client, &ns).await;
        assert_eq!(expected.len(), 35);
        assert_converged(&informer, &views, &expected, "metadata only").await;
        for obj in informer.lister().list() {
            assert!(obj.is_partial_object_metadata(), "{:?}", obj.gvk());
            assert_eq!(
                obj.encoding(),
                if protobuf {
                    Encoding::Protobuf
                } else {
                    Encoding::Json
                }
            );
            // The data's field names show in managedFields; its values do not.
            let raw = obj.raw().unwrap();
            let text = String::from_utf8_lossy(&raw);
            assert!(
                !text.contains("a-value-kept-out-of-metadata"),
                "no data: {text}"
            );
        }
        tokio::task::block_in_place(|| informer.shutdown());
    }
}

/// A `#[derive(CustomResource)]` type, as kube-rs users define their CRDs (the shape of the
/// shared `widgets.example.com` CRD, whose spec keeps unknown fields).
#[derive(
    kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(group = "example.com", version = "v1", kind = "Widget", namespaced)]
struct WidgetSpec {
    size: u32,
    color: String,
}

/// `KubeInformer<Widget>` for a `CustomResource` type: GVR and scope from the type, typed reads
/// (`Arc<Widget>`) of what was written through `Api<Widget>`, through updates and deletes, and
/// the event stream's view equal to a fresh list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_informer_of_a_custom_resource_type() {
    use futures_util::StreamExt;
    use informer::{Event, KubeInformer};

    let server = KubeApiServer::shared();
    let client = server.client().await;
    widget_crd(&client).await;
    let ns = namespace(&client, "crd-typed").await;
    let api: Api<Widget> = Api::namespaced(client.clone(), &ns);
    let widget = |i: u32| {
        Widget::new(
            &format!("w-{i}"),
            WidgetSpec {
                size: i,
                color: "blue".into(),
            },
        )
    };
    for i in 0..20 {
        api.create(&PostParams::default(), &widget(i))
            .await
            .unwrap();
    }
    let informer = KubeInformer::from_api(api.clone(), InformerConfig::default());
    assert_eq!(informer.name(), format!("example.com/v1/widgets in {ns}"));
    let mut events = informer.events(HandlerOptions::new()).unwrap();
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(60))
        .await
        .unwrap();
    for i in 0..5 {
        let mut w = api.get(&format!("w-{i}")).await.unwrap();
        w.spec.color = "red".into();
        api.replace(&format!("w-{i}"), &PostParams::default(), &w)
            .await
            .unwrap();
    }
    for i in 15..20 {
        api.delete(&format!("w-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let fresh = api.list(&ListParams::default()).await.unwrap();
    let expected = meta_view(fresh.items.iter().map(|w| &w.metadata));
    let d = settle(Duration::from_secs(60), || {
        diff(&expected, &store_view(&informer))
    })
    .await;
    assert_eq!(d, None);
    let lister = informer.lister();
    let red = lister
        .list()
        .unwrap()
        .iter()
        .filter(|w| w.spec.color == "red")
        .count();
    assert_eq!(red, 5);
    let w3 = lister.get(&ns, "w-3").unwrap().unwrap();
    assert_eq!((w3.spec.size, w3.spec.color.as_str()), (3, "red"));
    assert!(lister.get(&ns, "w-17").unwrap().is_none());

    // The stream's view, rebuilt from its events, ends equal to the fresh list.
    let mut view = std::collections::BTreeMap::new();
    let key = |w: &Widget| w.metadata.name.clone().unwrap();
    while view.len() != 15
        || view
            .values()
            .filter(|w: &&Arc<Widget>| w.spec.color == "red")
            .count()
            != 5
    {
        let item = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("the stream caught up")
            .expect("open");
        match item.unwrap() {
            Event::Added { object, .. } => {
                view.insert(key(&object), object);
            }
            Event::Updated { new, .. } => {
                view.insert(key(&new), new);
            }
            Event::Deleted { object, .. } => {
                view.remove(&key(&object));
            }
            Event::Synced => {}
        }
    }
    informer.shutdown_async().await;
}
