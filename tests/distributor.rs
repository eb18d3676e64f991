//! Distributor: delivery guarantees per overflow policy, isolation of slow listeners, panics,
//! late listeners, runtime add/remove and shutdown. No sleeps: gates, markers and joins (the
//! `wakeup` stress tests pause at random on purpose, to land publishes inside a listener's wait).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use crossbeam::channel::{Receiver, Sender, bounded};
use informer::distributor::{
    AddListenerError, Distributor, EventHandler, HandlerFns, Notification, OverflowPolicy,
};
use informer::fifo::{DeletedFinalStateUnknown, DeltaObject};
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectKey, ObjectMeta};

#[path = "distributor/wakeup.rs"]
mod wakeup;

fn obj(name: &str, rv: u64) -> Arc<Object> {
    let meta = ObjectMeta::from(ObjectMetaFields {
        name: name.to_owned().into(),
        namespace: "ns".to_owned().into(),
        resource_version: rv.to_string().into(),
        ..Default::default()
    });
    Arc::new(Object::from_parts(
        Arc::new(GroupVersionKind::new("", "v1", "ConfigMap")),
        meta,
        Bytes::new(),
        Encoding::Json,
    ))
}

fn rv(o: &Object) -> u64 {
    o.resource_version().parse().unwrap()
}

/// Updates numbered `from..from+n` on `keys` keys, in batches of `batch`.
fn updates(from: u64, n: u64, keys: u64, batch: usize) -> Vec<Arc<[Notification]>> {
    let all: Vec<Notification> = (from..from + n)
        .map(|i| {
            let o = obj(&format!("k{}", i % keys), i);
            Notification::Update {
                old: o.clone(),
                new: o,
            }
        })
        .collect();
    all.chunks(batch).map(Arc::from).collect()
}

/// Records the resourceVersion of every notification, in order.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<u64>>>);

impl Recorder {
    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl EventHandler for Recorder {
    fn on_add(&mut self, obj: &Arc<Object>, _: bool) {
        self.0.lock().unwrap().push(rv(obj));
    }
    fn on_update(&mut self, _: &Arc<Object>, new: &Arc<Object>) {
        self.0.lock().unwrap().push(rv(new));
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.0.lock().unwrap().push(rv(obj.object()));
    }
}

/// A handler that, on its first call, reports it entered and waits for the gate to open.
struct Gated<H> {
    entered: Option<Sender<()>>,
    gate: Receiver<()>,
    inner: H,
}

fn gated<H>(inner: H) -> (Gated<H>, Receiver<()>, Sender<()>) {
    let (entered_tx, entered_rx) = bounded(1);
    let (gate_tx, gate_rx) = bounded(0);
    let g = Gated {
        entered: Some(entered_tx),
        gate: gate_rx,
        inner,
    };
    (g, entered_rx, gate_tx)
}

impl<H> Gated<H> {
    fn wait_gate(&mut self) {
        if let Some(tx) = self.entered.take() {
            tx.send(()).unwrap();
            // The test opens the gate by dropping its sender.
            let _ = self.gate.recv();
        }
    }
}

impl<H: EventHandler> EventHandler for Gated<H> {
    fn on_add(&mut self, obj: &Arc<Object>, initial: bool) {
        self.wait_gate();
        self.inner.on_add(obj, initial);
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        self.wait_gate();
        self.inner.on_update(old, new);
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        self.wait_gate();
        self.inner.on_delete(obj);
    }
}

#[test]
fn every_listener_gets_every_notification_in_order_exactly_once() {
    for policy in [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 1 },
        OverflowPolicy::Block { capacity: 64 },
    ] {
        let d = Distributor::new();
        let recorders: Vec<Recorder> = (0..3).map(|_| Recorder::default()).collect();
        for (i, r) in recorders.iter().enumerate() {
            d.add_listener(&format!("l{i}"), policy, r.clone()).unwrap();
        }
        for batch in updates(0, 20_000, 100, 37) {
            d.publish(batch);
        }
        d.flush();
        let want: Vec<u64> = (0..20_000).collect();
        for (i, r) in recorders.iter().enumerate() {
            assert_eq!(r.take(), want, "{policy:?} listener {i}");
        }
        for l in d.listeners() {
            let s = l.stats();
            assert_eq!((s.published, s.delivered, s.pending), (20_000, 20_000, 0));
            assert_eq!(s.panics, 0);
        }
        d.shutdown();
    }
}

#[test]
fn blocked_unbounded_listener_does_not_slow_the_others() {
    const N: u64 = 200_000;
    let d = Distributor::new();
    let (blocked, entered, gate) = gated(Recorder::default());
    let blocked_rec = blocked.inner.clone();
    let slow = d
        .add_listener("blocked", OverflowPolicy::Unbounded, blocked)
        .unwrap();
    let fast_rec = Recorder::default();
    let fast = d
        .add_listener("fast", OverflowPolicy::Unbounded, fast_rec.clone())
        .unwrap();

    let batches = updates(0, N, 1000, 100);
    d.publish(batches[0].clone());
    entered.recv().unwrap(); // the blocked listener is now stuck in its handler
    for b in &batches[1..] {
        d.publish(b.clone()); // never waits for the stuck listener
    }
    // The fast listener receives everything while the other is still stuck.
    assert!(d.flush_listener(fast.id()));
    assert_eq!(fast_rec.take(), (0..N).collect::<Vec<_>>());
    let lag = slow.stats();
    assert_eq!(lag.delivered, 0);
    assert_eq!(lag.pending, N);
    assert_eq!(lag.max_pending, N);

    drop(gate);
    assert!(d.flush_listener(slow.id()));
    assert_eq!(blocked_rec.take(), (0..N).collect::<Vec<_>>());
    let drained = slow.stats();
    assert_eq!((drained.pending, drained.delivered), (0, N));
    assert_eq!(drained.max_pending, N);
    d.shutdown();
}

#[test]
fn block_policy_applies_backpressure_and_loses_nothing() {
    let d = Arc::new(Distributor::new());
    let (blocked, entered, gate) = gated(Recorder::default());
    let rec = blocked.inner.clone();
    let other_rec = Recorder::default();
    d.add_listener("block", OverflowPolicy::Block { capacity: 2 }, blocked)
        .unwrap();
    let other = d
        .add_listener("other", OverflowPolicy::Unbounded, other_rec.clone())
        .unwrap();

    let batches = updates(0, 10_000, 50, 10);
    d.publish(batches[0].clone());
    entered.recv().unwrap();
    let (done_tx, done_rx) = bounded(1);
    let publisher = {
        let d = d.clone();
        let batches = batches.clone();
        std::thread::spawn(move || {
            for b in &batches[1..] {
                d.publish(b.clone());
            }
            done_tx.send(()).unwrap();
        })
    };
    // The publisher cannot get through 999 batches with 2 slots while the listener is stuck.
    assert!(done_rx.recv_timeout(Duration::from_millis(100)).is_err());
    // The unbounded listener got every batch the publisher managed to publish (capacity + the
    // one in the handler + the one being sent), not more.
    assert!(d.flush_listener(other.id()));
    let seen = other_rec.take().len();
    assert!(seen <= 4 * 10, "publisher should be held back, got {seen}");

    drop(gate);
    publisher.join().unwrap();
    d.flush();
    assert_eq!(rec.take(), (0..10_000).collect::<Vec<_>>());
    assert_eq!(other_rec.take().len() + seen, 10_000);
    d.shutdown();
}

#[test]
fn panicking_handler_is_reported_and_the_listener_goes_on() {
    let d = Distributor::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let listener = d
        .add_listener(
            "panicky",
            OverflowPolicy::Unbounded,
            HandlerFns::new().with_update(move |_, new| {
                let v = rv(new);
                if v % 10 == 3 {
                    panic!("bad object {v}");
                }
                s.lock().unwrap().push(v);
            }),
        )
        .unwrap();
    for b in updates(0, 100, 10, 7) {
        d.publish(b);
    }
    d.flush();
    let want: Vec<u64> = (0..100).filter(|v| v % 10 != 3).collect();
    assert_eq!(*seen.lock().unwrap(), want);
    let stats = listener.stats();
    assert_eq!(stats.panics, 10);
    assert_eq!(stats.delivered, 100);
    assert_eq!(stats.last_panic.as_deref(), Some("bad object 93"));
    d.shutdown();
}

#[test]
fn late_listener_gets_initial_adds_first_then_live_events() {
    let d = Distributor::new();
    let early = Recorder::default();
    d.add_listener("early", OverflowPolicy::Unbounded, early.clone())
        .unwrap();
    for b in updates(0, 100, 10, 10) {
        d.publish(b);
    }

    // The informer: register, replay the cache to this listener only, mark, then go on live.
    let flags = Arc::new(Mutex::new(Vec::new()));
    let f = flags.clone();
    let (late_handler, entered, gate) = gated(HandlerFns::new().with_add(move |o, initial| {
        f.lock().unwrap().push((rv(o), initial));
    }));
    let late = d
        .add_listener("late", OverflowPolicy::Unbounded, late_handler)
        .unwrap();
    let cache: Vec<Notification> = (0..10)
        .map(|i| Notification::Add {
            obj: obj(&format!("k{i}"), 90 + i),
            is_in_initial_list: true,
        })
        .collect();
    assert!(d.publish_to(late.id(), cache));
    let synced = d.marker(late.id()).unwrap();
    d.publish(vec![Notification::Add {
        obj: obj("new", 100),
        is_in_initial_list: false,
    }]);

    entered.recv().unwrap();
    assert!(
        !synced.is_reached(),
        "the late listener has not handled its adds"
    );
    drop(gate);
    synced.wait();
    d.flush();
    let got = flags.lock().unwrap().clone();
    let mut want: Vec<(u64, bool)> = (90..100).map(|v| (v, true)).collect();
    want.push((100, false));
    assert_eq!(got, want);
    assert_eq!(early.take().len(), 101, "the early listener got no replay");
    assert!(!d.publish_to(informer_id_unknown(&d), vec![]));
    d.shutdown();
}

fn informer_id_unknown(d: &Distributor) -> informer::distributor::ListenerId {
    // Add then remove a listener: its id is no longer known.
    let l = d
        .add_listener("gone", OverflowPolicy::Unbounded, HandlerFns::new())
        .unwrap();
    d.remove_listener(l.id()).unwrap();
    l.id()
}

#[test]
fn listeners_can_be_added_and_removed_at_runtime() {
    let d = Distributor::new();
    let a = Recorder::default();
    let b = Recorder::default();
    let la = d
        .add_listener("a", OverflowPolicy::Unbounded, a.clone())
        .unwrap();
    for batch in updates(0, 10, 5, 5) {
        d.publish(batch);
    }
    let lb = d
        .add_listener("b", OverflowPolicy::CoalesceByKey, b.clone())
        .unwrap();
    // Distinct keys: the coalescing listener has nothing to merge even if it lags.
    for batch in updates(10, 10, 1000, 5) {
        d.publish(batch);
    }
    let final_a = d.remove_listener(la.id()).unwrap();
    assert_eq!(final_a.delivered, 20);
    assert_eq!(d.remove_listener(la.id()), None);
    for batch in updates(20, 10, 1000, 5) {
        d.publish(batch);
    }
    d.flush();
    assert_eq!(a.take(), (0..20).collect::<Vec<_>>());
    assert_eq!(b.take(), (10..30).collect::<Vec<_>>());
    assert_eq!(d.listeners().len(), 1);
    assert_eq!(d.listener(lb.id()).unwrap().name(), "b");
    d.shutdown();
}

#[test]
fn shutdown_drains_then_joins_and_refuses_new_listeners() {
    let d = Distributor::new();
    let recs: Vec<Recorder> = (0..3).map(|_| Recorder::default()).collect();
    let policies = [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 1 },
        OverflowPolicy::CoalesceByKey,
    ];
    for (r, p) in recs.iter().zip(policies) {
        d.add_listener("l", p, r.clone()).unwrap();
    }
    for batch in updates(0, 1000, 1000, 10) {
        d.publish(batch);
    }
    d.shutdown();
    for r in &recs {
        // Distinct keys: even the coalescing listener gets all of them.
        assert_eq!(r.take().len(), 1000);
    }
    assert!(matches!(
        d.add_listener("x", OverflowPolicy::Unbounded, HandlerFns::new()),
        Err(AddListenerError::ShutDown)
    ));
    assert!(matches!(
        Distributor::new().add_listener(
            "x",
            OverflowPolicy::Block { capacity: 0 },
            HandlerFns::new()
        ),
        Err(AddListenerError::ZeroCapacity)
    ));
}

/// A listener's view of the objects, rebuilt from its notifications.
#[derive(Clone, Default)]
struct View(Arc<Mutex<ViewState>>);

#[derive(Default)]
struct ViewState {
    objects: HashMap<ObjectKey, u64>,
    calls: usize,
}

impl EventHandler for View {
    fn on_add(&mut self, obj: &Arc<Object>, _: bool) {
        let mut v = self.0.lock().unwrap();
        v.calls += 1;
        assert!(
            v.objects.insert(obj.key(), rv(obj)).is_none(),
            "add of a known key"
        );
    }
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        let mut v = self.0.lock().unwrap();
        v.calls += 1;
        let held = v.objects.insert(new.key(), rv(new));
        assert_eq!(
            held,
            Some(rv(old)),
            "update from a state the view does not hold"
        );
    }
    fn on_delete(&mut self, obj: &DeltaObject) {
        let mut v = self.0.lock().unwrap();
        v.calls += 1;
        assert!(
            v.objects.remove(&obj.key()).is_some(),
            "delete of an unknown key"
        );
    }
}

#[test]
fn coalescing_listener_holds_one_entry_per_key_and_ends_in_the_final_state() {
    let d = Distributor::new();
    let (handler, entered, gate) = gated(View::default());
    let view = handler.inner.clone();
    let exact = View::default();
    let lc = d
        .add_listener("coalesce", OverflowPolicy::CoalesceByKey, handler)
        .unwrap();
    d.add_listener("exact", OverflowPolicy::Unbounded, exact.clone())
        .unwrap();

    d.publish(vec![Notification::Add {
        obj: obj("gate", 0),
        is_in_initial_list: false,
    }]);
    entered.recv().unwrap();

    // A realistic stream for 50 keys while the coalescing listener is stuck: adds, many
    // updates, deletes (plain and tombstones) and re-creations.
    let mut state: HashMap<String, Arc<Object>> = HashMap::new();
    let mut rv_next = 1;
    let mut stream = Vec::new();
    for round in 0..20 {
        for k in 0..50 {
            let name = format!("k{k}");
            let new = obj(&name, rv_next);
            rv_next += 1;
            let n = match state.get(&name) {
                None => Notification::Add {
                    obj: new.clone(),
                    is_in_initial_list: false,
                },
                Some(old) if (k + round) % 7 == 0 => {
                    let old = old.clone();
                    state.remove(&name);
                    let obj = if k % 2 == 0 {
                        DeltaObject::Object(old)
                    } else {
                        DeletedFinalStateUnknown {
                            key: old.key(),
                            obj: old,
                        }
                        .into()
                    };
                    stream.push(Notification::Delete { obj });
                    continue;
                }
                Some(old) => Notification::Update {
                    old: old.clone(),
                    new: new.clone(),
                },
            };
            state.insert(name, new);
            stream.push(n);
        }
    }
    for chunk in stream.chunks(64) {
        d.publish(chunk.to_vec());
    }

    let lag = lc.stats();
    // At most one pending entry per key, plus the gate notification in the handler.
    assert!(lag.pending <= 51, "pending {}", lag.pending);
    assert_eq!(lag.published, stream.len() as u64 + 1);

    drop(gate);
    d.flush();
    let want: HashMap<ObjectKey, u64> = state.values().map(|o| (o.key(), rv(o))).collect();
    let mut got = view.0.lock().unwrap().objects.clone();
    got.remove(&ObjectKey::new("ns", "gate"));
    assert_eq!(got, want);
    assert_eq!(exact.0.lock().unwrap().objects.len(), want.len() + 1);
    let calls = view.0.lock().unwrap().calls;
    assert!(calls <= 51, "coalesced listener handled {calls} calls");
    let s = lc.stats();
    assert_eq!(s.panics, 0, "view check failed: {:?}", s.last_panic);
    for l in d.listeners() {
        assert_eq!(
            l.stats().panics,
            0,
            "{}: {:?}",
            l.name(),
            l.stats().last_panic
        );
    }
    assert_eq!(s.pending, 0);
    assert_eq!(s.delivered + s.coalesced, s.published);
    d.shutdown();
}

#[test]
fn coalescing_listener_that_keeps_up_gets_everything() {
    let d = Distributor::new();
    let rec = Recorder::default();
    d.add_listener("c", OverflowPolicy::CoalesceByKey, rec.clone())
        .unwrap();
    for batch in updates(0, 1000, 10, 10) {
        d.publish(batch);
        d.flush(); // the listener keeps up: nothing to coalesce
    }
    assert_eq!(rec.take(), (0..1000).collect::<Vec<_>>());
}

#[test]
fn async_marker_wait() {
    let d = Distributor::new();
    let rec = Recorder::default();
    let l = d
        .add_listener("a", OverflowPolicy::Unbounded, rec.clone())
        .unwrap();
    for batch in updates(0, 100, 10, 10) {
        d.publish(batch);
    }
    let m = d.marker(l.id()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(m.reached());
    assert!(m.is_reached());
    assert_eq!(rec.take().len(), 100);
    assert!(l.stats().handler_time > Duration::ZERO);
}

#[test]
fn remove_listener_drains_what_was_published_and_releases_its_markers() {
    let d = Arc::new(Distributor::new());
    let (h, entered, gate) = gated(Recorder::default());
    let rec = h.inner.clone();
    let l = d.add_listener("g", OverflowPolicy::Unbounded, h).unwrap();
    for batch in updates(0, 100, 10, 10) {
        d.publish(batch);
    }
    entered.recv().unwrap();
    let m = d.marker(l.id()).unwrap();
    assert!(!m.is_reached());
    let remover = std::thread::spawn({
        let d = d.clone();
        move || d.remove_listener(l.id())
    });
    drop(gate);
    let stats = remover.join().unwrap().unwrap();
    assert!(m.is_reached());
    assert_eq!(stats.delivered, 100);
    assert_eq!(rec.take(), (0..100).collect::<Vec<_>>());
}

/// Runs `f` on its own thread; fails the test if it has not returned within `secs` (a
/// deadlock: the stuck thread is left behind, the test reports instead of hanging).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("deadlock: {what} did not return within {secs} s"))
}

fn one_update(name: &str, rv: u64) -> Arc<[Notification]> {
    let o = obj(name, rv);
    Arc::from(vec![Notification::Update {
        old: o.clone(),
        new: o,
    }])
}

/// Regression: `stop` used a blocking send, so a `Block` handler removing itself while its
/// channel was full waited for itself forever (and the publisher with it).
#[test]
fn a_full_block_listener_can_remove_itself_from_its_handler() {
    let d = Arc::new(Distributor::new());
    let id = Arc::new(std::sync::OnceLock::new());
    let (h, entered, gate) = gated(Recorder::default());
    let rec = h.inner.clone();
    let (d2, id2) = (d.clone(), id.clone());
    let mut h = h;
    let l = d
        .add_listener(
            "self-remover",
            OverflowPolicy::Block { capacity: 1 },
            HandlerFns::new().with_update(move |old, new| {
                let first = h.entered.is_some();
                h.on_update(old, new);
                if first {
                    d2.remove_listener(*id2.get().unwrap());
                }
            }),
        )
        .unwrap();
    id.set(l.id()).unwrap();
    d.publish(one_update("a", 1));
    entered.recv().unwrap();
    d.publish(one_update("a", 2)); // the channel (one batch) is full now
    drop(gate);
    // It handles what was queued before its removal, then its thread ends.
    let l2 = l.clone();
    within(10, "self-removal", move || {
        while l2.stats().delivered < 2 {
            std::thread::yield_now();
        }
    });
    assert_eq!(rec.take(), vec![1, 2]);
    assert!(d.listener(l.id()).is_none());
    let d3 = d.clone();
    within(10, "publish and shutdown", move || {
        d3.publish(one_update("a", 3));
        d3.shutdown();
    });
    assert_eq!(l.stats().delivered, 2);
}

/// Regression: removing (or shutting down with) a full `Block` stream that nobody polls — e.g.
/// from the very task that reads it — waited for room forever. The stream still yields what
/// was queued before the removal, then ends.
#[test]
fn a_full_block_stream_can_be_removed_or_shut_down_without_being_polled() {
    let d = Arc::new(Distributor::new());
    let (l, mut stream) = d
        .add_stream("s", OverflowPolicy::Block { capacity: 1 })
        .unwrap();
    d.publish(one_update("a", 1)); // fills it
    let d2 = d.clone();
    let stats = within(10, "remove_listener", move || d2.remove_listener(l.id()));
    assert_eq!(stats.unwrap().published, 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        match stream.next().await {
            Some(Notification::Update { new, .. }) => assert_eq!(rv(&new), 1),
            other => panic!("expected the queued update, got {other:?}"),
        }
        assert!(
            stream.next().await.is_none(),
            "the stream ends after removal"
        );
    });

    let d = Arc::new(Distributor::new());
    let (_l, _unpolled) = d
        .add_stream("s", OverflowPolicy::Block { capacity: 1 })
        .unwrap();
    d.publish(one_update("a", 1));
    // A publisher waiting for room gives up when the distributor shuts down.
    let d2 = d.clone();
    let publisher = std::thread::spawn(move || d2.publish(one_update("a", 2)));
    let d3 = d.clone();
    within(10, "shutdown", move || d3.shutdown());
    within(10, "the waiting publisher", move || {
        publisher.join().unwrap()
    });
}

/// Regression: a dropped stream stayed registered and its lag gauge counted every later
/// publish as pending, forever.
#[test]
fn a_dropped_stream_shows_no_phantom_lag() {
    let d = Distributor::new();
    for policy in [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 4 },
        OverflowPolicy::CoalesceByKey,
    ] {
        let (l, mut stream) = d.add_stream("s", policy).unwrap();
        for batch in updates(0, 30, 30, 10) {
            d.publish(batch);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..5 {
                stream.next().await.unwrap();
            }
        });
        drop(stream);
        for batch in updates(30, 30, 30, 10) {
            d.publish(batch);
        }
        let s = l.stats();
        assert_eq!(s.delivered, 5, "{policy:?}");
        assert_eq!(s.pending, 0, "{policy:?}: {s:?}");
        d.remove_listener(l.id());
    }
}

/// Regression: coalescing update + delete + re-create gave an update whose `old` was the
/// deleted state, not the one the listener held.
#[test]
fn a_coalesced_recreation_updates_from_the_state_the_listener_holds() {
    let d = Distributor::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let (h, entered, gate) = gated(HandlerFns::new().with_update(move |old, new| {
        if new.name() == "k" {
            s.lock().unwrap().push((rv(old), rv(new)));
        }
    }));
    let l = d
        .add_listener("c", OverflowPolicy::CoalesceByKey, h)
        .unwrap();
    d.publish(one_update("gate", 0));
    entered.recv().unwrap();
    // While the listener is blocked: k (which it holds at rv 1) goes to 2, is deleted, and is
    // created again at 3.
    d.publish(Arc::from(vec![
        Notification::Update {
            old: obj("k", 1),
            new: obj("k", 2),
        },
        Notification::Delete {
            obj: DeltaObject::Object(obj("k", 2)),
        },
        Notification::Add {
            obj: obj("k", 3),
            is_in_initial_list: false,
        },
    ]));
    drop(gate);
    d.flush_listener(l.id());
    assert_eq!(*seen.lock().unwrap(), vec![(1, 3)]);
}
