//! The kube-rs face of the library: informers started from a `kube::Api<K>` or a
//! `kube::Client`, typed reads of k8s-openapi types, the watcher-style event stream and the
//! sync error, against our server over HTTP (JSON) and the in-process simulator.

mod support;
mod views;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use informer::sim::{ErrorAnswer, Fault};
use informer::{
    DecodeError, Event, EventError, HandlerOptions, Informer, InformerConfig, KubeInformer,
    SharedInformerFactory, TypedLister,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use support::{sim, start, synced_informer};
use views::{ViewMap, meta_view, store_view};

fn client(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// The view of typed Pods.
fn versions_of<'a>(pods: impl IntoIterator<Item = &'a Arc<Pod>>) -> ViewMap {
    meta_view(pods.into_iter().map(|p| &p.metadata))
}

/// Applies a stream's events to a view; `Synced` and errors are counted.
#[derive(Default, Debug)]
struct StreamView {
    view: BTreeMap<String, Arc<Pod>>,
    initial: usize,
    synced_after_initial: Option<usize>,
    errors: Vec<String>,
}

impl StreamView {
    fn apply(&mut self, item: Result<Event<Pod>, EventError>) {
        let key = |p: &Pod| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or(""),
                p.metadata.name.as_deref().unwrap_or("")
            )
        };
        match item {
            Ok(Event::Added { object, initial }) => {
                assert!(
                    !initial || self.synced_after_initial.is_none(),
                    "initial add after Synced"
                );
                self.initial += usize::from(initial);
                self.view.insert(key(&object), object);
            }
            Ok(Event::Updated { old, new }) => {
                assert_eq!(key(&old), key(&new));
                self.view.insert(key(&new), new);
            }
            Ok(Event::Deleted { object, .. }) => {
                self.view.remove(&key(&object));
            }
            Ok(Event::Synced) => {
                assert!(self.synced_after_initial.is_none(), "Synced twice");
                self.synced_after_initial = Some(self.initial);
            }
            Err(e) => self.errors.push(e.to_string()),
        }
    }

    fn versions(&self) -> ViewMap {
        versions_of(self.view.values())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_informer_from_an_api_reads_k8s_openapi_pods_over_json() {
    let sim = sim("head", |c| c.initial_objects(60).target_objects(60));
    let server = start(&sim).await;
    let pods =
        KubeInformer::<Pod>::from_api(Api::all(client(&server.url())), InformerConfig::default());
    assert_eq!(pods.name(), "v1/pods");
    let mut events = pods.events(HandlerOptions::new().name("stream")).unwrap();
    pods.start(&tokio::runtime::Handle::current());
    pods.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();

    let lister = pods.lister();
    let cached = lister.list().unwrap();
    assert_eq!(versions_of(&cached), sim.truth().versions());
    let first = &cached[0];
    let ns = first.metadata.namespace.as_deref().unwrap();
    let name = first.metadata.name.as_deref().unwrap();
    let got = lister.get(ns, name).unwrap().unwrap();
    assert!(Arc::ptr_eq(&got, first), "one decode per object version");
    assert!(
        got.spec.as_ref().is_some_and(|s| !s.containers.is_empty()),
        "the whole typed object, not only its metadata"
    );
    assert_eq!(lister.decodes(), 60);

    // Live changes reach the stream in order; its view ends equal to the server's.
    let rv = sim.flood(2_000).await.unwrap();
    pods.store().wait_for(rv).await.unwrap();
    let mut view = StreamView::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while view.versions() != sim.truth().versions() {
        let item = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("the stream caught up with the server")
            .expect("the stream is open");
        view.apply(item);
    }
    assert_eq!(
        view.synced_after_initial,
        Some(60),
        "Synced right after the 60 initial adds"
    );
    assert!(view.errors.is_empty(), "{:?}", view.errors);
    assert_eq!(versions_of(&lister.list().unwrap()), sim.truth().versions());
    tokio::task::block_in_place(|| pods.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_carries_list_watch_errors_and_goes_on() {
    let sim = sim("head", |c| c.initial_objects(20).target_objects(20));
    // The first list fails; the reflector backs off (shortened here) and lists again.
    sim.inject(Fault::List(ErrorAnswer::InternalError));
    let mut config = InformerConfig::default();
    config.reflector.backoff.initial = Duration::from_millis(10);
    config.reflector.backoff.max = Duration::from_millis(50);
    let informer = Informer::new(sim.clone(), config);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    informer
        .set_watch_error_handler(move |e| s.lock().unwrap().push(e.to_string()))
        .unwrap();
    let lister: TypedLister<k8s_pb::api::core::v1::Pod> = TypedLister::new(informer.lister());
    let mut events = informer.events(lister, HandlerOptions::new()).unwrap();
    informer.start(&tokio::runtime::Handle::current());

    let first = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
        .unwrap();
    match first {
        Err(EventError::ListWatch(e)) => {
            assert_eq!(e.status().map(|s| s.code), Some(500), "{e}");
            let shown = EventError::ListWatch(e).to_string();
            assert!(
                shown.contains("500"),
                "the cause is in the message: {shown}"
            );
        }
        other => panic!("expected the list error first, got {other:?}"),
    }
    let (mut adds, mut synced) = (0, false);
    while !synced {
        match tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .unwrap()
            .unwrap()
        {
            Ok(Event::Added { initial: true, .. }) => adds += 1,
            Ok(Event::Synced) => synced = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(adds, 20);
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "the user's handler saw it too"
    );
    assert!(
        informer.set_watch_error_handler(|_| {}).is_err(),
        "the handler is set before start"
    );
    tokio::task::block_in_place(|| informer.shutdown());
    // Shut down: the stream ends.
    assert!(events.next().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_made_after_sync_replays_the_cache_then_says_synced() {
    let sim = sim("head", |c| c.initial_objects(15).target_objects(15));
    let informer = synced_informer(&sim).await;
    let lister = TypedLister::<k8s_pb::api::core::v1::Pod>::new(informer.lister());
    let mut events = informer.events(lister, HandlerOptions::new()).unwrap();
    let mut initial = 0;
    loop {
        match events.next().await.unwrap().unwrap() {
            Event::Added { initial: true, .. } => initial += 1,
            Event::Synced => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, 15);
    assert!(events.registration().has_synced());
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serde_reads_of_protobuf_objects_say_to_ask_for_json() {
    let sim = sim("head", |c| c.initial_objects(3).target_objects(3));
    let informer = synced_informer(&sim).await;
    let pods: TypedLister<Pod> = TypedLister::serde(informer.lister());
    let err = pods.list().unwrap_err();
    assert!(matches!(err, DecodeError::NotJson { .. }), "{err}");
    assert!(err.to_string().contains("ask the server for JSON"), "{err}");
    tokio::task::block_in_place(|| informer.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_from_a_client_and_a_sync_error_that_names_the_informer() {
    let sim = sim("head", |c| c.initial_objects(25).target_objects(25));
    let server = start(&sim).await;
    let factory = SharedInformerFactory::from_client(client(&server.url()));
    let pods = factory.serde_informer::<Pod>();
    let again = factory.serde_informer::<Pod>();
    assert!(
        Arc::ptr_eq(pods.informer(), again.informer()),
        "one informer per resource"
    );
    factory.start(&tokio::runtime::Handle::current());
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        versions_of(&pods.lister().list().unwrap()),
        sim.truth().versions()
    );

    // The server serves no ConfigMaps: that informer never syncs, and the error says which.
    let _config_maps = factory.serde_informer::<ConfigMap>();
    factory.start(&tokio::runtime::Handle::current());
    let err = factory
        .wait_for_cache_sync(Duration::from_millis(500))
        .await
        .unwrap_err();
    assert_eq!(err.not_synced(), ["v1/configmaps"]);
    assert!(!err.stopped());
    assert_eq!(err.to_string(), "not synced after the wait: v1/configmaps");
    tokio::task::block_in_place(|| factory.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_informers_against_our_server_in_both_encodings() {
    for templates in ["head", "json"] {
        for protobuf in [true, false] {
            let sim = sim(templates, |c| c.initial_objects(30).target_objects(30));
            let server = start(&sim).await;
            let resource = informer::ApiResource::core("v1", "pods", "Pod")
                .metadata_only()
                .with_protobuf(protobuf);
            let lw = informer::HttpListerWatcher::new(client(&server.url()), resource);
            let informer = Informer::new(lw, InformerConfig::default());
            assert_eq!(informer.name(), "v1/pods (metadata)");
            informer.start(&tokio::runtime::Handle::current());
            informer
                .wait_for_cache_sync(Duration::from_secs(30))
                .await
                .unwrap();
            let rv = sim.flood(500).await.unwrap();
            informer.store().wait_for(rv).await.unwrap();
            let truth = sim.truth();
            assert_eq!(
                store_view(&informer),
                truth.versions(),
                "{templates} protobuf={protobuf}"
            );
            for obj in informer.lister().list() {
                assert!(obj.is_partial_object_metadata());
                let full = &truth.objects[obj.key_ref()];
                let mut expected = full.meta().to_fields();
                if obj.encoding() != full.encoding() {
                    expected.managed_fields.clear();
                }
                assert_eq!(obj.meta().labels(), expected.labels);
                assert!(
                    obj.meta().owner_references().eq(expected
                        .owner_references
                        .iter()
                        .map(informer::object::OwnerRef::from))
                );
                assert!(obj.raw_len() < full.raw_len());
            }
            tokio::task::block_in_place(|| informer.shutdown());
        }
    }
}
