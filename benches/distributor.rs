//! Fan-out of notifications to 1, 8 and 64 listeners, each on its own thread, in the same run:
//!
//! - `ours`: [`informer::distributor::Distributor`], batches of 256 notifications published
//!   once as `Arc<[Notification]>` (one crossbeam message per listener per batch);
//! - `clientgo`: a port of client-go's `sharedProcessor`/`processorListener` design
//!   (`baselines/clientgo_listener.rs`: RWMutex over listeners, per-listener unbuffered add
//!   channel → growing ring buffer → unbuffered next channel, two threads per listener), one
//!   notification at a time;
//! - `crossbeam`: one unbounded `crossbeam_channel` per listener, one send per notification
//!   per listener;
//! - `broadcast`: one `tokio::sync::broadcast` channel (capacity 4096), receivers on threads
//!   with `blocking_recv`; lagging receivers lose notifications (counted and printed).
//!
//! Throughput (criterion): each iteration publishes 4096 notifications and waits until every
//! listener has handled them (or, for broadcast, handled or lost them); the handler counts.
//! `*-stalled` runs add one more listener whose handler blocks for the whole run: the others'
//! throughput should not move.
//!
//! Stall isolation (printed last): the same 8-listener runs with and without a stalled ninth
//! listener, measured in alternating iterations (medians compared).
//!
//! Latency (printed after the criterion groups): 100 bursts of 256 notifications, each burst
//! published then drained, every delivery's publish-to-handler time in an hdrhistogram; p50 and
//! p99 over all listeners.
//!
//! Run: `cargo bench --bench distributor -- --warm-up-time 1 --measurement-time 3`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

#[path = "baselines/clientgo_listener.rs"]
mod clientgo_listener;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clientgo_listener::ClientGoProcessor;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam::channel::{Receiver, Sender, bounded, unbounded};
use crossbeam::utils::CachePadded;
use hdrhistogram::Histogram;
use informer::distributor::{Distributor, HandlerFns, Notification, OverflowPolicy};
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectMeta};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 256;
const EVENTS: usize = 16 * BATCH;
const BROADCAST_CAPACITY: usize = 4096;

/// The notifications of one iteration: updates of 1 000 keys, resourceVersion = index.
struct Events {
    notes: Vec<Notification>,
    batches: Vec<Arc<[Notification]>>,
}

fn events(n: usize) -> Events {
    let gvk = Arc::new(GroupVersionKind::new("", "v1", "ConfigMap"));
    let notes: Vec<Notification> = (0..n)
        .map(|i| {
            let meta = ObjectMeta::from(ObjectMetaFields {
                name: format!("cm-{}", i % 1000).into(),
                namespace: "bench".into(),
                resource_version: i.to_string().into(),
                ..Default::default()
            });
            let o = Arc::new(Object::from_parts(
                gvk.clone(),
                meta,
                Bytes::new(),
                Encoding::Json,
            ));
            Notification::Update {
                old: o.clone(),
                new: o,
            }
        })
        .collect();
    let batches = notes.chunks(BATCH).map(Arc::from).collect();
    Events { notes, batches }
}

fn new_of(n: &Notification) -> &Arc<Object> {
    match n {
        Notification::Update { new, .. } => new,
        _ => unreachable!("only updates here"),
    }
}

/// What the handlers report to the driver.
struct Sink {
    /// Listeners the driver waits for (all but a stalled one).
    waited: usize,
    counts: Vec<CachePadded<AtomicU64>>,
    lost: Vec<CachePadded<AtomicU64>>,
    /// Publish time of each event index, nanoseconds since `epoch` (latency runs only).
    stamps: Vec<AtomicU64>,
    epoch: Instant,
    latency: Option<Vec<Mutex<Histogram<u64>>>>,
}

impl Sink {
    fn new(waited: usize, listeners: usize, events: usize, latency: bool) -> Arc<Self> {
        Arc::new(Sink {
            waited,
            counts: (0..listeners)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            lost: (0..listeners)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            stamps: (0..events).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
            latency: latency.then(|| {
                (0..listeners)
                    .map(|_| Mutex::new(Histogram::new(3).unwrap()))
                    .collect()
            }),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn stamp(&self, i: usize) {
        if self.latency.is_some() {
            self.stamps[i].store(self.now(), Ordering::Release);
        }
    }

    /// One notification handled; `local` is the listener's own running count, published to
    /// the driver every 256 (every iteration's total is a multiple of 256), so the driver's
    /// polling does not bounce a cache line per notification.
    fn handled(&self, listener: usize, new: &Object, local: u64) {
        if let Some(h) = &self.latency {
            let i: usize = new.resource_version().parse().unwrap();
            let at = self.stamps[i].load(Ordering::Acquire);
            let _ = h[listener]
                .lock()
                .unwrap()
                .record(self.now().saturating_sub(at).max(1));
        }
        if local.is_multiple_of(BATCH as u64) {
            self.counts[listener].store(local, Ordering::Release);
        }
    }

    /// Waits until every listener but the stalled one has handled (or lost) `target`
    /// notifications in all.
    fn wait(&self, target: u64) {
        for (c, l) in self.counts.iter().zip(&self.lost).take(self.waited) {
            while c.load(Ordering::Acquire) + l.load(Ordering::Acquire) < target {
                std::thread::yield_now();
            }
        }
    }

    fn lost(&self) -> u64 {
        self.lost.iter().map(|l| l.load(Ordering::Relaxed)).sum()
    }

    fn quantiles(&self) -> (f64, f64) {
        let mut all = Histogram::<u64>::new(3).unwrap();
        for h in self.latency.as_ref().unwrap() {
            all.add(&*h.lock().unwrap()).unwrap();
        }
        (
            all.value_at_quantile(0.5) as f64 / 1e3,
            all.value_at_quantile(0.99) as f64 / 1e3,
        )
    }
}

/// A listener that blocks in its first notification until the gate's sender is dropped.
fn stall_gate() -> (Sender<()>, Receiver<()>) {
    bounded(0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Design {
    Ours,
    ClientGo,
    Crossbeam,
    Broadcast,
}

impl Design {
    fn name(self) -> &'static str {
        match self {
            Design::Ours => "ours",
            Design::ClientGo => "clientgo",
            Design::Crossbeam => "crossbeam",
            Design::Broadcast => "broadcast",
        }
    }
}

enum Fanout {
    Ours(Distributor),
    ClientGo(ClientGoProcessor<Notification>),
    Crossbeam(Vec<Sender<Notification>>, Vec<std::thread::JoinHandle<()>>),
    Broadcast(
        tokio::sync::broadcast::Sender<Notification>,
        Vec<std::thread::JoinHandle<()>>,
    ),
}

struct Setup {
    fanout: Fanout,
    sink: Arc<Sink>,
    /// Dropped at the end to release the stalled listener.
    gate: Option<Sender<()>>,
}

/// One listener's work: count (and time) the notification's new object.
type Handler = Box<dyn FnMut(&Arc<Object>) + Send>;

fn setup(design: Design, listeners: usize, stalled: bool, latency: bool, n: usize) -> Setup {
    let sink = Sink::new(listeners, listeners + usize::from(stalled), n, latency);
    let (gate_tx, gate_rx) = stall_gate();
    let mut handlers: Vec<Handler> = (0..listeners)
        .map(|i| {
            let sink = sink.clone();
            let mut local = 0u64;
            Box::new(move |new: &Arc<Object>| {
                local += 1;
                sink.handled(i, new, local);
            }) as Box<dyn FnMut(&Arc<Object>) + Send>
        })
        .collect();
    if stalled {
        let gate = gate_rx.clone();
        handlers.push(Box::new(move |_: &Arc<Object>| {
            let _ = gate.recv(); // blocks until the sender is dropped, then returns at once
        }));
    }
    let fanout = match design {
        Design::Ours => {
            let d = Distributor::new();
            for (i, mut h) in handlers.into_iter().enumerate() {
                d.add_listener(
                    &format!("l{i}"),
                    OverflowPolicy::Unbounded,
                    HandlerFns::new().with_update(move |_, new| h(new)),
                )
                .unwrap();
            }
            Fanout::Ours(d)
        }
        Design::ClientGo => {
            let p = ClientGoProcessor::new();
            for mut h in handlers {
                p.add_listener(move |n: Notification| h(new_of(&n)));
            }
            Fanout::ClientGo(p)
        }
        Design::Crossbeam => {
            let (mut txs, mut threads) = (Vec::new(), Vec::new());
            for mut h in handlers {
                let (tx, rx) = unbounded::<Notification>();
                txs.push(tx);
                threads.push(std::thread::spawn(move || {
                    while let Ok(n) = rx.recv() {
                        h(new_of(&n));
                    }
                }));
            }
            Fanout::Crossbeam(txs, threads)
        }
        Design::Broadcast => {
            let (tx, _) = tokio::sync::broadcast::channel::<Notification>(BROADCAST_CAPACITY);
            let mut threads = Vec::new();
            for (i, mut h) in handlers.into_iter().enumerate() {
                let mut rx = tx.subscribe();
                let sink = sink.clone();
                threads.push(std::thread::spawn(move || {
                    use tokio::sync::broadcast::error::RecvError;
                    loop {
                        match rx.blocking_recv() {
                            Ok(n) => h(new_of(&n)),
                            Err(RecvError::Lagged(k)) => {
                                if let Some(l) = sink.lost.get(i) {
                                    l.fetch_add(k, Ordering::Release);
                                }
                            }
                            Err(RecvError::Closed) => break,
                        }
                    }
                }));
            }
            Fanout::Broadcast(tx, threads)
        }
    };
    Setup {
        fanout,
        sink,
        gate: Some(gate_tx),
    }
}

impl Setup {
    fn publish(&self, ev: &Events) {
        match &self.fanout {
            Fanout::Ours(d) => {
                for (b, batch) in ev.batches.iter().enumerate() {
                    for i in b * BATCH..(b + 1) * BATCH {
                        self.sink.stamp(i);
                    }
                    d.publish(batch.clone());
                }
            }
            Fanout::ClientGo(p) => {
                for (i, n) in ev.notes.iter().enumerate() {
                    self.sink.stamp(i);
                    p.distribute(n);
                }
            }
            Fanout::Crossbeam(txs, _) => {
                for (i, n) in ev.notes.iter().enumerate() {
                    self.sink.stamp(i);
                    for tx in txs {
                        let _ = tx.send(n.clone());
                    }
                }
            }
            Fanout::Broadcast(tx, _) => {
                for (i, n) in ev.notes.iter().enumerate() {
                    self.sink.stamp(i);
                    let _ = tx.send(n.clone());
                }
            }
        }
    }

    fn stop(mut self) {
        drop(self.gate.take());
        match self.fanout {
            Fanout::Ours(d) => d.shutdown(),
            Fanout::ClientGo(p) => p.stop(),
            Fanout::Crossbeam(txs, threads) => {
                drop(txs);
                join(threads);
            }
            Fanout::Broadcast(tx, threads) => {
                drop(tx);
                join(threads);
            }
        }
    }
}

fn join(threads: Vec<std::thread::JoinHandle<()>>) {
    for t in threads {
        let _ = t.join();
    }
}

const DESIGNS: [Design; 4] = [
    Design::Ours,
    Design::ClientGo,
    Design::Crossbeam,
    Design::Broadcast,
];

fn throughput(c: &mut Criterion) {
    clientgo_listener::self_check();
    let ev = events(EVENTS);
    let mut g = c.benchmark_group("distributor");
    g.sample_size(10);
    let mut lost: Vec<String> = Vec::new();
    for listeners in [1usize, 8, 64] {
        g.throughput(Throughput::Elements((EVENTS * listeners) as u64));
        for design in DESIGNS {
            let runs: &[bool] = if listeners == 8 {
                &[false, true]
            } else {
                &[false]
            };
            for &stalled in runs {
                let s = setup(design, listeners, stalled, false, EVENTS);
                let mut done = 0u64;
                let name = if stalled {
                    format!("{}-stalled", design.name())
                } else {
                    design.name().to_owned()
                };
                g.bench_function(BenchmarkId::new(name.clone(), listeners), |b| {
                    b.iter_custom(|iters| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            s.publish(black_box(&ev));
                            done += EVENTS as u64;
                            s.sink.wait(done);
                        }
                        start.elapsed()
                    });
                });
                let sink = s.sink.clone();
                s.stop();
                if design == Design::Broadcast {
                    // Counted after stop: a stalled receiver learns of its losses when released.
                    lost.push(format!(
                        "{name}/{listeners}: lost {} of {} deliveries",
                        sink.lost(),
                        done * sink.counts.len() as u64
                    ));
                }
            }
        }
    }
    g.finish();
    for l in lost {
        println!("{l}");
    }
}

fn latency(_: &mut Criterion) {
    let ev = events(BATCH);
    println!("\npublish-to-handler latency, 100 bursts of {BATCH} notifications, each drained:");
    for listeners in [1usize, 8, 64] {
        for design in DESIGNS {
            let s = setup(design, listeners, false, true, BATCH);
            let started = Instant::now();
            for round in 1..=100u64 {
                s.publish(&ev);
                s.sink.wait(round * BATCH as u64);
            }
            let took = started.elapsed();
            let (p50, p99) = s.sink.quantiles();
            let lost = s.sink.lost();
            println!(
                "  {:<9} {listeners:>2} listeners: p50 {p50:>9.1} µs  p99 {p99:>9.1} µs  ({:.0} ms{})",
                design.name(),
                took.as_secs_f64() * 1e3,
                if lost > 0 {
                    format!(", {lost} lost")
                } else {
                    String::new()
                }
            );
            s.stop();
        }
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The stall target measured as a paired A/B: the same design with 8 listeners, with and
/// without a ninth stalled one, both set up at once and measured in alternating iterations, so
/// that load from other processes on the machine hits both sides alike.
fn stall_isolation(_: &mut Criterion) {
    let ev = events(EVENTS);
    println!(
        "\nstall isolation, 8 listeners, paired alternating iterations of {EVENTS} notifications:"
    );
    for (design, rounds) in [
        (Design::Ours, 300u64),
        (Design::Crossbeam, 100),
        (Design::Broadcast, 100),
        (Design::ClientGo, 4),
    ] {
        let plain = setup(design, 8, false, false, EVENTS);
        let stalled = setup(design, 8, true, false, EVENTS);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 1..=rounds {
            let one = |s: &Setup, out: &mut Vec<Duration>| {
                let start = Instant::now();
                s.publish(&ev);
                s.sink.wait(r * EVENTS as u64);
                out.push(start.elapsed());
            };
            if r % 2 == 0 {
                one(&plain, &mut a);
                one(&stalled, &mut b);
            } else {
                one(&stalled, &mut b);
                one(&plain, &mut a);
            }
        }
        let (ma, mb) = (median(&mut a), median(&mut b));
        let per = |d: Duration| d.as_nanos() as f64 / (EVENTS * 8) as f64;
        println!(
            "  {:<9} no stall {:>8.1} ns/notification/listener, with a stalled listener {:>8.1}: others' throughput {:+.1} %",
            design.name(),
            per(ma),
            per(mb),
            (ma.as_secs_f64() / mb.as_secs_f64() - 1.0) * 100.0
        );
        let sink = stalled.sink.clone();
        plain.stop();
        stalled.stop();
        if design == Design::Broadcast {
            println!(
                "            (broadcast: {} notifications lost by the stalled receiver)",
                sink.lost()
            );
        }
    }
}

criterion_group!(benches, throughput, latency, stall_isolation);
criterion_main!(benches);
