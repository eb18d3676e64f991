//! SharedInformerFactory: one informer per resource shared by every caller, filters and the
//! tweak hook on every list and watch, start/sync/shutdown, typed and dynamic informers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use informer::factory::{GroupVersionResource, RequestOptions, SharedInformerFactory};
use informer::reflector::{ApiError, ListOptions, ListerWatcher, WatchOptions, WatchResponse};
use informer::sim::{SimConfig, SimServer, SimWatch, Templates, default_fixtures_dir};
use informer::{Informer, InformerConfig};
use k8s_pb::api::core::v1::Pod;

/// What one request carried: (kind, labelSelector, fieldSelector).
type Log = Arc<Mutex<Vec<(&'static str, Option<String>, Option<String>)>>>;

/// The lister-watchers the factory asked for: (resource, namespace).
type Made = Arc<Mutex<Vec<(GroupVersionResource, Option<String>)>>>;

/// Records the options of every request, then asks the simulator without selectors (it
/// rejects them with 400; a real server would filter).
struct Recording {
    sim: SimServer,
    log: Log,
}

impl ListerWatcher for Recording {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.log.lock().unwrap().push((
            "list",
            opts.label_selector.clone(),
            opts.field_selector.clone(),
        ));
        let mut o = opts.clone();
        o.label_selector = None;
        o.field_selector = None;
        self.sim.list(&o).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.log.lock().unwrap().push((
            "watch",
            opts.label_selector.clone(),
            opts.field_selector.clone(),
        ));
        let mut o = opts.clone();
        o.label_selector = None;
        o.field_selector = None;
        self.sim.watch(&o).await
    }
}

fn sim(objects: usize) -> SimServer {
    let dir = default_fixtures_dir().unwrap();
    SimServer::new(
        SimConfig::new(Templates::etcd_pod(&dir).unwrap())
            .seed(3)
            .initial_objects(objects),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_informer_per_resource_filters_on_every_request_start_sync_shutdown() {
    let pods = sim(120);
    let widgets = sim(30);
    let log: Log = Arc::default();
    let made: Made = Arc::default();
    let tweaks = Arc::new(AtomicUsize::new(0));
    let factory = {
        let (pods, widgets, log, made, tweaks) = (
            pods.clone(),
            widgets.clone(),
            log.clone(),
            made.clone(),
            tweaks.clone(),
        );
        SharedInformerFactory::new(move |gvr: &GroupVersionResource, ns: Option<&str>| {
            made.lock()
                .unwrap()
                .push((gvr.clone(), ns.map(str::to_owned)));
            let sim = if gvr.resource == "pods" {
                pods.clone()
            } else {
                widgets.clone()
            };
            Recording {
                sim,
                log: log.clone(),
            }
        })
        .namespace("ns-1")
        .label_selector("app=web")
        .field_selector("status.phase=Running")
        .tweak_list_options(move |mut o: RequestOptions<'_>| {
            tweaks.fetch_add(1, Ordering::SeqCst);
            let f = o.field_selector_mut();
            *f = Some(format!("{},tweaked", f.as_deref().unwrap_or_default()));
        })
    };

    let typed = factory.informer::<Pod>();
    let typed_again = factory.informer::<Pod>();
    let pods_gvr = GroupVersionResource::new("", "v1", "pods");
    assert_eq!(GroupVersionResource::of::<Pod>(), pods_gvr);
    let dynamic = factory.informer_for(&pods_gvr);
    assert!(Arc::ptr_eq(typed.informer(), typed_again.informer()));
    assert!(Arc::ptr_eq(typed.informer(), &dynamic));
    let widgets_gvr = GroupVersionResource::new("example.com", "v1", "widgets");
    let widget_informer = factory.informer_for(&widgets_gvr);
    assert_eq!(
        *made.lock().unwrap(),
        vec![
            (pods_gvr.clone(), Some("ns-1".to_owned())),
            (widgets_gvr.clone(), Some("ns-1".to_owned())),
        ],
        "one lister-watcher per resource, with the namespace"
    );
    assert!(!dynamic.is_started());

    factory.start(&tokio::runtime::Handle::current());
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(factory.sync_status().len(), 2);
    assert!(factory.sync_status().values().all(|s| *s));
    assert_eq!(dynamic.store().len(), 120);
    assert_eq!(widget_informer.store().len(), 30);

    // Typed reads share one decode cache per resource.
    assert_eq!(typed.lister().list().unwrap().len(), 120);
    assert_eq!(typed_again.lister().list().unwrap().len(), 120);
    assert_eq!(typed.lister().decodes(), 120);

    // Every list and watch carried the selectors and went through the tweak hook once (a
    // second pass would append a second ",tweaked"). The informers keep making requests (a
    // watch after each list), so the hook's count is compared once they have shut down.
    let check_log = |log: &Log| {
        let log = log.lock().unwrap().clone();
        assert!(log.iter().any(|(k, _, _)| *k == "list"));
        assert!(log.iter().any(|(k, _, _)| *k == "watch"));
        for (kind, label, field) in &log {
            assert_eq!(label.as_deref(), Some("app=web"), "{kind}");
            assert_eq!(
                field.as_deref(),
                Some("status.phase=Running,tweaked"),
                "{kind}"
            );
        }
        log.len()
    };
    check_log(&log);

    // An informer asked for after start waits for the next start.
    let late = factory.informer_for(&GroupVersionResource::new("example.com", "v1", "gadgets"));
    assert!(!late.is_started());
    factory.start(&tokio::runtime::Handle::current());
    assert!(late.is_started());
    late.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();

    let f = Arc::new(factory);
    let f2 = f.clone();
    tokio::task::spawn_blocking(move || f2.shutdown())
        .await
        .unwrap();
    // Shut down: no request is in flight or starts any more, so every tweak is logged.
    let requests = check_log(&log);
    assert_eq!(tweaks.load(Ordering::SeqCst), requests);
    let after = f.informer_for(&GroupVersionResource::new("", "v1", "nodes"));
    f.start(&tokio::runtime::Handle::current());
    assert!(!after.is_started(), "start after shutdown does nothing");
    assert!(
        after
            .wait_for_cache_sync_blocking(Duration::from_millis(10))
            .is_err()
    );
}

#[test]
fn wait_for_cache_sync_blocking_on_a_runtime_the_caller_owns() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pods = sim(40);
    let factory =
        SharedInformerFactory::new(move |_: &GroupVersionResource, _: Option<&str>| pods.clone());
    let informer = factory.informer::<Pod>();
    factory.start(runtime.handle());
    factory
        .wait_for_cache_sync_blocking(Duration::from_secs(30))
        .unwrap();
    assert_eq!(
        factory
            .sync_status()
            .get(&GroupVersionResource::of::<Pod>()),
        Some(&true)
    );
    assert_eq!(informer.lister().list().unwrap().len(), 40);
    factory.shutdown();
}

/// Counts requests; the first list blocks inside its poll until released.
struct BlockingFirstList {
    sim: SimServer,
    requests: Arc<AtomicUsize>,
    entered: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
    left: Arc<AtomicBool>,
}

impl ListerWatcher for BlockingFirstList {
    type Body = SimWatch;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if let Some(entered) = self.entered.lock().unwrap().take() {
            entered.send(()).unwrap();
            // Blocks the worker thread inside the reflector task's poll.
            self.release.lock().unwrap().recv().unwrap();
            self.left.store(true, Ordering::SeqCst);
        }
        self.sim.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<SimWatch>, ApiError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.sim.watch(opts).await
    }
}

#[test]
fn shutdown_waits_for_a_request_in_progress_and_no_request_follows() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let requests = Arc::new(AtomicUsize::new(0));
    let left = Arc::new(AtomicBool::new(false));
    let informer = Arc::new(Informer::new(
        BlockingFirstList {
            sim: sim(20),
            requests: requests.clone(),
            entered: Mutex::new(Some(entered_tx)),
            release: Mutex::new(release_rx),
            left: left.clone(),
        },
        InformerConfig::default(),
    ));
    assert!(!informer.is_stopped());
    informer.start(runtime.handle());
    entered_rx.recv().unwrap();
    // Two callers: the one that takes the tasks and a concurrent one must both wait.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for _ in 0..2 {
        let (informer, requests, left) = (informer.clone(), requests.clone(), left.clone());
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            informer.shutdown();
            let _ = done_tx.send((left.load(Ordering::SeqCst), requests.load(Ordering::SeqCst)));
        });
    }
    // A correct shutdown cannot return while the list blocks: this wait always runs out
    // (it gives a broken one the time to return early and be caught).
    assert!(
        done_rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "shutdown returned while a list was in progress"
    );
    // Release the list once a shutdown has begun (its wait for the poll usually has too).
    while !informer.is_stopped() {
        std::thread::yield_now();
    }
    release_tx.send(()).unwrap();
    let mut at_shutdown = Vec::new();
    for _ in 0..2 {
        let (list_returned, requests) = done_rx.recv().unwrap();
        assert!(
            list_returned,
            "shutdown returned while a list was in progress"
        );
        at_shutdown.push(requests);
    }
    // Whatever that poll went on to do, nothing more: dropping the runtime ends every task.
    drop(runtime);
    assert_eq!(requests.load(Ordering::SeqCst), at_shutdown[0]);
    assert_eq!(at_shutdown[0], at_shutdown[1]);
}

/// An informer handed out by a factory outlives the factory (as client-go's do): dropping the
/// factory drops only its own references. Waits of `Duration::MAX` mean "no deadline".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informers_outlive_their_factory_and_unbounded_waits_do_not_overflow() {
    let pods = sim(10);
    let informer = {
        let factory =
            SharedInformerFactory::new(move |_: &GroupVersionResource, _: Option<&str>| {
                pods.clone()
            });
        let informer = factory.informer::<Pod>();
        factory.start(&tokio::runtime::Handle::current());
        factory.wait_for_cache_sync(Duration::MAX).await.unwrap();
        tokio::task::block_in_place(|| factory.wait_for_cache_sync_blocking(Duration::MAX))
            .unwrap();
        informer
    };
    assert!(!informer.is_stopped(), "the factory's drop left it running");
    informer.wait_for_cache_sync(Duration::MAX).await.unwrap();
    assert_eq!(informer.lister().list().unwrap().len(), 10);
    informer.shutdown_async().await;
    assert!(informer.is_stopped());
}
