//! Two handlers, one of them blocked, under a flood of updates, for each overflow policy of the
//! blocked one: the other receives everything in order while the blocked one is stuck;
//! unbounded grows then gives its memory back after draining; block stalls the publisher (the
//! informer) and loses nothing; coalesce holds at most one entry per key and ends with every
//! key's final state.
//!
//! Default size 200 000 updates; the 1 000 000 runs with
//! `cargo test --release --test slow_handler -- --ignored`.

use std::alloc::System;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use cap::Cap;
use crossbeam::channel::{Receiver, Sender, bounded};
use hdrhistogram::Histogram;
use informer::distributor::{Distributor, EventHandler, Notification, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectMeta};

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

const BATCH: usize = 256;
const KEYS: u64 = 1_000;

fn obj(gvk: &Arc<GroupVersionKind>, i: u64) -> Arc<Object> {
    let meta = ObjectMeta::from(ObjectMetaFields {
        name: format!("k{}", i % KEYS).into(),
        namespace: "ns".to_owned().into(),
        resource_version: i.to_string().into(),
        ..Default::default()
    });
    Arc::new(Object::from_parts(
        gvk.clone(),
        meta,
        Bytes::new(),
        Encoding::Json,
    ))
}

/// Batch `b` of updates: resourceVersions `b*BATCH ..`, keys `i % KEYS`.
fn batch(gvk: &Arc<GroupVersionKind>, b: u64) -> Arc<[Notification]> {
    (b * BATCH as u64..(b + 1) * BATCH as u64)
        .map(|i| {
            let o = obj(gvk, i);
            Notification::Update {
                old: o.clone(),
                new: o,
            }
        })
        .collect()
}

fn rv(o: &Object) -> u64 {
    o.resource_version().parse().unwrap()
}

/// Counts what it gets, checks order, keeps each key's last resourceVersion, and records the
/// publish-to-handler latency from the publish time of each batch.
#[derive(Clone)]
struct Checker {
    state: Arc<Mutex<CheckState>>,
    published_at: Arc<Vec<AtomicU64>>,
    epoch: Instant,
    gate: Option<(Sender<()>, Receiver<()>)>,
}

struct CheckState {
    count: u64,
    last: Option<u64>,
    out_of_order: u64,
    key_out_of_order: u64,
    per_key: HashMap<String, u64>,
    latency: Histogram<u64>,
}

/// The test's side of a gate: "entered" notices and the sender that opens it when dropped.
type GateHandles = (Receiver<()>, Sender<()>);

impl Checker {
    fn new(
        published_at: Arc<Vec<AtomicU64>>,
        epoch: Instant,
        gated: bool,
    ) -> (Self, Option<GateHandles>) {
        let (gate, handles) = if gated {
            let (entered_tx, entered_rx) = bounded(1);
            let (open_tx, open_rx) = bounded(0);
            (Some((entered_tx, open_rx)), Some((entered_rx, open_tx)))
        } else {
            (None, None)
        };
        let c = Checker {
            state: Arc::new(Mutex::new(CheckState {
                count: 0,
                last: None,
                out_of_order: 0,
                key_out_of_order: 0,
                per_key: HashMap::new(),
                latency: Histogram::new(3).unwrap(),
            })),
            published_at,
            epoch,
            gate,
        };
        (c, handles)
    }
}

impl EventHandler for Checker {
    fn on_add(&mut self, _: &Arc<Object>, _: bool) {}
    fn on_update(&mut self, _: &Arc<Object>, new: &Arc<Object>) {
        if let Some((entered, open)) = self.gate.take() {
            entered.send(()).unwrap();
            let _ = open.recv(); // opened by dropping the sender
        }
        let r = rv(new);
        let now = self.epoch.elapsed().as_nanos() as u64;
        let at = self.published_at[(r / BATCH as u64) as usize].load(Ordering::Acquire);
        let mut s = self.state.lock().unwrap();
        s.count += 1;
        if s.last.is_some_and(|l| r <= l) {
            s.out_of_order += 1;
        }
        s.last = Some(r);
        if let Some(prev) = s.per_key.insert(new.name().to_owned(), r)
            && prev >= r
        {
            s.key_out_of_order += 1;
        }
        let _ = s.latency.record(now.saturating_sub(at).max(1));
    }
    fn on_delete(&mut self, _: &DeltaObject) {}
}

/// The allocation counter is global: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(policy: OverflowPolicy, n: u64) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    assert_eq!(n % BATCH as u64, 0);
    let gvk = Arc::new(GroupVersionKind::new("", "v1", "ConfigMap"));
    let batches = n / BATCH as u64;
    let published_at: Arc<Vec<AtomicU64>> =
        Arc::new((0..batches).map(|_| AtomicU64::new(0)).collect());
    let epoch = Instant::now();
    let d = Arc::new(Distributor::new());
    let (blocked, handles) = Checker::new(published_at.clone(), epoch, true);
    let (entered, open) = handles.unwrap();
    let blocked_state = blocked.state.clone();
    let slow = d.add_listener("blocked", policy, blocked).unwrap();
    let (fast, _) = Checker::new(published_at.clone(), epoch, false);
    let fast_state = fast.state.clone();
    let fast_listener = d
        .add_listener("fast", OverflowPolicy::Unbounded, fast)
        .unwrap();

    let before = ALLOC.allocated();
    // The publisher: the informer's processing thread in real life.
    let returned = Arc::new(AtomicUsize::new(0));
    let mut publisher = Some({
        let (d, gvk, published_at, returned) = (
            d.clone(),
            gvk.clone(),
            published_at.clone(),
            returned.clone(),
        );
        std::thread::spawn(move || {
            for b in 0..batches {
                let batch = batch(&gvk, b);
                published_at[b as usize]
                    .store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
                d.publish(batch); // our reference goes here: the listeners hold the only ones
                returned.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    entered.recv().unwrap(); // the blocked handler is stuck in its first notification

    match policy {
        OverflowPolicy::Block { capacity } => {
            // The publisher stalls once the blocked channel is full: the fast listener gets
            // the batch it is stuck on (offered to every listener first) and no more.
            let stalled_at = (capacity as u64 + 2) * BATCH as u64;
            let wait = Instant::now();
            while fast_listener.stats().delivered < stalled_at {
                assert!(
                    wait.elapsed().as_secs() < 60,
                    "fast listener never got {stalled_at}"
                );
                std::thread::yield_now();
            }
            assert_eq!(
                fast_listener.stats().delivered,
                stalled_at,
                "publisher did not stall"
            );
            assert_eq!(returned.load(Ordering::SeqCst), capacity + 1);
            assert!(slow.stats().pending <= stalled_at);
        }
        _ => {
            publisher.take().unwrap().join().unwrap();
            // Everything reached the fast listener while the other is still stuck.
            assert!(d.flush_listener(fast_listener.id()));
            let s = fast_state.lock().unwrap();
            assert_eq!((s.count, s.out_of_order, s.last), (n, 0, Some(n - 1)));
            drop(s);
            let lag = slow.stats();
            assert_eq!(lag.delivered, 0);
            let grown = ALLOC.allocated().saturating_sub(before);
            if policy == OverflowPolicy::Unbounded {
                assert_eq!(lag.pending, n);
                // Each pending notification holds its own object (name, rv, metadata).
                assert!(
                    grown > n as usize * 100,
                    "backlog of {n} holds only {grown} bytes"
                );
            } else {
                // Coalescing: what the handler took out (at most one per key) plus the queue
                // (at most one entry per key).
                assert!(lag.pending <= 2 * KEYS, "pending {}", lag.pending);
                assert!(
                    grown < 2 * KEYS as usize * 2_000,
                    "coalesced backlog holds {grown} bytes"
                );
            }
        }
    }

    drop(open);
    if let Some(p) = publisher.take() {
        p.join().unwrap();
    }
    d.flush();
    let slow_stats = slow.stats();
    assert_eq!(slow_stats.pending, 0);
    let s = blocked_state.lock().unwrap();
    assert_eq!(s.key_out_of_order, 0, "per key, in order");
    if policy != OverflowPolicy::CoalesceByKey {
        // Coalescing orders keys by their first pending notification, not globally.
        assert_eq!(s.out_of_order, 0);
        assert_eq!(s.last, Some(n - 1));
    }
    // Every key ends in its final state.
    assert_eq!(s.per_key.len() as u64, KEYS);
    for (key, r) in &s.per_key {
        let k: u64 = key[1..].parse().unwrap();
        let last = (n - 1) - ((n - 1 - k) % KEYS);
        assert_eq!(*r, last, "key {key}");
    }
    match policy {
        OverflowPolicy::CoalesceByKey => {
            assert!(s.count < n, "nothing was coalesced");
            assert_eq!(slow_stats.delivered + slow_stats.coalesced, n);
        }
        _ => assert_eq!(s.count, n, "the blocked listener lost notifications"),
    }
    drop(s);
    let f = fast_state.lock().unwrap();
    assert_eq!((f.count, f.out_of_order), (n, 0));
    let fast_p99 = f.latency.value_at_quantile(0.99);
    drop(f);
    // Memory comes back once the backlog is handled (the handlers keep a small per-key map).
    let after = ALLOC.allocated().saturating_sub(before);
    assert!(
        after < 4 * 1024 * 1024,
        "{after} bytes still held after draining"
    );
    // Unpaced flood: the figure is mostly queueing behind the fast handler's own work; the
    // isolation figures with a paced publisher come from benches/distributor.rs.
    println!(
        "{policy:?}: fast listener p99 publish-to-handler {:.1} µs; blocked max_pending {}",
        fast_p99 as f64 / 1e3,
        slow_stats.max_pending
    );
    d.shutdown();
}

const DEFAULT_N: u64 = 200_192; // 782 batches of 256
const FULL_N: u64 = 1_000_192; // 3907 batches of 256

#[test]
fn blocked_unbounded_handler_grows_then_shrinks_and_the_other_gets_everything() {
    run(OverflowPolicy::Unbounded, DEFAULT_N);
}

#[test]
fn blocked_block_handler_stalls_the_publisher_and_loses_nothing() {
    run(OverflowPolicy::Block { capacity: 4 }, DEFAULT_N);
}

#[test]
fn blocked_coalescing_handler_holds_one_entry_per_key_and_ends_in_the_final_state() {
    run(OverflowPolicy::CoalesceByKey, DEFAULT_N);
}

#[test]
#[ignore = "the issue's full size: 1 000 000 updates per policy"]
fn one_million_updates_each_policy() {
    for p in [
        OverflowPolicy::Unbounded,
        OverflowPolicy::Block { capacity: 4 },
        OverflowPolicy::CoalesceByKey,
    ] {
        run(p, FULL_N);
    }
}
