//! The controller of `examples/controller.rs` (HorizontalPodAutoscaler-shaped: Deployment and
//! Pod informers from one factory, a rate-limited work queue, workers reconciling from the
//! listers through a Pod-to-Deployment index) against two simulators under a flood: once the
//! caches reflect the simulators' last change and the queue is drained, every Deployment's
//! status must equal the one computed from the simulators' truth.

#[path = "../examples/controller/cli.rs"]
mod cli;
#[path = "../examples/controller/hpa.rs"]
mod hpa;
#[path = "../examples/controller/truth.rs"]
mod truth;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use informer::InformerConfig;
use informer::client::ClientOptions;
use informer::factory::{GroupVersionResource, MakeListerWatcher, SharedInformerFactory};
use informer::object::{self, GroupVersionKind, ObjectKey, ObjectMeta, OwnerReference};
use informer::reflector::{BackoffConfig, ListerWatcher, ReflectorConfig};
use informer::server::{ServerConfig, serve_many};
use informer::sim::{Fault, SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::workqueue::WorkQueue;
use k8s_pb::api::apps::v1::Deployment;
use k8s_pb::api::core::v1::Pod;

use hpa::{Controller, deployment_of, http_lister_watchers};
use informer::object::ObjectMetaFields;

/// Namespaces of the simulated clusters.
const NAMESPACES: u32 = 4;

/// A server of Deployments (up to `NAMESPACES * 50` of them) and one of Pods with one seed,
/// namespace count and app count (a consistent cluster), both moving objects between their
/// template variants on updates (scaling, readiness changes).
fn cluster(seed: u64, deployments: usize, pods: usize, lossless: bool) -> (SimServer, SimServer) {
    cluster_of(seed, 50, deployments, pods, lossless)
}

/// [`cluster`] with `apps` apps per namespace.
fn cluster_of(
    seed: u64,
    apps: u32,
    deployments: usize,
    pods: usize,
    lossless: bool,
) -> (SimServer, SimServer) {
    let dir = default_fixtures_dir().unwrap();
    let config = |t: Templates, n: usize| {
        SimConfig::new(t)
            .seed(seed)
            .namespaces(NAMESPACES)
            .apps(apps)
            .initial_objects(n)
            .target_objects(n)
            .update_template(true)
            .flow_control(lossless)
    };
    let d = SimServer::new(config(Templates::deployments(&dir).unwrap(), deployments)).unwrap();
    let p = SimServer::new(config(Templates::pod_states(&dir).unwrap(), pods)).unwrap();
    (d, p)
}

/// What one run observed.
struct Run {
    controller: Arc<Controller>,
    relists: u64,
}

/// How the controller reaches the simulators.
#[derive(Clone, Copy, Debug)]
enum Transport {
    /// The example's default: over HTTP, from one `informer serve`-style server of both
    /// simulators on a loopback port (`serve_many`), protobuf lists and watches.
    Http,
    /// The simulators as the informers' lister-watchers, no HTTP.
    InProcess,
}

/// Runs the controller (informers made with `config`) with `workers` workers against
/// `deployments` and `pods` reached through `transport`: sync, then `arm` (faults), then floods
/// of `deployment_events` and `pod_events` changes made at the same time, then waits until both
/// caches reflect the last change and every handler has handled it, then drains the queue and
/// stops. Checks the result against the truth.
async fn run(
    transport: Transport,
    (deployments, pods): (SimServer, SimServer),
    config: InformerConfig,
    workers: usize,
    deployment_events: u64,
    pod_events: u64,
    arm: impl FnOnce(&SimServer, &SimServer),
) -> Run {
    let sims = (deployments.clone(), pods.clone());
    let floods = (deployment_events, pod_events);
    match transport {
        Transport::InProcess => {
            let writer = hpa::sim_status_writer(deployments.clone());
            let factory =
                SharedInformerFactory::new(move |gvr: &GroupVersionResource, _ns: Option<&str>| {
                    if gvr.resource == "deployments" {
                        deployments.clone()
                    } else {
                        pods.clone()
                    }
                })
                .informer_config(config);
            run_on(factory, sims, workers, floods, arm, writer).await
        }
        Transport::Http => {
            let served = vec![
                (deployments, ServerConfig::default()),
                (pods, ServerConfig::default()),
            ];
            let server = serve_many(served, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .await
                .unwrap();
            let client = ClientOptions {
                server: Some(server.url()),
                ..ClientOptions::default()
            }
            .client()
            .await
            .unwrap();
            let writer = hpa::http_status_writer(client.clone(), tokio::runtime::Handle::current());
            let factory =
                SharedInformerFactory::new(http_lister_watchers(client)).informer_config(config);
            let r = run_on(factory, sims, workers, floods, arm, writer).await;
            let stats = server.stats();
            // Both resources were listed and watched through the server.
            assert!(stats.lists.load(Ordering::Relaxed) >= 2);
            assert!(stats.watches.load(Ordering::Relaxed) >= 2);
            server.shutdown().await;
            r
        }
    }
}

/// [`run`] on a factory of either transport.
async fn run_on<L: ListerWatcher, F: MakeListerWatcher<L>>(
    factory: SharedInformerFactory<L, F>,
    (deployments, pods): (SimServer, SimServer),
    workers: usize,
    (deployment_events, pod_events): (u64, u64),
    arm: impl FnOnce(&SimServer, &SimServer),
    writer: hpa::StatusWriter,
) -> Run {
    let queue = WorkQueue::builder().name("hpa").build();
    let controller = Controller::new(&factory, queue.clone()).unwrap();
    controller.set_status_writer(writer);
    factory.start(&tokio::runtime::Handle::current());
    factory
        .wait_for_cache_sync(Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(factory.sync_status().len(), 2);
    let workers = controller.start_workers(workers).unwrap();

    arm(&deployments, &pods);
    let (d_rv, p_rv) = tokio::join!(deployments.flood(deployment_events), pods.flood(pod_events));
    let (d_rv, p_rv) = (d_rv.unwrap(), p_rv.unwrap());

    let d_informer = factory.informer::<Deployment>().informer().clone();
    let p_informer = factory.informer::<Pod>().informer().clone();
    let wait = Duration::from_secs(60);
    // Settle: the caches reach the servers' last change (the flood's, then the controller's
    // own status writes), every handler has handled it, the queue is idle; again as long as
    // the controller's writes moved the Deployments on.
    let (mut d_rv, mut p_rv) = (d_rv, p_rv);
    loop {
        tokio::time::timeout(wait, d_informer.store().wait_for(d_rv))
            .await
            .expect("deployment cache caught up")
            .unwrap();
        tokio::time::timeout(wait, p_informer.store().wait_for(p_rv))
            .await
            .expect("pod cache caught up")
            .unwrap();
        // Every handler has handled every change: every key is queued or done.
        let (di, pi) = (d_informer.clone(), p_informer.clone());
        tokio::task::spawn_blocking(move || {
            di.flush();
            pi.flush();
        })
        .await
        .unwrap();
        let idle = tokio::time::timeout(wait, async {
            loop {
                let q = controller.queue().stats();
                if (q.depth, q.in_flight, q.delayed) == (0, 0, 0) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        idle.await.expect("the queue went idle");
        let now = (deployments.resource_version(), pods.resource_version());
        if now == (d_rv, p_rv) {
            break;
        }
        (d_rv, p_rv) = now;
    }
    assert!(controller.handlers_synced());
    controller.queue().shutdown_with_drain_async().await;
    let panicked = tokio::task::spawn_blocking(move || workers.join())
        .await
        .unwrap();
    assert_eq!(panicked, 0, "no worker panicked");

    let expected = truth::expected(&deployments.truth(), &pods.truth()).unwrap();
    assert!(
        expected.len() > 10 && expected.values().any(|s| s.ready > 0),
        "a cluster worth checking: {} deployments",
        expected.len()
    );
    if let Some(d) = truth::diff(&expected, &controller.statuses()) {
        panic!("controller statuses differ from the truth: {d}");
    }
    // And every Deployment on the server carries the status the controller wrote.
    if let Some(d) = truth::written_diff(&expected, &deployments.truth()).unwrap() {
        panic!("written statuses differ from the truth: {d}");
    }
    let relists = p_informer
        .reflector_metrics()
        .map_or(0, |m| m.relists.load(Ordering::Relaxed))
        + d_informer
            .reflector_metrics()
            .map_or(0, |m| m.relists.load(Ordering::Relaxed));
    tokio::task::block_in_place(|| factory.shutdown());
    Run {
        controller,
        relists,
    }
}

/// A flood of 2 000 Deployment and 20 000 Pod changes with 4 workers: every status equals the
/// truth, every change reached a handler, the queue ends empty.
async fn every_deployment_matches_the_truth_after_a_flood(transport: Transport) {
    let r = run(
        transport,
        cluster(5, 150, 1_500, true),
        InformerConfig::default(),
        4,
        2_000,
        20_000,
        |_, _| {},
    )
    .await;
    let s = r.controller.stats();
    assert_eq!(s.errors.load(Ordering::Relaxed), 0);
    assert_eq!(s.dropped.load(Ordering::Relaxed), 0);
    // Every pod change and deployment change went through a handler.
    assert!(s.pod_events.load(Ordering::Relaxed) >= 20_000 + 1_500);
    assert!(s.deployment_events.load(Ordering::Relaxed) >= 2_000 + 150);
    // Deletions of Deployments during the flood were reconciled as gone.
    assert!(s.gone.load(Ordering::Relaxed) > 0);
    // The queue deduplicated: fewer reconciles than events, yet every key was reconciled.
    let reconciles = s.reconciles.load(Ordering::Relaxed);
    assert!(reconciles >= r.controller.statuses().len() as u64);
    let q = r.controller.queue().stats();
    assert!(q.shutting_down);
    assert_eq!((q.depth, q.in_flight, q.delayed), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deployment_matches_the_truth_after_a_flood_over_http() {
    every_deployment_matches_the_truth_after_a_flood(Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deployment_matches_the_truth_after_a_flood_in_process() {
    every_deployment_matches_the_truth_after_a_flood(Transport::InProcess).await;
}

/// Watches broken by ERROR 410 mid-flood (over HTTP: an ERROR event in the watch stream, as a
/// real API server sends it).
async fn statuses_converge_through_relists_and_tombstones(transport: Transport) {
    // Watches broken by ERROR 410 mid-flood: both informers relist, and Pods deleted while
    // their watch was down reach the handler as tombstones. The reflector's backoff before a
    // relist is cut to milliseconds: this test is about what the controller sees after a
    // relist; tests/faults.rs times the backoff.
    let config = InformerConfig {
        reflector: ReflectorConfig::default().backoff(BackoffConfig {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(50),
            ..BackoffConfig::default()
        }),
        ..InformerConfig::default()
    };
    let (d, p) = cluster(9, 120, 1_200, true);
    let r = run(
        transport,
        (d.clone(), p.clone()),
        config,
        2,
        1_500,
        12_000,
        |d, p| {
            for f in ["stream:410@500", "stream:410@3000"] {
                p.inject(f.parse::<Fault>().unwrap());
            }
            d.inject("stream:410@300".parse::<Fault>().unwrap());
        },
    )
    .await;
    // The first stream fault of each simulator always fires: the lossless flood waits for the
    // open watch that takes it. The Pods' second one fires only if the watch after the relist
    // still sees 3 000 events: a closed watch holds the flood back only once it is a whole
    // history window (10 000 events) behind, so how many changes the relist skips over depends
    // on timing (more of them over HTTP). Every fault that fired made a relist.
    let fired = d.stats().faults_fired + p.stats().faults_fired;
    assert!(fired >= 2, "faults fired: {fired}");
    assert!(
        r.relists >= fired,
        "relisted {} for {fired} faults",
        r.relists
    );
    let s = r.controller.stats();
    assert!(
        s.pod_tombstones.load(Ordering::Relaxed) > 0,
        "pod deletions reached the handler as tombstones"
    );
    assert_eq!(r.controller.stats().errors.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_converge_through_relists_and_tombstones_over_http() {
    statuses_converge_through_relists_and_tombstones(Transport::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_converge_through_relists_and_tombstones_in_process() {
    statuses_converge_through_relists_and_tombstones(Transport::InProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_gives_the_same_statuses() {
    let r = run(
        Transport::InProcess,
        cluster(7, 100, 1_000, true),
        InformerConfig::default(),
        1,
        500,
        5_000,
        |_, _| {},
    )
    .await;
    assert!(!r.controller.statuses().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "large: 2 000 deployments, 20 000 pods, 500 000 changes (about a minute)"]
async fn large_cluster_under_a_long_flood() {
    let r = run(
        Transport::Http,
        cluster_of(13, 1_000, 2_000, 20_000, true),
        InformerConfig::default(),
        8,
        50_000,
        450_000,
        |_, _| {},
    )
    .await;
    assert_eq!(r.controller.stats().errors.load(Ordering::Relaxed), 0);
}

// ----- the Pod → Deployment mapping ---------------------------------------------------------

fn pod_with(owner: Option<(&str, &str, &str, bool)>, hash: Option<&str>) -> object::Object {
    let mut meta = ObjectMetaFields {
        name: "web-7d4b9c8f5-x2x9z".to_owned().into(),
        namespace: "shop".to_owned().into(),
        ..Default::default()
    };
    if let Some(h) = hash {
        meta.labels
            .insert("pod-template-hash".to_owned().into(), h.to_owned().into());
    }
    if let Some((api_version, kind, name, controller)) = owner {
        meta.owner_references.push(OwnerReference {
            api_version: api_version.to_owned().into(),
            kind: kind.to_owned().into(),
            name: name.to_owned().into(),
            uid: "0b5b0c8e-8f3e-4f57-9d55-2b1c2e1e7b11".to_owned().into(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        });
    }
    let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
    object::Object::from_parts(
        gvk,
        ObjectMeta::from(meta),
        Bytes::new(),
        object::Encoding::Protobuf,
    )
}

#[test]
fn a_pod_belongs_to_the_deployment_its_replica_set_is_named_after() {
    let rs = |name| Some(("apps/v1", "ReplicaSet", name, true));
    let key = |s: &str| Some(ObjectKey::from_raw(s));
    // The deployment controller's naming: <deployment>-<pod-template-hash>.
    assert_eq!(
        deployment_of(&pod_with(rs("web-7d4b9c8f5"), Some("7d4b9c8f5"))),
        key("shop/web")
    );
    // Dashes inside the Deployment's name are kept.
    assert_eq!(
        deployment_of(&pod_with(rs("my-web-app-5f6d"), Some("5f6d"))),
        key("shop/my-web-app")
    );
    // The retired extensions group counts too.
    assert_eq!(
        deployment_of(&pod_with(
            Some(("extensions/v1beta1", "ReplicaSet", "web-5f6d", true)),
            Some("5f6d")
        )),
        key("shop/web")
    );
    // Not a Deployment's Pod.
    for (owner, hash, why) in [
        (rs("web-5f6d"), None, "no pod-template-hash label"),
        (
            rs("web-5f6d"),
            Some("0000"),
            "hash is not the name's suffix",
        ),
        (rs("5f6d"), Some("5f6d"), "nothing before the hash"),
        (rs("web5f6d"), Some("5f6d"), "no dash before the hash"),
        (
            Some(("apps/v1", "ReplicaSet", "web-5f6d", false)),
            Some("5f6d"),
            "not the controller",
        ),
        (
            Some(("batch/v1", "Job", "web-5f6d", true)),
            Some("5f6d"),
            "a Job's Pod",
        ),
        (
            Some(("apps/v1", "StatefulSet", "web-5f6d", true)),
            Some("5f6d"),
            "a StatefulSet's Pod",
        ),
        (
            Some(("v1", "ReplicaSet", "web-5f6d", true)),
            Some("5f6d"),
            "core group",
        ),
        (None, Some("5f6d"), "a bare Pod"),
    ] {
        assert_eq!(deployment_of(&pod_with(owner, hash)), None, "{why}");
    }
}

#[test]
fn simulated_pods_belong_to_the_simulated_deployment_of_their_app() {
    let (d, p) = cluster(3, 150, 300, false);
    let deployments = d.truth();
    let mut owned = 0;
    for pod in p.truth().objects.values() {
        let key = deployment_of(pod).expect("every simulated Pod has a Deployment owner");
        assert_eq!(key.namespace(), pod.namespace());
        assert_eq!(pod.meta().labels().get("app").unwrap(), key.name());
        owned += usize::from(deployments.objects.contains_key(&key));
    }
    assert!(
        owned > 150,
        "most Pods have their Deployment: {owned} of 300"
    );
    for (key, dep) in &deployments.objects {
        assert!(dep.meta().owner_references().is_empty());
        assert_eq!(dep.meta().labels().get("app").unwrap(), key.name());
        assert!(!dep.meta().labels().contains_key("pod-template-hash"));
    }
}

#[test]
fn readiness_is_the_ready_condition() {
    let dir = default_fixtures_dir().unwrap();
    let states = Templates::pod_states(&dir).unwrap();
    let ready: Vec<bool> = states
        .objects()
        .iter()
        .map(|o| hpa::is_pod_ready(&o.decode::<Pod>().unwrap()))
        .collect();
    assert_eq!(ready, [false, false, false, true]);
    let replicas: Vec<Option<i32>> = Templates::deployments(&dir)
        .unwrap()
        .objects()
        .iter()
        .map(|o| {
            o.decode::<Deployment>()
                .unwrap()
                .spec
                .and_then(|s| s.replicas)
        })
        .collect();
    assert_eq!(replicas, [Some(1), Some(2), Some(3), Some(4)]);
}

#[test]
fn seconds_flags_refuse_what_a_duration_cannot_hold() {
    // `--duration inf` (or 1e300, or a negative or NaN value) used to panic in
    // `Duration::from_secs_f64`; clap now refuses it with a message.
    for bad in ["inf", "-inf", "NaN", "1e300", "-1", "1e10", "soon", ""] {
        assert!(cli::seconds(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(cli::seconds("0"), Ok(0.0));
    assert_eq!(cli::seconds("2.5"), Ok(2.5));
    assert_eq!(cli::seconds("1e9"), Ok(1e9));
    let max = Duration::from_secs_f64(cli::seconds("1e9").unwrap());
    assert_eq!(max, Duration::from_secs(1_000_000_000));
}
