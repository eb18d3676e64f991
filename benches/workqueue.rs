//! WorkQueue throughput: add / get / done with 1, 2 and 8 worker threads, our `WorkQueue`
//! beside a plain client-go-shaped queue (`Mutex<(VecDeque, dirty HashSet, processing
//! HashSet)>` + `Condvar`, same semantics) in the same run.
//!
//! - `distinct`: the producer adds 10 000 distinct `namespace/name` keys while the workers
//!   drain them; one add, one get and one done per key. Time until every worker has seen the
//!   shutdown signal after the last key.
//! - `readd`: the producer adds 100 000 times over 1 000 keys while the workers drain; adds of
//!   queued keys are dropped and adds of keys in flight coalesce, as in an informer's handler.
//!   Throughput is in adds.
//!
//! - `single-thread`: one thread adds 10 000 distinct keys, then gets and dones them all. No
//!   contention: the cost of the structure itself (and, for the baseline, of notifying its
//!   condition variable on every add, which std does with a syscall even when nobody waits).
//!
//! Workers do no work of their own: this is the queue's cost under the most contention.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use informer::workqueue::{QueueMetrics, WorkQueue};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The operations both queues offer the bench.
trait Queue: Sync {
    fn add(&self, key: String);
    /// `None` once shut down and empty.
    fn get(&self) -> Option<String>;
    // `&String`: the queues take `&T`.
    #[allow(clippy::ptr_arg)]
    fn done(&self, key: &String);
    fn shutdown(&self);
}

impl Queue for WorkQueue<String> {
    fn add(&self, key: String) {
        WorkQueue::add(self, key)
    }
    fn get(&self) -> Option<String> {
        WorkQueue::get(self).ok()
    }
    fn done(&self, key: &String) {
        WorkQueue::done(self, key)
    }
    fn shutdown(&self) {
        WorkQueue::shutdown(self)
    }
}

/// The baseline: client-go's `queue.go` structure written plainly in Rust. Same hasher as ours
/// (foldhash), so the difference is the structure, not the hash function.
struct PlainQueue {
    inner: Mutex<Plain>,
    cond: Condvar,
}

type Set = HashSet<String, foldhash::fast::RandomState>;

struct Plain {
    queue: VecDeque<String>,
    dirty: Set,
    processing: Set,
    shutting_down: bool,
}

impl PlainQueue {
    fn new() -> Self {
        PlainQueue {
            inner: Mutex::new(Plain {
                queue: VecDeque::new(),
                dirty: Set::default(),
                processing: Set::default(),
                shutting_down: false,
            }),
            cond: Condvar::new(),
        }
    }
}

impl Queue for PlainQueue {
    fn add(&self, key: String) {
        let mut q = self.inner.lock().unwrap();
        if q.shutting_down || q.dirty.contains(&key) {
            return;
        }
        q.dirty.insert(key.clone());
        if q.processing.contains(&key) {
            return;
        }
        q.queue.push_back(key);
        self.cond.notify_one();
    }

    fn get(&self) -> Option<String> {
        let mut q = self.inner.lock().unwrap();
        while q.queue.is_empty() && !q.shutting_down {
            q = self.cond.wait(q).unwrap();
        }
        let key = q.queue.pop_front()?;
        q.processing.insert(key.clone());
        q.dirty.remove(&key);
        Some(key)
    }

    fn done(&self, key: &String) {
        let mut q = self.inner.lock().unwrap();
        q.processing.remove(key);
        if q.dirty.contains(key) {
            q.queue.push_back(key.clone());
            self.cond.notify_one();
        }
    }

    fn shutdown(&self) {
        self.inner.lock().unwrap().shutting_down = true;
        self.cond.notify_all();
    }
}

/// Workers drain `queue` while this thread adds `keys[order[0]]`, `keys[order[1]]` ...; returns
/// the time from the first add to the last worker leaving.
fn run(queue: &impl Queue, workers: usize, keys: &[String], order: &[u32]) -> Duration {
    thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(key) = queue.get() {
                    queue.done(&key);
                }
            });
        }
        let start = Instant::now();
        for &i in order {
            queue.add(keys[i as usize].clone());
        }
        queue.shutdown();
        // The scope joins the workers before returning `start`.
        start
    })
    .elapsed()
}

fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("namespace-{}/deployment-{i}", i % 50))
        .collect()
}

fn bench(c: &mut Criterion, group: &str, keys: &[String], order: &[u32], with_metrics: bool) {
    let mut g = c.benchmark_group(format!("workqueue/{group}"));
    g.throughput(Throughput::Elements(order.len() as u64));
    for workers in [1, 2, 8] {
        g.bench_with_input(
            BenchmarkId::new("informer WorkQueue", workers),
            &workers,
            |b, &w| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| run(&WorkQueue::<String>::new(), w, keys, order))
                        .sum()
                })
            },
        );
        if with_metrics {
            let (_registry, metrics) = QueueMetrics::new_registry();
            g.bench_with_input(
                BenchmarkId::new("informer WorkQueue + metrics", workers),
                &workers,
                |b, &w| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                let q =
                                    WorkQueue::builder().name("bench").metrics(&metrics).build();
                                run(&q, w, keys, order)
                            })
                            .sum()
                    })
                },
            );
        }
        g.bench_with_input(
            BenchmarkId::new("plain Mutex<VecDeque>+HashSet", workers),
            &workers,
            |b, &w| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| run(&PlainQueue::new(), w, keys, order))
                        .sum()
                })
            },
        );
    }
    g.finish();
}

fn single_thread(c: &mut Criterion) {
    fn run(queue: &impl Queue, keys: &[String]) -> Duration {
        let start = Instant::now();
        for k in keys {
            queue.add(k.clone());
        }
        for _ in keys {
            let k = queue.get().unwrap();
            queue.done(&k);
        }
        start.elapsed()
    }
    let keys = keys(10_000);
    let (_registry, metrics) = QueueMetrics::new_registry();
    let mut g = c.benchmark_group("workqueue/single-thread");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("informer WorkQueue", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run(&WorkQueue::<String>::new(), &keys))
                .sum()
        })
    });
    g.bench_function("informer WorkQueue + metrics", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run(&WorkQueue::builder().metrics(&metrics).build(), &keys))
                .sum()
        })
    });
    g.bench_function("plain Mutex<VecDeque>+HashSet", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(&PlainQueue::new(), &keys)).sum())
    });
    g.finish();
}

fn distinct(c: &mut Criterion) {
    let order: Vec<u32> = (0..10_000).collect();
    bench(c, "distinct", &keys(order.len()), &order, true);
}

fn readd(c: &mut Criterion) {
    // 100 000 adds over 1 000 keys, uniformly at random (fixed seed).
    let mut s = 0x9e37_79b9_7f4a_7c15_u64;
    let order: Vec<u32> = (0..100_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 1_000) as u32
        })
        .collect();
    bench(c, "readd", &keys(1_000), &order, false);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = single_thread, distinct, readd
}
criterion_main!(benches);
