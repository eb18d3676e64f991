//! The informer's handler contract on the simulated API server: per-registration sync with a
//! slow handler and a late one, per-handler resync under paused time, every policy's view
//! (threads and an async stream) equal to the store after a flood with relists, transforms,
//! listers and typed listers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use informer::distributor::{EventHandler, HandlerFns, Notification, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey, StrMap};
use informer::sim::SimServer;
use informer::{
    AlreadyStarted, HandlerOptions, Informer, InformerConfig, LabelSelector, Registration,
    TypedLister,
};

mod common;
mod support;
mod views;

use common::wait_frozen;
use support::{flood_config, synced_informer};
use views::{Recorder, flood_rounds_match_truth};

/// A handler that takes `per_add` of work for each add and checks that its registration does
/// not report synced before its adds are done.
struct SlowAdds {
    per_add: Duration,
    view: Recorder,
    reg: Arc<OnceLock<Registration>>,
    synced_during_add: Arc<AtomicUsize>,
}

impl EventHandler for SlowAdds {
    fn on_add(&mut self, obj: &Arc<Object>, initial: bool) {
        if self.reg.get().is_some_and(Registration::has_synced) {
            self.synced_during_add.fetch_add(1, Ordering::SeqCst);
        }
        if !self.per_add.is_zero() {
            std::thread::sleep(self.per_add);
        }
        self.view.on_add(obj, initial);
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        self.view.on_update(old, new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.view.on_delete(obj);
    }
}

fn slow_adds(
    per_add: Duration,
) -> (
    SlowAdds,
    Recorder,
    Arc<OnceLock<Registration>>,
    Arc<AtomicUsize>,
) {
    let (view, reg, bad) = (
        Recorder::default(),
        Arc::new(OnceLock::new()),
        Arc::default(),
    );
    let h = SlowAdds {
        per_add,
        view: view.clone(),
        reg: reg.clone(),
        synced_during_add: Arc::clone(&bad),
    };
    (h, view, reg, bad)
}

async fn registration_sync_case(objects: usize, per_add: Duration) {
    let sim = SimServer::new(flood_config("etcd", objects, 11)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), InformerConfig::default()));
    let (slow, slow_view, slow_reg, slow_bad) = slow_adds(per_add);
    let reg = informer
        .add_event_handler(slow, informer::HandlerOptions::new())
        .unwrap();
    let _ = slow_reg.set(reg.clone());
    assert!(!reg.has_synced(), "not synced before start");
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(informer.store().len(), objects);
    // The informer synced; the slow handler is still working through its adds.
    assert!(!reg.has_synced(), "slow handler synced before its adds");

    let (late, late_view, late_reg, late_bad) = slow_adds(Duration::ZERO);
    let lreg = informer
        .add_event_handler(late, informer::HandlerOptions::new())
        .unwrap();
    let _ = late_reg.set(lreg.clone());
    assert!(lreg.wait_for_sync(Duration::from_secs(60)).await);
    {
        let v = late_view.0.lock().unwrap();
        assert_eq!(v.adds, objects, "the late handler gets exactly the cache");
        assert_eq!(v.initial_adds, objects);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }
    assert_eq!(late_bad.load(Ordering::SeqCst), 0);

    // The blocking wait, from a blocking thread.
    let r = reg.clone();
    let synced =
        tokio::task::spawn_blocking(move || r.wait_for_sync_blocking(Duration::from_secs(120)))
            .await
            .unwrap();
    assert!(synced);
    {
        let v = slow_view.0.lock().unwrap();
        assert_eq!(v.adds, objects);
        assert_eq!(v.initial_adds, objects);
    }
    assert_eq!(
        slow_bad.load(Ordering::SeqCst),
        0,
        "has_synced was true while an initial add was being handled"
    );
    informer.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_registration_syncs_after_its_own_adds_and_a_late_one_gets_exactly_the_cache() {
    // Default size: 10 000 objects at 100 µs per add (about 1 s of handler work).
    registration_sync_case(10_000, Duration::from_micros(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size of the issue: 10 000 adds at 1 ms each (10 s)"]
async fn each_registration_syncs_after_its_own_adds_full_size() {
    registration_sync_case(10_000, Duration::from_millis(1)).await;
}

/// Counts sync and real updates; on its first sync update, blocks until `gate` opens.
struct Resyncing {
    view: Recorder,
    entered: Arc<AtomicBool>,
    gate: Option<crossbeam::channel::Receiver<()>>,
}

impl EventHandler for Resyncing {
    fn on_add(&mut self, obj: &Arc<Object>, initial: bool) {
        self.view.on_add(obj, initial);
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        if old.resource_version() == new.resource_version()
            && let Some(gate) = self.gate.take()
        {
            self.entered.store(true, Ordering::SeqCst);
            let _ = gate.recv();
        }
        self.view.on_update(old, new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.view.on_delete(obj);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn resync_goes_only_to_the_handler_due_and_never_delays_the_others() {
    const OBJECTS: usize = 50;
    const SECONDS: usize = 100;
    let sim = SimServer::new(flood_config("etcd", OBJECTS, 11).bookmark_interval(None)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), InformerConfig::default()));
    let (gate_tx, gate_rx) = crossbeam::channel::bounded::<()>(0);
    let entered = Arc::new(AtomicBool::new(false));
    let a = Recorder::default();
    let b = Recorder::default();
    let reg_a = informer
        .add_event_handler(
            Resyncing {
                view: a.clone(),
                entered: entered.clone(),
                gate: Some(gate_rx),
            },
            informer::HandlerOptions::new().resync(Duration::from_secs(30)),
        )
        .unwrap();
    let reg_b = informer
        .add_event_handler(
            b.clone(),
            informer::HandlerOptions::new().resync(Duration::ZERO),
        )
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    let t0 = tokio::time::Instant::now();
    wait_frozen("both synced", || reg_a.has_synced() && reg_b.has_synced()).await;
    assert_eq!(
        tokio::time::Instant::now(),
        t0,
        "no virtual time passed while syncing"
    );

    let keys: Vec<ObjectKey> = informer.store().keys();
    assert_eq!(keys.len(), OBJECTS);
    // Updates at t0 + k + 0.5 s, away from the resyncs at t0 + 30, 60, 90 s.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for k in 0..SECONDS {
        sim.update(&keys[k % OBJECTS]).unwrap();
        wait_frozen("B got the update", || b.0.lock().unwrap().updates == k + 1).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // B got every real update while A was stuck in its first resync since t0 + 30 s.
    assert!(entered.load(Ordering::SeqCst), "A never got a sync update");
    {
        let v = b.0.lock().unwrap();
        assert_eq!(v.syncs, 0, "B (no resync) got sync updates");
        assert_eq!(v.updates, SECONDS);
        assert!(v.violations.is_empty(), "{:?}", v.violations);
    }
    assert!(
        a.0.lock().unwrap().updates < SECONDS,
        "A should still be blocked behind its resync"
    );
    drop(gate_tx);
    // Blocks the runtime thread, which is fine: everything is published already.
    informer.flush();
    let v = a.0.lock().unwrap();
    assert_eq!(v.updates, SECONDS, "A got every real update too");
    assert_eq!(
        v.syncs,
        3 * OBJECTS,
        "three resyncs of every object (30, 60, 90 s)"
    );
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    drop(v);
    informer.shutdown();
}

#[tokio::test(flavor = "current_thread")]
async fn every_policy_and_a_stream_end_equal_to_the_store_after_a_flood_with_relists() {
    tokio::time::timeout(Duration::from_secs(100), views_inner())
        .await
        .unwrap();
}

async fn views_inner() {
    // A small window and no flow control: while `step` runs on the only runtime thread the
    // watch falls out of the window, gets 410 Gone and relists (deletions as tombstones).
    let sim = SimServer::new(flood_config("etcd", 200, 11).history_window(100)).unwrap();
    let informer = Arc::new(Informer::new(sim.clone(), InformerConfig::default()));
    let policies = [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 1 },
        OverflowPolicy::CoalesceByKey,
    ];
    let mut views = Vec::new();
    for p in policies {
        let v = Recorder::default();
        informer
            .add_event_handler(v.clone(), HandlerOptions::new().policy(p))
            .unwrap();
        views.push(v);
    }
    let (_reg, mut stream) = informer
        .add_stream(HandlerOptions::new().policy(OverflowPolicy::CoalesceByKey))
        .unwrap();
    let stream_view = Recorder::default();
    let sv = stream_view.clone();
    let reader = tokio::spawn(async move {
        while let Some(n) = stream.next().await {
            sv.0.lock().unwrap().apply(&n);
        }
    });
    views.push(stream_view);
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    flood_rounds_match_truth(&sim, &informer, &views, 3, 1_500).await;
    let m = informer.reflector_metrics().unwrap();
    assert!(
        m.relists.load(Ordering::Relaxed) >= 1,
        "expected relists after 410"
    );
    let i = informer.clone();
    tokio::task::spawn_blocking(move || i.shutdown())
        .await
        .unwrap();
    reader.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_stream_registered_late_gets_the_cache_without_the_registration_waiting() {
    let sim = SimServer::new(flood_config("etcd", 300, 11)).unwrap();
    let informer = synced_informer(&sim).await;
    // Capacity one batch and nobody polling yet: the replay and its sync marker still fit.
    let (reg, mut stream) = informer
        .add_stream(HandlerOptions::new().policy(OverflowPolicy::Block { capacity: 1 }))
        .unwrap();
    assert!(!reg.has_synced());
    let mut adds = 0;
    while adds < 300 {
        match stream.next().await.unwrap() {
            Notification::Add {
                is_in_initial_list: true,
                ..
            } => adds += 1,
            other => panic!("expected initial adds first, got {other:?}"),
        }
    }
    assert!(!reg.has_synced(), "synced before the reader came back");
    // Polling again (nothing else comes) passes the marker.
    let next = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
    assert!(next.is_err(), "no live event expected");
    assert!(reg.has_synced());
    assert_eq!(stream.listener().stats().delivered, 300);
    informer.remove_event_handler(&reg);
    assert!(
        stream.next().await.is_none(),
        "the stream ends after removal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transform_applies_before_the_store_and_cannot_change_after_start() {
    let sim = SimServer::new(flood_config("etcd", 50, 11)).unwrap();
    let informer = Informer::new(sim.clone(), InformerConfig::default());
    informer
        .set_transform(|o: Arc<Object>| {
            let mut meta = o.meta().to_fields();
            meta.annotations
                .insert("transformed".to_owned().into(), "yes".to_owned().into());
            Arc::new(o.with_meta(meta.into()).unwrap())
        })
        .unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    informer
        .add_event_handler(
            HandlerFns::new().with_add(move |o, _| {
                if o.meta().annotations().get("transformed") == Some("yes") {
                    s.fetch_add(1, Ordering::SeqCst);
                }
            }),
            informer::HandlerOptions::new(),
        )
        .unwrap();
    informer.start(&tokio::runtime::Handle::current());
    assert_eq!(informer.set_transform(|o| o), Err(AlreadyStarted));
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    informer.flush();
    assert_eq!(seen.load(Ordering::SeqCst), 50);
    assert!(
        informer
            .store()
            .list()
            .iter()
            .all(|o| o.meta().annotations().contains_key("transformed"))
    );
    informer.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listers_read_by_namespace_and_selector_and_typed_reads_decode_once_per_version() {
    use k8s_pb::api::core::v1::Pod;

    let sim = SimServer::new(flood_config("etcd", 200, 11)).unwrap();
    let informer = synced_informer(&sim).await;
    let lister = informer.lister();
    let all = lister.list();
    assert_eq!(all.len(), 200);

    // Namespace lister (through the namespace index) == filtering by hand.
    let ns = all[0].namespace().to_owned();
    let mut by_index: Vec<String> = lister
        .namespace(&ns)
        .list()
        .iter()
        .map(|o| o.name().to_owned())
        .collect();
    let mut by_hand: Vec<String> = all
        .iter()
        .filter(|o| o.namespace() == ns)
        .map(|o| o.name().to_owned())
        .collect();
    by_index.sort();
    by_hand.sort();
    assert!(!by_hand.is_empty());
    assert_eq!(by_index, by_hand);
    assert!(lister.namespace(&ns).get(&by_hand[0]).is_some());
    assert!(lister.get(&ns, &by_hand[0]).is_some());
    assert!(lister.get("no-such-namespace", &by_hand[0]).is_none());

    // Label selectors == filtering by hand.
    let (key, value) = all[0].meta().labels().iter().next().unwrap();
    let sel: LabelSelector = format!("{key}={value}").parse().unwrap();
    let want = all
        .iter()
        .filter(|o| o.meta().labels().get(key) == Some(value))
        .count();
    assert_eq!(lister.list_matching(&sel).len(), want);
    let not: LabelSelector = format!("{key}!={value}").parse().unwrap();
    assert_eq!(lister.list_matching(&not).len(), 200 - want);

    // Typed: decoded once per object version, the same Arc on every read.
    let typed: TypedLister<Pod> = TypedLister::new(lister.clone());
    let first = typed.get(&ns, &by_hand[0]).unwrap().unwrap();
    let again = typed.get(&ns, &by_hand[0]).unwrap().unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(
        first.metadata.as_ref().unwrap().name.as_deref(),
        Some(by_hand[0].as_str())
    );
    assert_eq!(typed.list().unwrap().len(), 200);
    assert_eq!(typed.list().unwrap().len(), 200);
    assert_eq!(
        typed.decodes(),
        200,
        "each object decoded once across reads"
    );
    assert_eq!(typed.namespace(&ns).list().unwrap().len(), by_hand.len());

    // A new version is decoded again, once.
    let key = ObjectKey::new(&ns, &by_hand[0]);
    let rv = sim.update(&key).unwrap();
    informer
        .store()
        .wait_for(rv.resource_version().parse().unwrap())
        .await
        .unwrap();
    let updated = typed.get(&ns, &by_hand[0]).unwrap().unwrap();
    assert!(!Arc::ptr_eq(&first, &updated));
    assert_eq!(
        updated
            .metadata
            .as_ref()
            .unwrap()
            .resource_version
            .as_deref(),
        Some(rv.resource_version())
    );
    assert_eq!(typed.decodes(), 201);
    informer.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_added_after_start_cover_the_cache_and_later_changes_and_typed_reads_use_them() {
    use informer::TypedIndexError;
    use informer::store::{LABELS_INDEX, StoreError, labels_index_func};
    use k8s_pb::api::core::v1::Pod;

    let sim = SimServer::new(flood_config("etcd", 150, 11)).unwrap();
    let informer = synced_informer(&sim).await;
    informer
        .add_indexers([(LABELS_INDEX.to_owned(), labels_index_func())])
        .unwrap();
    let typed: TypedLister<Pod> = TypedLister::new(informer.lister());
    let by_app = |typed_too: bool| {
        // app label value -> keys, from the index and by hand, on one store version.
        let snap = informer.store().snapshot();
        let mut by_hand: BTreeMap<String, Vec<ObjectKey>> = BTreeMap::new();
        for (k, o) in snap.iter() {
            by_hand
                .entry(o.meta().labels().get("app").unwrap().to_string())
                .or_default()
                .push(k.clone());
        }
        for (app, keys) in &mut by_hand {
            keys.sort();
            let from_index = snap
                .index_keys(LABELS_INDEX, &format!("app={app}"))
                .unwrap();
            assert_eq!(&from_index, keys, "app={app}");
            if typed_too {
                let pods = typed.by_index(LABELS_INDEX, &format!("app={app}")).unwrap();
                assert!(
                    pods.iter()
                        .all(|p| { p.metadata.as_ref().unwrap().labels.get("app") == Some(app) })
                );
            }
        }
        by_hand.len()
    };
    assert!(by_app(true) > 10, "existing objects indexed");
    // Later changes keep the index in step.
    let rv = sim.flood(2_000).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    by_app(false);

    assert!(matches!(
        informer.add_indexers([(LABELS_INDEX.to_owned(), labels_index_func())]),
        Err(StoreError::IndexExists { .. })
    ));
    assert!(matches!(
        typed.by_index("no-such-index", "x"),
        Err(TypedIndexError::Store(StoreError::UnknownIndex { .. }))
    ));
    assert_eq!(typed.by_index(LABELS_INDEX, "app=none").unwrap(), vec![]);
    informer.shutdown();
}

#[test]
fn label_selectors_parse_as_upstream_and_reject_bad_input() {
    let labels = |pairs: &[(&str, &str)]| -> StrMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let l = labels(&[("app", "web"), ("tier", "front")]);
    let cases = [
        ("", true),
        ("app", true),
        ("!app", false),
        ("!missing", true),
        ("app=web", true),
        ("app==web", true),
        ("app!=web", false),
        ("missing!=x", true),
        ("tier in (front, back)", true),
        ("tier notin (front,back)", false),
        ("missing notin (a)", true),
        ("app=web,tier in (back)", false),
        ("app=web, tier=front", true),
    ];
    for (s, want) in cases {
        let sel: LabelSelector = s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(sel.matches(&l), want, "{s:?}");
    }
    for bad in ["app in front", "a b c", "=x", "app=(x", "app in (a b)", ","] {
        assert!(
            bad.parse::<LabelSelector>().is_err(),
            "{bad:?} should not parse"
        );
    }
    let long = "a".repeat(informer::MAX_SELECTOR_LEN + 1);
    assert!(long.parse::<LabelSelector>().is_err());
    let round: LabelSelector = "app=web,tier in (a,b),!x".parse().unwrap();
    assert_eq!(round.to_string().parse::<LabelSelector>().unwrap(), round);
}

/// Edge cases of upstream `labels.Parse` (apimachinery `pkg/labels/selector.go`): empty
/// values, `>`/`<`, and key/value validation.
#[test]
fn label_selectors_follow_upstream_edge_cases() {
    let labels = |pairs: &[(&str, &str)]| -> StrMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let matches = |sel: &str, pairs: &[(&str, &str)]| -> bool {
        sel.parse::<LabelSelector>()
            .unwrap_or_else(|e| panic!("{sel:?}: {e}"))
            .matches(&labels(pairs))
    };
    // Empty values.
    assert!(matches("x in ()", &[("x", "")]));
    assert!(!matches("x in ()", &[("x", "a")]));
    assert!(matches("x in (a,)", &[("x", "")]));
    assert!(matches("x in (,a)", &[("x", "a")]));
    assert!(matches("x=", &[("x", "")]));
    assert!(!matches("x=", &[]));
    assert!(matches("x!=,y", &[("x", "a"), ("y", "b")]));
    // Integer comparisons: only integer values match.
    assert!(matches("replicas>3", &[("replicas", "5")]));
    assert!(!matches("replicas>3", &[("replicas", "3")]));
    assert!(!matches("replicas>3", &[("replicas", "many")]));
    assert!(!matches("replicas>3", &[]));
    assert!(matches("replicas<3", &[("replicas", "2")]));
    assert!(matches("a<10,b>0", &[("a", "9"), ("b", "1")]));
    // Keywords are operators only in operator position; whitespace as upstream.
    assert!(matches("in in (in, notin)", &[("in", "notin")]));
    assert!(matches(
        "\tapp.kubernetes.io/name =\r\nweb ",
        &[("app.kubernetes.io/name", "web")]
    ));
    assert!(matches("!x", &[]));
    for bad in [
        "-a",
        "a-",
        "a/b/c",
        "/a",
        "a/",
        "Example.COM/a",
        "x=-v",
        "x=a b",
        "x>abc",
        "x>",
        "x>-1",
        "x in (a b)",
        "x in a",
        "x in (a",
        "!x=y",
        "x,",
        ",x",
        "x,,y",
        "x=(a)",
        "x===y",
        "x notin",
    ] {
        assert!(
            bad.parse::<LabelSelector>().is_err(),
            "{bad:?} should not parse"
        );
    }
    let name63 = "a".repeat(63);
    let name64 = "a".repeat(64);
    assert!(
        format!("{name63}={name63}")
            .parse::<LabelSelector>()
            .is_ok()
    );
    assert!(format!("{name64}=a").parse::<LabelSelector>().is_err());
    assert!(format!("a={name64}").parse::<LabelSelector>().is_err());
    let prefix253 = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    assert_eq!(prefix253.len(), 253);
    assert!(format!("{prefix253}/x").parse::<LabelSelector>().is_ok());
    assert!(format!("{prefix253}e/x").parse::<LabelSelector>().is_err());
    // Display parses back to the same selector.
    for s in ["x in (a,),y>3,z<0,!w,v", "x in (,a)", "x=", "x notin ()"] {
        let sel: LabelSelector = s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(
            sel.to_string().parse::<LabelSelector>().unwrap(),
            sel,
            "{s:?}"
        );
    }
    // The error names the offending requirement.
    match "app=web,tier=-x".parse::<LabelSelector>() {
        Err(informer::SelectorError::Invalid { requirement, .. }) => {
            assert_eq!(requirement, "tier=-x");
        }
        other => panic!("{other:?}"),
    }
}

proptest::proptest! {
    /// Any input: an error or a selector whose display parses back to itself; never a panic.
    #[test]
    fn label_selector_parse_never_panics_and_round_trips(s in "[a-z0-9.=!<>(), /éA_-]{0,40}") {
        if let Ok(sel) = s.parse::<LabelSelector>() {
            let again: LabelSelector = sel.to_string().parse().unwrap();
            proptest::prop_assert_eq!(again, sel);
        }
    }
}

/// Once synced, the store reflects the list's resourceVersion: the processing thread can
/// apply a whole (small) list before the reflector records the list's version, so the version
/// must come with the list itself. Many short-lived informers make that interleaving likely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synced_store_reflects_the_list_resource_version() {
    let sim = SimServer::new(flood_config("etcd", 20, 3)).unwrap();
    let listed = sim.resource_version();
    for i in 0..200 {
        let informer = synced_informer(&sim).await;
        let rv = informer.store().resource_version();
        tokio::task::block_in_place(|| informer.shutdown());
        assert_eq!(rv, listed, "round {i}: synced at resourceVersion {rv}");
    }
}
