//! Store benchmarks: our store beside its baselines and the other candidate structures, on the
//! same workload in the same run (see `store_baselines/mod.rs` for who is who and
//! `store_baselines/workload.rs` for the objects: the real etcd Pod fixture re-keyed to
//! `STORE_N` objects, 100 000 by default).
//!
//! - `store-read/{get,get-borrow,by-namespace}/{1,2}-reader/{idle,flood}`: read throughput
//!   (`get` clones the object's `Arc`, `get-borrow` reads its resourceVersion through a borrow)
//!   with the writer idle or flooding updates (each store's writer as fast as it goes, in its
//!   natural unit: batches of 256 for the batched stores, one call per object for the others);
//!   each run also prints the readers' reads per second of their own thread CPU, and under the
//!   flood the writer's update rate and its share of a core (three threads on two cores: a
//!   writer its readers starve leaves them more of the machine);
//! - `store-read-paced/{get,get-borrow,by-namespace}/{1,2}-reader`: the same reads while every
//!   store's writer applies the same update rate (`STORE_PACE` updates/s, default 100 000, in
//!   steps of 256): the fair comparison, since under the flat-out flood a writer starved by its
//!   readers leaves them the machine; each writer's achieved rate is printed;
//! - `get-batch`: 64 `get`s under one read section (a held `Snapshot` for ours, one read guard
//!   for the locked maps; dashmap and kube-runtime have none and read key by key), per key;
//! - reader latency p50/p99 (hdrhistogram, printed: criterion gives no percentiles), idle,
//!   under the paced writer (p99) and under the flood, one reader;
//! - `store-write/{0,2,4}-indexes`: batches of 1 000 updates, single-threaded;
//! - `store-write-parts`: what one indexed update of our store is made of;
//! - `store-fill`: ours alone, with the namespace and labels indexes: a `replace` of every
//!   object into an empty store (an informer's list), and every object added then deleted in
//!   batches of 100 (index sets growing and shrinking), per object.
//!
//! Default settings keep the whole run to a few minutes on 2 cores; `STORE_N` sets the store
//! size (default 100 000; 1000000 for the large-store figures, several GB of memory).
//! `STORE_LATENCY=0` skips the latency report. `STORE_ROUNDS=R` runs only point reads in R
//! alternated rounds, every candidate in the same stretches of host speed (`store_rounds`).
//! Memory is measured by `benches/store_memory.rs` (a counting allocator would distort these
//! timings).

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

#[path = "store_baselines/mod.rs"]
#[allow(dead_code, unreachable_pub)]
mod store_baselines;
mod store_rounds;

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use hdrhistogram::Histogram;
use informer::store::{
    LABELS_INDEX, NAMESPACE_INDEX, WriteBatch, labels_index_func, namespace_index_func,
};
use store_baselines::{Candidate, Indexes, ReadSide, Workload, WriteSide};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Objects in every store, unless `STORE_N` says otherwise.
const DEFAULT_N: usize = 100_000;

/// Objects in every store: `STORE_N` (e.g. 1000000) or [`DEFAULT_N`].
fn n() -> usize {
    static V: OnceLock<usize> = OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("STORE_N")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n >= store_baselines::workload::PER_NAMESPACE)
            .unwrap_or(DEFAULT_N)
    })
}
/// Updates per flood step.
const FLOOD_BATCH: usize = 256;
/// Updates per measured write batch.
const WRITE_BATCH: usize = 1000;
/// How long each latency run lasts.
const LATENCY_RUN: Duration = Duration::from_millis(500);

fn workload() -> Arc<Workload> {
    static W: OnceLock<Arc<Workload>> = OnceLock::new();
    W.get_or_init(|| Arc::new(Workload::new(n(), kube_wanted())))
        .clone()
}

/// Whether kube-runtime's store is among the candidates (`STORE_BENCH_ONLY`, see [`wanted`]):
/// only then are the workload's k8s-openapi twins built (gigabytes at 1 000 000 objects).
fn kube_wanted() -> bool {
    wanted(store_baselines::kube::NAME)
}

/// The read candidates: every store with the namespace and labels indexes (kube-runtime has
/// none), built once.
fn read_candidates() -> &'static Mutex<Vec<Candidate>> {
    static C: OnceLock<Mutex<Vec<Candidate>>> = OnceLock::new();
    C.get_or_init(|| {
        Mutex::new(store_baselines::all(
            &workload(),
            Indexes::Two,
            kube_wanted(),
            wanted,
        ))
    })
}

/// A writer that does nothing: stands in while the real one floods on its own thread.
struct Idle;
impl WriteSide for Idle {
    fn write(&mut self, _: &Workload, _: usize, _: usize) {}
}

struct Flood {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Box<dyn WriteSide>, usize, Duration, Duration)>,
}

/// Default target of the paced flood, updates per second (`STORE_PACE` overrides).
const DEFAULT_PACE: f64 = 100_000.0;

/// The paced flood's target rate: `STORE_PACE` (updates/s) or [`DEFAULT_PACE`].
fn pace() -> f64 {
    std::env::var("STORE_PACE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|r| r.is_finite() && *r > 0.0)
        .unwrap_or(DEFAULT_PACE)
}

/// Starts the store's writer on its own thread: flat out (`pace` = `None`), or at most `pace`
/// updates per second, in steps of [`FLOOD_BATCH`] (it sleeps while ahead of the schedule and
/// never catches up a backlog faster than it can write: a writer that falls behind stays
/// behind, and its achieved rate says so).
fn start_flood(c: &mut Candidate, pace: Option<f64>) -> Flood {
    let mut writer = std::mem::replace(&mut c.writer, Box::new(Idle));
    let stop = Arc::new(AtomicBool::new(false));
    let w = workload();
    let flag = stop.clone();
    let handle = thread::spawn(move || {
        let start = Instant::now();
        let cpu = cpu_time::ThreadTime::now();
        let mut pos = 0;
        while !flag.load(Ordering::Relaxed) {
            if let Some(rate) = pace {
                let due = start + Duration::from_secs_f64(pos as f64 / rate);
                let now = Instant::now();
                if due > now {
                    thread::sleep(due - now);
                    continue;
                }
            }
            writer.write(&w, pos, FLOOD_BATCH);
            pos += FLOOD_BATCH;
        }
        (writer, pos, start.elapsed(), cpu.elapsed())
    });
    Flood { stop, handle }
}

/// Stops a flood, gives the writer back, returns the updates per second it managed and the
/// share of a core its thread had over the flood.
fn stop_flood(c: &mut Candidate, f: Flood) -> (f64, f64) {
    f.stop.store(true, Ordering::Relaxed);
    let (writer, n, took, cpu) = f.handle.join().expect("flood thread");
    c.writer = writer;
    let secs = took.as_secs_f64();
    (n as f64 / secs, cpu.as_secs_f64() / secs)
}

/// Keys per `get-batch` operation.
const GET_BATCH: usize = 64;

#[derive(Clone, Copy)]
enum ReadOp {
    Get,
    /// `get` through a borrow: see `ReadSide::peek`.
    GetBorrow,
    /// [`GET_BATCH`] gets under one read section: see `ReadSide::get_batch`.
    GetBatch,
    ByNamespace,
}

impl ReadOp {
    fn name(self) -> &'static str {
        match self {
            ReadOp::Get => "get",
            ReadOp::GetBorrow => "get-borrow",
            ReadOp::GetBatch => "get-batch",
            ReadOp::ByNamespace => "by-namespace",
        }
    }

    /// Keys read per operation (the throughput unit is one key).
    fn keys(self) -> u64 {
        match self {
            ReadOp::GetBatch => GET_BATCH as u64,
            _ => 1,
        }
    }

    fn run(self, r: &dyn ReadSide, rng: &mut fastrand::Rng) {
        match self {
            ReadOp::Get => {
                black_box(r.get(rng.usize(..n())));
            }
            ReadOp::GetBorrow => {
                black_box(r.peek(rng.usize(..n())));
            }
            ReadOp::GetBatch => {
                let mut keys = [0usize; GET_BATCH];
                for k in &mut keys {
                    *k = rng.usize(..n());
                }
                black_box(r.get_batch(&keys));
            }
            ReadOp::ByNamespace => {
                black_box(
                    r.by_namespace(rng.usize(..n() / store_baselines::workload::PER_NAMESPACE)),
                );
            }
        }
    }
}

/// `iters` reads split across `readers` threads; the wall time from a common start until the
/// last reader is done.
fn run_readers(
    r: &Arc<dyn ReadSide>,
    readers: usize,
    iters: u64,
    op: ReadOp,
    cpu: &mut ReaderCpu,
) -> Duration {
    let per = iters.div_ceil(readers as u64).max(1);
    let start = Barrier::new(readers);
    let (wall, spent) = thread::scope(|s| {
        let handles: Vec<_> = (0..readers)
            .map(|t| {
                let start = &start;
                let r = r.clone();
                s.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(0x5eed + t as u64 * 7919 + iters);
                    start.wait();
                    let t0 = Instant::now();
                    let c0 = cpu_time::ThreadTime::now();
                    for _ in 0..per {
                        op.run(&*r, &mut rng);
                    }
                    (t0.elapsed(), c0.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader"))
            .fold((Duration::ZERO, Duration::ZERO), |(w, c), (tw, tc)| {
                (w.max(tw), c + tc)
            })
    });
    cpu.ops += per * readers as u64 * op.keys();
    cpu.spent += spent;
    wall
}

/// Reader thread CPU over a benchmark's runs, for reads per reader core-second: under the
/// flat-out flood three threads share two cores, and wall-clock reads per second then also
/// measure how much of the machine each store's writer leaves its readers.
#[derive(Default)]
struct ReaderCpu {
    ops: u64,
    spent: Duration,
}

impl ReaderCpu {
    /// Millions of reads per second of reader thread CPU.
    fn per_core_second(&self) -> f64 {
        self.ops as f64 / self.spent.as_secs_f64().max(1e-9) / 1e6
    }
}

fn reads(c: &mut Criterion) {
    let mut cands = read_candidates().lock().unwrap();
    for op in [
        ReadOp::Get,
        ReadOp::GetBorrow,
        ReadOp::GetBatch,
        ReadOp::ByNamespace,
    ] {
        for readers in [1, 2] {
            for flood in [false, true] {
                let mut g = c.benchmark_group(format!(
                    "store-read/{}/{readers}-reader/{}",
                    op.name(),
                    if flood { "flood" } else { "idle" }
                ));
                g.sample_size(10)
                    .warm_up_time(Duration::from_millis(300))
                    .measurement_time(Duration::from_millis(1200))
                    .throughput(Throughput::Elements(op.keys()));
                for cand in cands.iter_mut() {
                    let running = flood.then(|| start_flood(cand, None));
                    let reader = cand.reader.clone();
                    let mut cpu = ReaderCpu::default();
                    g.bench_function(cand.name, |b| {
                        b.iter_custom(|iters| run_readers(&reader, readers, iters, op, &mut cpu))
                    });
                    let ran = cpu.ops > 0;
                    if let Some(f) = running {
                        let (rate, share) = stop_flood(cand, f);
                        if !ran {
                            continue;
                        }
                        eprintln!(
                            "    (flood writer of {}: {rate:.0} updates/s on {:.0} % of a core; \
                             readers: {:.2} M reads per core-second {})",
                            cand.name,
                            share * 100.0,
                            cpu.per_core_second(),
                            cand.writer.stats()
                        );
                    } else if ran {
                        eprintln!(
                            "    (readers of {}: {:.2} M reads per core-second)",
                            cand.name,
                            cpu.per_core_second()
                        );
                    }
                }
                g.finish();
            }
        }
    }
}

/// Reads beside a paced flood: every store's writer aims at the same update rate ([`pace`]),
/// so the readers of every store share the machine with the same write work. The achieved
/// write rate is printed per store; a store whose writer falls short of the pace by more than
/// 5 % serves a cache that falls behind the watch (marked STALE).
fn reads_paced(c: &mut Criterion) {
    let rate = pace();
    let mut cands = read_candidates().lock().unwrap();
    for op in [
        ReadOp::Get,
        ReadOp::GetBorrow,
        ReadOp::GetBatch,
        ReadOp::ByNamespace,
    ] {
        for readers in [1, 2] {
            let mut g =
                c.benchmark_group(format!("store-read-paced/{}/{readers}-reader", op.name()));
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_millis(1200))
                .throughput(Throughput::Elements(op.keys()));
            for cand in cands.iter_mut() {
                let f = start_flood(cand, Some(rate));
                let reader = cand.reader.clone();
                let mut cpu = ReaderCpu::default();
                g.bench_function(cand.name, |b| {
                    b.iter_custom(|iters| run_readers(&reader, readers, iters, op, &mut cpu))
                });
                let (got, _) = stop_flood(cand, f);
                if cpu.ops == 0 {
                    continue;
                }
                eprintln!(
                    "    (paced writer of {}: {got:.0} of {rate:.0} updates/s; readers: {:.2} M \
                     reads per core-second{})",
                    cand.name,
                    cpu.per_core_second(),
                    if got < 0.95 * rate {
                        ", STALE: behind the pace"
                    } else {
                        ""
                    }
                );
            }
            g.finish();
        }
    }
}

/// One reader for [`LATENCY_RUN`], each operation timed.
fn latency_run(r: &Arc<dyn ReadSide>, op: ReadOp) -> Histogram<u64> {
    let r = r.clone();
    thread::spawn(move || {
        let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("histogram");
        let mut rng = fastrand::Rng::with_seed(42);
        let end = Instant::now() + LATENCY_RUN;
        loop {
            let t0 = Instant::now();
            op.run(&*r, &mut rng);
            let t1 = Instant::now();
            h.saturating_record((t1 - t0).as_nanos() as u64);
            if t1 >= end {
                break;
            }
        }
        h
    })
    .join()
    .expect("latency reader")
}

fn latency(_: &mut Criterion) {
    if std::env::var("STORE_LATENCY").is_ok_and(|v| v == "0") {
        return;
    }
    let mut cands = read_candidates().lock().unwrap();
    println!(
        "\nReader latency, 1 reader, {} objects, {} ms per run (ns; paced = the writer at STORE_PACE updates/s, flood = as fast as it goes; ratio = flood p99 / idle p99)",
        n(),
        LATENCY_RUN.as_millis()
    );
    println!(
        "{:<13} {:<32} {:>9} {:>9} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "op",
        "store",
        "idle p50",
        "idle p99",
        "paced p99",
        "flood p50",
        "flood p99",
        "p99 ratio",
        "flood upd/s"
    );
    for op in [ReadOp::Get, ReadOp::GetBorrow, ReadOp::ByNamespace] {
        for cand in cands.iter_mut() {
            let idle = latency_run(&cand.reader, op);
            let f = start_flood(cand, Some(pace()));
            let paced = latency_run(&cand.reader, op);
            stop_flood(cand, f);
            let f = start_flood(cand, None);
            let flooded = latency_run(&cand.reader, op);
            let (rate, _) = stop_flood(cand, f);
            let (i99, f99) = (
                idle.value_at_quantile(0.99),
                flooded.value_at_quantile(0.99),
            );
            println!(
                "{:<13} {:<32} {:>9} {:>9} {:>10} {:>10} {:>10} {:>11.2}x {:>14.0}",
                op.name(),
                cand.name,
                idle.value_at_quantile(0.5),
                i99,
                paced.value_at_quantile(0.99),
                flooded.value_at_quantile(0.5),
                f99,
                f99 as f64 / i99.max(1) as f64,
                rate
            );
        }
    }
    println!();
}

/// Whether to build the candidate called `name`: all are, or those whose name contains one of
/// the comma-separated words of `STORE_BENCH_ONLY` (to iterate on one structure without
/// building the others).
fn wanted(name: &str) -> bool {
    match std::env::var("STORE_BENCH_ONLY") {
        Ok(only) => only.split(',').any(|w| name.contains(w.trim())),
        Err(_) => true,
    }
}

/// Times `f` in CPU time of the calling thread: the single-threaded write benches are then not
/// distorted by other work on this shared machine preempting the bench (wall time is what the
/// multi-threaded read benches measure, where waiting is part of the result).
fn cpu_timed(f: impl FnOnce()) -> Duration {
    let t0 = cpu_time::ThreadTime::now();
    f();
    t0.elapsed()
}

fn writes(c: &mut Criterion) {
    let w = workload();
    for indexes in [Indexes::Zero, Indexes::Two, Indexes::Four] {
        let mut cands = store_baselines::all(&w, indexes, false, wanted);
        let mut g = c.benchmark_group(format!("store-write/{}-indexes", indexes.count()));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1500))
            .throughput(Throughput::Elements(WRITE_BATCH as u64));
        for cand in cands.iter_mut() {
            let mut pos = 0;
            g.bench_function(cand.name, |b| {
                b.iter_custom(|iters| {
                    cpu_timed(|| {
                        for _ in 0..iters {
                            cand.writer.write(&w, pos, WRITE_BATCH);
                            pos += WRITE_BATCH;
                        }
                    })
                })
            });
        }
        g.finish();
    }
}

/// What an update of our store is made of: the same 1 000-update batches with fewer parts.
fn write_parts(c: &mut Criterion) {
    let w = workload();
    let mut g = c.benchmark_group("store-write-parts");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
        .throughput(Throughput::Elements(WRITE_BATCH as u64));
    let mut pos = 0;
    g.bench_function(
        "floor: one HashMap insert per update (key allocated)",
        |b| {
            let mut map: std::collections::HashMap<_, _, foldhash::fast::RandomState> =
                w.objects.iter().map(|o| (o.key(), o.clone())).collect();
            b.iter_custom(|iters| {
                cpu_timed(|| {
                    for _ in 0..iters {
                        for p in pos..pos + WRITE_BATCH {
                            let o = w.update(p).1;
                            black_box(map.insert(o.key(), o.clone()));
                        }
                        pos += WRITE_BATCH;
                    }
                })
            })
        },
    );
    g.bench_function("building the Batch", |b| {
        b.iter_custom(|iters| {
            cpu_timed(|| {
                for _ in 0..iters {
                    let mut batch = WriteBatch::with_capacity(WRITE_BATCH);
                    for p in pos..pos + WRITE_BATCH {
                        batch.add(w.update(p).1.clone());
                    }
                    pos += WRITE_BATCH;
                    black_box(batch);
                }
            })
        })
    });
    // The provided functions wrapped in new closures: the store no longer recognises them and
    // calls them on the old and the new object, as it does any caller's function.
    let (ns, labels) = (namespace_index_func(), labels_index_func());
    let opaque = informer::store::StoreConfig::default()
        .without_indexers()
        .indexer(NAMESPACE_INDEX, informer::store::index_func(move |o| ns(o)))
        .indexer(
            LABELS_INDEX,
            informer::store::index_func(move |o| labels(o)),
        );
    let stores = [
        (
            "apply, 0 indexes",
            store_baselines::ours::config(Indexes::Zero),
        ),
        (
            "apply, 2 provided indexes",
            store_baselines::ours::config(Indexes::Two),
        ),
        ("apply, 2 indexes as opaque functions", opaque),
    ];
    for (name, config) in stores {
        let (_r, mut writer) = informer::store::store(config);
        writer.replace(w.objects.iter().cloned(), 1).unwrap();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                cpu_timed(|| {
                    for _ in 0..iters {
                        let mut batch = WriteBatch::with_capacity(WRITE_BATCH);
                        for p in pos..pos + WRITE_BATCH {
                            batch.add(w.update(p).1.clone());
                        }
                        pos += WRITE_BATCH;
                        black_box(writer.apply(batch).unwrap());
                    }
                })
            })
        });
    }
    g.finish();
}

/// Lists and churn: the writes that change index sets (updates above leave them alone).
fn fills(c: &mut Criterion) {
    let w = workload();
    let n = w.objects.len();
    let mut g = c.benchmark_group("store-fill");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(2000))
        .throughput(Throughput::Elements(n as u64));
    let config = || store_baselines::ours::config(Indexes::Two);
    g.bench_function("replace into an empty store, 2 indexes", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let (r, mut writer) = informer::store::store(config());
                spent += cpu_timed(|| writer.replace(w.objects.iter().cloned(), 1).unwrap());
                // Dropping the store is not timed.
                drop((r, writer));
            }
            spent
        })
    });
    g.bench_function("add then delete in batches of 100, 2 indexes", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let (r, mut writer) = informer::store::store(config());
                spent += cpu_timed(|| {
                    for chunk in w.objects.chunks(100) {
                        let mut batch = WriteBatch::with_capacity(chunk.len());
                        for o in chunk {
                            batch.add(o.clone());
                        }
                        black_box(writer.apply(batch).unwrap());
                    }
                    for chunk in w.objects.chunks(100) {
                        let mut batch = WriteBatch::with_capacity(chunk.len());
                        for o in chunk {
                            batch.delete(o.key());
                        }
                        black_box(writer.apply(batch).unwrap());
                    }
                });
                drop((r, writer));
            }
            spent
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    write_parts,
    writes,
    fills,
    reads,
    reads_paced,
    latency
);

fn main() {
    if let Some(rounds) = store_rounds::rounds() {
        let mut cands = read_candidates().lock().unwrap();
        if cands
            .first()
            .is_none_or(|c| c.name != store_baselines::ours::NAME)
        {
            eprintln!("STORE_ROUNDS: ours is not among the candidates (STORE_BENCH_ONLY)");
            return;
        }
        store_rounds::run(&mut cands, rounds);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
