//! `STORE_ROUNDS=R`: point-read throughput measured in alternated rounds instead of criterion's
//! back-to-back runs. In each round every candidate in turn reads for [`WINDOW`] (after
//! [`WARM`]), idle, beside the paced writer and beside the flat-out one; the report gives per
//! cell each candidate's median reads/s and the median over rounds of ours ÷ it.
//!
//! Why: on a shared 2-vCPU VM the host's speed moves by up to 2× over tens of seconds, and
//! criterion measures each candidate for seconds in one stretch, so a slow stretch that falls on
//! one candidate decides the ratio. Alternating short windows puts every candidate in the same
//! stretches; the median of per-round ratios then follows the stores, not the host.
//! `STORE_ROUNDS_OPS` picks the reads (`get`, `get-borrow`, `get-batch`, `by-namespace`;
//! comma-separated, default `get`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use super::{Candidate, ReadOp, ReadSide, pace, start_flood, stop_flood};

/// How long each candidate reads before the measured window, per round and cell.
const WARM: Duration = Duration::from_millis(150);
/// The measured window.
const WINDOW: Duration = Duration::from_millis(500);

/// The writer beside the readers.
#[derive(Clone, Copy, PartialEq)]
enum Writer {
    Idle,
    Paced,
    Flood,
}

impl Writer {
    fn name(self) -> String {
        match self {
            Writer::Idle => "idle".into(),
            Writer::Paced => format!("paced {:.0} k/s", pace() / 1000.0),
            Writer::Flood => "flood".into(),
        }
    }
}

/// The rounds asked for (`STORE_ROUNDS`), if any.
pub(super) fn rounds() -> Option<usize> {
    std::env::var("STORE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&r| r > 0)
}

fn ops() -> Vec<ReadOp> {
    let names = std::env::var("STORE_ROUNDS_OPS").unwrap_or_else(|_| "get".into());
    names
        .split(',')
        .filter_map(|n| match n.trim() {
            "get" => Some(ReadOp::Get),
            "get-borrow" => Some(ReadOp::GetBorrow),
            "get-batch" => Some(ReadOp::GetBatch),
            "by-namespace" => Some(ReadOp::ByNamespace),
            other => {
                eprintln!("STORE_ROUNDS_OPS: unknown read {other:?}, skipped");
                None
            }
        })
        .collect()
}

/// Keys read per second by `readers` threads over [`WINDOW`], after [`WARM`], and per second
/// of the readers' own thread CPU.
fn window(r: &Arc<dyn ReadSide>, readers: usize, op: ReadOp) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let counting = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let cpu_ns = AtomicU64::new(0);
    let start = Barrier::new(readers + 1);
    let took = thread::scope(|s| {
        for t in 0..readers {
            let (stop, counting, total, cpu_ns, start) =
                (&stop, &counting, &total, &cpu_ns, &start);
            let r = r.clone();
            s.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(0x5eed + t as u64 * 7919);
                let mut n = 0u64;
                let mut cpu = None;
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        op.run(&*r, &mut rng);
                    }
                    if cpu.is_none() && counting.load(Ordering::Relaxed) {
                        cpu = Some(cpu_time::ThreadTime::now());
                    } else if cpu.is_some() {
                        n += 64;
                    }
                }
                total.fetch_add(n * op.keys(), Ordering::Relaxed);
                let spent = cpu.map_or(Duration::ZERO, |c| c.elapsed());
                cpu_ns.fetch_add(spent.as_nanos() as u64, Ordering::Relaxed);
            });
        }
        start.wait();
        thread::sleep(WARM);
        counting.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        thread::sleep(WINDOW);
        stop.store(true, Ordering::Relaxed);
        t0.elapsed()
    });
    let keys = total.load(Ordering::Relaxed) as f64;
    let cpu = cpu_ns.load(Ordering::Relaxed).max(1) as f64 / 1e9;
    (keys / took.as_secs_f64(), keys / cpu)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One candidate's figures in one cell, a value per round.
#[derive(Clone, Default)]
struct Figures {
    /// Keys read per second.
    reads: Vec<f64>,
    /// Keys read per second of reader thread CPU.
    per_cpu: Vec<f64>,
    /// The writer's achieved updates per second, and its share of a core.
    writer: Vec<(f64, f64)>,
}

/// `values` as `median [min–max]`, scaled by `unit`.
fn spread(values: &[f64], unit: f64) -> String {
    let mut v = values.to_vec();
    let m = median(&mut v);
    format!(
        "{:.2} [{:.2}–{:.2}]",
        m / unit,
        v[0] / unit,
        v[v.len() - 1] / unit
    )
}

/// Per-round `ours / theirs`.
fn ratios(ours: &[f64], theirs: &[f64]) -> Vec<f64> {
    ours.iter()
        .zip(theirs)
        .map(|(o, t)| o / t.max(1e-9))
        .collect()
}

/// Runs the rounds and prints the report; the first candidate is ours.
pub(super) fn run(cands: &mut [Candidate], rounds: usize) {
    let cells: Vec<(ReadOp, usize, Writer)> = ops()
        .into_iter()
        .flat_map(|op| {
            [1, 2].into_iter().flat_map(move |readers| {
                [Writer::Idle, Writer::Paced, Writer::Flood]
                    .into_iter()
                    .map(move |w| (op, readers, w))
            })
        })
        .collect();
    // [cell][candidate]
    let mut got = vec![vec![Figures::default(); cands.len()]; cells.len()];
    for round in 0..rounds {
        eprintln!("store rounds: round {} of {rounds}", round + 1);
        for (ci, &(op, readers, w)) in cells.iter().enumerate() {
            for (k, cand) in cands.iter_mut().enumerate() {
                let flood = match w {
                    Writer::Idle => None,
                    Writer::Paced => Some(start_flood(cand, Some(pace()))),
                    Writer::Flood => Some(start_flood(cand, None)),
                };
                let reader = cand.reader.clone();
                let (reads, per_cpu) = window(&reader, readers, op);
                let f = &mut got[ci][k];
                f.reads.push(reads);
                f.per_cpu.push(per_cpu);
                if let Some(flood) = flood {
                    f.writer.push(stop_flood(cand, flood));
                }
            }
        }
    }
    println!(
        "\nPoint reads in {rounds} alternated rounds ({} ms per candidate per round), {} \
         objects. Per candidate: M reads/s, median [range]; ours ÷ it, median of per-round \
         ratios [range], of reads/s and of reads per reader CPU-second; the writer's mean \
         updates/s and share of a core.",
        WINDOW.as_millis(),
        super::n()
    );
    for (ci, &(op, readers, w)) in cells.iter().enumerate() {
        println!("{} {readers} reader(s), writer {}:", op.name(), w.name());
        let ours = got[ci][0].clone();
        for (k, cand) in cands.iter().enumerate() {
            let f = &got[ci][k];
            let mut line = format!("    {:<30} {}", cand.name, spread(&f.reads, 1e6));
            if k > 0 {
                line += &format!(
                    "; ours ÷ it {}×, per CPU-second {}×",
                    spread(&ratios(&ours.reads, &f.reads), 1.0),
                    spread(&ratios(&ours.per_cpu, &f.per_cpu), 1.0)
                );
            }
            if !f.writer.is_empty() {
                let n = f.writer.len() as f64;
                let rate = f.writer.iter().map(|w| w.0).sum::<f64>() / n;
                let share = f.writer.iter().map(|w| w.1).sum::<f64>() / n;
                line += &format!(
                    "; writer {:.0} k/s on {:.0} % of a core",
                    rate / 1e3,
                    share * 100.0
                );
            }
            println!("{line}");
        }
    }
}
