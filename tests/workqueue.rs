//! WorkQueue: dedup and exclusive processing under concurrent workers (sync, async, mixed),
//! delays on a fake clock, rate limiters, shutdown and drain, metrics in the OpenMetrics text,
//! and random operation sequences against a plain reference model. No sleeps: fake clocks,
//! joins and channels.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use informer::workqueue::{
    BucketRateLimiter, Clock, FakeClock, ItemExponentialRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, QueueMetrics, RateLimiter, RateLimiterError, ShutDown, WorkQueue,
    default_controller_rate_limiter,
};
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

fn fake_queue<T: std::hash::Hash + Eq + Clone + Send + 'static>() -> (WorkQueue<T>, FakeClock) {
    let clock = FakeClock::new();
    (WorkQueue::builder().clock(clock.clone()).build(), clock)
}

// ---------------------------------------------------------------------------------------------
// Concurrency: 100 000 adds over 1 000 keys while workers process.

const KEYS: usize = 1_000;
/// Only a deadlocked queue gets near this; a correct run takes well under a second.
const WATCHDOG: Duration = Duration::from_secs(120);
const ADDS: usize = 100_000;

/// What the workers observed, shared with the producer.
struct Board {
    /// Per key: a worker holds it now.
    busy: Vec<AtomicBool>,
    /// Per key: bumped by the producer before each add (the object's "resourceVersion").
    version: Vec<AtomicU64>,
    /// Per key: the highest version a worker read after getting the key.
    seen: Vec<AtomicU64>,
    processed: AtomicUsize,
    overlaps: AtomicUsize,
}

impl Board {
    fn new() -> Arc<Self> {
        Arc::new(Board {
            busy: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
            version: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            processed: AtomicUsize::new(0),
            overlaps: AtomicUsize::new(0),
        })
    }

    /// One reconcile of `key`: claim, read the version, do a little work, release.
    fn process(&self, key: usize) {
        if self.busy[key].swap(true, Ordering::AcqRel) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        let v = self.version[key].load(Ordering::Acquire);
        self.seen[key].fetch_max(v, Ordering::AcqRel);
        for _ in 0..(key % 7) * 20 {
            std::hint::spin_loop();
        }
        if key.is_multiple_of(97) {
            thread::yield_now();
        }
        self.processed.fetch_add(1, Ordering::Relaxed);
        self.busy[key].store(false, Ordering::Release);
    }

    fn produce(&self, queue: &WorkQueue<usize>) {
        let mut rng = fastrand_like(0x5eed);
        for i in 0..ADDS {
            // Every key at least once, then random keys (some hot).
            let key = if i < KEYS {
                i
            } else if i.is_multiple_of(3) {
                (rng() % 10) as usize
            } else {
                (rng() % KEYS as u64) as usize
            };
            self.version[key].fetch_add(1, Ordering::AcqRel);
            queue.add(key);
            if i.is_multiple_of(1024) {
                thread::yield_now();
            }
        }
    }

    /// `shutdown_with_drain`, failing (instead of hanging) if a broken queue never drains.
    fn drain(&self, queue: &WorkQueue<usize>) {
        let (tx, rx) = mpsc::channel();
        let q = queue.clone();
        thread::spawn(move || {
            q.shutdown_with_drain();
            let _ = tx.send(());
        });
        if rx.recv_timeout(WATCHDOG).is_err() {
            panic!(
                "drain hung: {:?}, {} overlaps",
                queue.stats(),
                self.overlaps.load(Ordering::Relaxed)
            );
        }
    }

    fn check(&self, queue: &WorkQueue<usize>) {
        assert_eq!(
            self.overlaps.load(Ordering::Relaxed),
            0,
            "a key ran twice at once"
        );
        for key in 0..KEYS {
            let v = self.version[key].load(Ordering::Acquire);
            let s = self.seen[key].load(Ordering::Acquire);
            assert!(v >= 1, "key {key} never added");
            assert_eq!(s, v, "key {key}: last add (version {v}) never processed");
        }
        let processed = self.processed.load(Ordering::Relaxed);
        assert!(
            (KEYS..=ADDS).contains(&processed),
            "processed {processed} times"
        );
        let stats = queue.stats();
        assert_eq!(
            (stats.len, stats.depth, stats.in_flight, stats.delayed),
            (0, 0, 0, 0)
        );
        assert!(stats.adds as usize >= processed, "{stats:?} vs {processed}");
    }
}

/// A small xorshift: deterministic key choice without another dev-dependency.
fn fastrand_like(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

fn sync_worker(queue: WorkQueue<usize>, board: Arc<Board>) -> thread::JoinHandle<ShutDown> {
    thread::spawn(move || {
        loop {
            match queue.get() {
                Ok(key) => {
                    board.process(key);
                    queue.done(&key);
                }
                Err(e) => return e,
            }
        }
    })
}

#[test]
fn eight_workers_never_share_a_key_and_process_every_last_add() {
    let queue = WorkQueue::builder().name("stress").build();
    let board = Board::new();
    let workers: Vec<_> = (0..8)
        .map(|_| sync_worker(queue.clone(), board.clone()))
        .collect();
    board.produce(&queue);
    board.drain(&queue);
    for w in workers {
        assert_eq!(w.join().unwrap(), ShutDown);
    }
    board.check(&queue);
}

#[test]
fn async_and_blocking_workers_share_one_queue() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let queue = WorkQueue::builder().name("mixed").build();
    let board = Board::new();
    let threads: Vec<_> = (0..4)
        .map(|_| sync_worker(queue.clone(), board.clone()))
        .collect();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (queue, board) = (queue.clone(), board.clone());
            rt.spawn(async move {
                loop {
                    match queue.get_async().await {
                        Ok(key) => {
                            board.process(key);
                            queue.done(&key);
                        }
                        Err(e) => return e,
                    }
                }
            })
        })
        .collect();
    board.produce(&queue);
    rt.block_on(async { tokio::time::timeout(WATCHDOG, queue.shutdown_with_drain_async()).await })
        .unwrap_or_else(|_| panic!("drain hung: {:?}", queue.stats()));
    for t in threads {
        assert_eq!(t.join().unwrap(), ShutDown);
    }
    for t in tasks {
        assert_eq!(rt.block_on(t).unwrap(), ShutDown);
    }
    board.check(&queue);
}

// ---------------------------------------------------------------------------------------------
// Dedup and coalescing, single-threaded.

#[test]
fn adds_of_a_queued_item_are_dropped_and_adds_in_flight_coalesce() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.get(), Ok("a"));
    queue.add("a");
    queue.add("a");
    queue.add("a");
    // In flight: not queued again until done.
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.stats().depth, 2);
    assert_eq!(queue.get(), Ok("b"));
    queue.done(&"a");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Ok("a"));
    queue.done(&"a");
    queue.done(&"b");
    assert_eq!(queue.len(), 0);
    let s = queue.stats();
    assert_eq!((s.depth, s.in_flight, s.adds), (0, 0, 3));
}

#[test]
fn done_of_an_item_not_in_flight_is_ignored() {
    let queue = WorkQueue::new();
    queue.done(&1);
    queue.add(1);
    queue.done(&1);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Ok(1));
    queue.done(&1);
    queue.done(&1);
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.stats().in_flight, 0);
}

// ---------------------------------------------------------------------------------------------
// Delays.

#[test]
fn add_after_5h_then_3s_is_delivered_once_at_3s() {
    let (queue, clock) = fake_queue();
    queue.add_after("x", Duration::from_secs(5 * 3600));
    queue.add_after("x", Duration::from_secs(3));
    assert_eq!(queue.stats().delayed, 1);
    clock.advance(Duration::from_secs(3) - MS);
    assert_eq!(queue.len(), 0);
    clock.advance(MS);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Ok("x"));
    queue.done(&"x");
    clock.advance(Duration::from_secs(6 * 3600));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.stats().delayed, 0);
}

#[test]
fn a_waiting_item_never_moves_later() {
    let (queue, clock) = fake_queue();
    queue.add_after("x", Duration::from_secs(3));
    queue.add_after("x", Duration::from_secs(5 * 3600));
    clock.advance(Duration::from_secs(3));
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Ok("x"));
    queue.done(&"x");
    clock.advance(Duration::from_secs(6 * 3600));
    assert_eq!(queue.len(), 0);
}

#[test]
fn zero_delay_adds_now_and_due_items_keep_their_instant_order() {
    let (queue, clock) = fake_queue();
    queue.add_after("now", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    queue.add_after("late", Duration::from_secs(2));
    queue.add_after("early", Duration::from_secs(1));
    clock.advance(Duration::from_secs(5));
    queue.add("direct");
    let order: Vec<_> = (0..4).map(|_| queue.get().unwrap()).collect();
    assert_eq!(order, ["now", "early", "late", "direct"]);
    assert_eq!(queue.stats().retries, 3);
}

#[test]
fn a_blocked_get_wakes_when_the_fake_clock_passes_the_delay() {
    let (queue, clock) = fake_queue();
    queue.add_after(7, Duration::from_secs(10));
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    clock.advance(Duration::from_secs(10));
    assert_eq!(getter.join().unwrap(), Ok(7));
}

#[test]
fn real_clock_delays_are_timed_by_idle_workers() {
    // Four idle workers, 40 items with distinct delays: whoever holds the timer hands it over
    // when it leaves; every item arrives, none before its delay.
    let queue: WorkQueue<u64> = WorkQueue::new();
    let (tx, rx) = mpsc::channel();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, tx) = (queue.clone(), tx.clone());
            thread::spawn(move || {
                while let Ok(i) = queue.get() {
                    tx.send((i, Instant::now())).unwrap();
                    queue.done(&i);
                }
            })
        })
        .collect();
    let start = Instant::now();
    for i in (1..=40u64).rev() {
        queue.add_after(i, MS * i as u32);
    }
    let mut got: Vec<(u64, Instant)> = (0..40).map(|_| rx.recv().unwrap()).collect();
    got.sort();
    for (i, at) in &got {
        assert!(at.duration_since(start) >= MS * *i as u32, "item {i} early");
    }
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        (1..=40).collect::<Vec<_>>()
    );
    queue.shutdown();
    for w in workers {
        w.join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clock_delay_with_async_getters() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("later", 20 * MS);
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get_async().await })
        })
        .collect();
    let mut results = Vec::new();
    queue.add_after("sooner", 5 * MS);
    queue.add("now");
    for g in getters {
        results.push(g.await.unwrap().unwrap());
    }
    results.sort();
    assert_eq!(results, ["later", "now", "sooner"]);
    assert!(start.elapsed() >= 20 * MS);
}

#[tokio::test]
async fn async_get_on_a_fake_clock_and_cancellation_loses_nothing() {
    let (queue, clock) = fake_queue();
    // A get that is polled once and dropped takes nothing.
    tokio::select! {
        biased;
        r = queue.get_async() => panic!("empty queue returned {r:?}"),
        () = std::future::ready(()) => {}
    }
    queue.add_after("x", Duration::from_secs(1));
    let task = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.get_async().await })
    };
    tokio::task::yield_now().await;
    clock.advance(Duration::from_secs(1));
    assert_eq!(task.await.unwrap(), Ok("x"));
    queue.shutdown();
    assert_eq!(queue.get_async().await, Err(ShutDown));
}

// ---------------------------------------------------------------------------------------------
// Rate limiters.

#[test]
fn exponential_limiter_doubles_caps_and_forgets() {
    let l = ItemExponentialRateLimiter::new(5 * MS, Duration::from_secs(1));
    let delays: Vec<_> = (0..10).map(|_| l.when(&"a")).collect();
    let ms = |v: &[u64]| v.iter().map(|m| MS * *m as u32).collect::<Vec<_>>();
    assert_eq!(delays, ms(&[5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]));
    assert_eq!(l.num_requeues(&"a"), 10);
    // Items are independent.
    assert_eq!(l.when(&"b"), 5 * MS);
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    assert_eq!(l.when(&"a"), 5 * MS);
    assert_eq!(l.when(&"a"), 10 * MS);
}

#[test]
fn exponential_limiter_never_overflows() {
    let l = ItemExponentialRateLimiter::<u8>::new(5 * MS, Duration::from_secs(1000));
    assert_eq!(l.delay_for(0), 5 * MS);
    assert_eq!(
        l.delay_for(17),
        Duration::from_secs(655) + Duration::from_millis(360)
    );
    assert_eq!(l.delay_for(18), Duration::from_secs(1000));
    for n in [31, 32, 63, 64, 1 << 40, u64::MAX] {
        assert_eq!(l.delay_for(n), Duration::from_secs(1000), "n = {n}");
    }
    let huge = ItemExponentialRateLimiter::<u8>::new(Duration::MAX, Duration::MAX);
    assert_eq!(huge.delay_for(1), Duration::MAX);
    let zero = ItemExponentialRateLimiter::<u8>::new(Duration::ZERO, Duration::from_secs(1));
    assert_eq!(zero.delay_for(u64::MAX), Duration::ZERO);
    // A small base doubles exactly past 2^32 while under the cap (client-go computes
    // base * 2^n in float and caps only what is above `max`).
    let ns = ItemExponentialRateLimiter::<u8>::new(Duration::from_nanos(1), Duration::MAX);
    assert_eq!(ns.delay_for(32), Duration::from_nanos(1 << 32));
    assert_eq!(ns.delay_for(63), Duration::from_nanos(1 << 63));
    assert_eq!(ns.delay_for(90), Duration::from_nanos(1 << 63) * (1 << 27));
    assert_eq!(ns.delay_for(200), Duration::MAX);
    // 10 000 failures in a row: still the cap.
    for _ in 0..10_000 {
        l.when(&1);
    }
    assert_eq!(l.when(&1), Duration::from_secs(1000));
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) <= Duration::from_micros(1)
}

#[test]
fn bucket_limiter_allows_a_burst_of_100_then_holds_10_per_second() {
    let clock = FakeClock::new();
    let l = BucketRateLimiter::new(10.0, 100, clock.clone()).unwrap();
    let r = |l: &BucketRateLimiter| RateLimiter::<()>::when(l, &());
    for _ in 0..100 {
        assert_eq!(r(&l), Duration::ZERO);
    }
    // Asking twice as fast as the rate: each retry is released 100 ms after the previous one.
    let start = clock.now();
    let mut released = Vec::new();
    for i in 1..=200u32 {
        clock.advance(50 * MS);
        let at = clock.now() + r(&l);
        released.push(at);
        assert!(
            close(at - start, 100 * MS * i),
            "retry {i} released at {:?}",
            at - start
        );
    }
    // 10 per second over the 20 s the retries span.
    let per_second = released.windows(11).map(|w| w[10] - w[0]);
    assert!(
        per_second
            .into_iter()
            .all(|d| close(d, Duration::from_secs(1)))
    );
    // Idle long enough, the bucket refills to its burst (never beyond).
    clock.advance(Duration::from_secs(3600));
    for _ in 0..100 {
        assert_eq!(r(&l), Duration::ZERO);
    }
    assert!(close(r(&l), 100 * MS));
    assert_eq!(RateLimiter::<()>::num_requeues(&l, &()), 0);
}

#[test]
fn bucket_limiter_rejects_bad_parameters() {
    let c = FakeClock::new();
    for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            BucketRateLimiter::new(qps, 1, c.clone()),
            Err(RateLimiterError::InvalidQps(_))
        ));
    }
    assert_eq!(
        BucketRateLimiter::new(1.0, 0, c).unwrap_err(),
        RateLimiterError::ZeroBurst
    );
}

#[test]
fn fast_slow_limiter() {
    let l = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    let d: Vec<_> = (0..5).map(|_| l.when(&"a")).collect();
    assert_eq!(
        d,
        [
            5 * MS,
            5 * MS,
            5 * MS,
            Duration::from_secs(10),
            Duration::from_secs(10)
        ]
    );
    assert_eq!(l.num_requeues(&"a"), 5);
    l.forget(&"a");
    assert_eq!(l.when(&"a"), 5 * MS);
}

#[test]
fn max_of_and_the_default_controller_limiter() {
    let clock = FakeClock::new();
    let l = default_controller_rate_limiter::<u32>(clock.clone());
    // 100 distinct items within the burst: the per-item backoff (5 ms) wins.
    for i in 0..100 {
        assert_eq!(l.when(&i), 5 * MS);
    }
    // The bucket is empty now: 100 ms, 200 ms ... beat 5 ms.
    assert!(close(l.when(&1000), 100 * MS));
    assert!(close(l.when(&1001), 200 * MS));
    // Refilled, one item failing over and over: the exponential wins once past the bucket.
    clock.advance(Duration::from_secs(3600));
    let d: Vec<_> = (0..12).map(|_| l.when(&7)).collect();
    assert_eq!(d[11], 5 * MS * 4096);
    assert_eq!(l.num_requeues(&7), 13);
    l.forget(&7);
    assert_eq!(l.num_requeues(&7), 0);
    assert_eq!(l.when(&7), 5 * MS);

    let empty = MaxOfRateLimiter::<u32>::new(Vec::new());
    assert_eq!(empty.when(&1), Duration::ZERO);
}

#[test]
fn add_rate_limited_delays_by_the_limiter_and_forget_resets() {
    let clock = FakeClock::new();
    let queue = WorkQueue::builder()
        .clock(clock.clone())
        .rate_limiter(ItemExponentialRateLimiter::new(
            5 * MS,
            Duration::from_secs(1000),
        ))
        .build();
    queue.add_rate_limited("k");
    assert_eq!(queue.num_requeues(&"k"), 1);
    clock.advance(4 * MS);
    assert_eq!(queue.len(), 0);
    clock.advance(MS);
    assert_eq!(queue.get(), Ok("k"));
    // Fails again: waits 10 ms.
    queue.add_rate_limited("k");
    queue.done(&"k");
    clock.advance(9 * MS);
    assert_eq!(queue.len(), 0);
    clock.advance(MS);
    assert_eq!(queue.get(), Ok("k"));
    queue.forget(&"k");
    queue.done(&"k");
    assert_eq!(queue.num_requeues(&"k"), 0);
    queue.add_rate_limited("k");
    clock.advance(5 * MS);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.stats().retries, 3);
}

// ---------------------------------------------------------------------------------------------
// Shutdown.

#[test]
fn shutdown_with_drain_waits_for_in_flight_and_queued_items_are_still_handed_out() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    assert_eq!(queue.get(), Ok("a"));
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || {
            queue.shutdown_with_drain();
            tx.send(()).unwrap();
        })
    };
    while !queue.is_shutting_down() {
        thread::yield_now();
    }
    // Adds after shutdown are ignored; "b", queued before, is still handed out.
    queue.add("c");
    queue.add_after("d", Duration::ZERO);
    assert_eq!(queue.get(), Ok("b"));
    assert_eq!(queue.len(), 0);
    queue.done(&"a");
    assert!(
        rx.try_recv().is_err(),
        "drain returned with \"b\" in flight"
    );
    queue.done(&"b");
    rx.recv().unwrap();
    drainer.join().unwrap();
    assert_eq!(queue.get(), Err(ShutDown));
    assert_eq!(queue.stats().adds, 2);
}

#[test]
fn an_item_added_while_in_flight_before_a_drain_is_handed_out_after() {
    let queue = WorkQueue::new();
    queue.add(1);
    assert_eq!(queue.get(), Ok(1));
    queue.add(1);
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || queue.shutdown_with_drain())
    };
    while !queue.is_shutting_down() {
        thread::yield_now();
    }
    queue.done(&1);
    drainer.join().unwrap();
    assert_eq!(queue.get(), Ok(1));
    queue.done(&1);
    assert_eq!(queue.get(), Err(ShutDown));
}

#[test]
fn a_plain_shutdown_hands_out_nothing_more() {
    let queue = WorkQueue::new();
    queue.add(1);
    queue.add(2);
    assert_eq!(queue.get(), Ok(1));
    queue.add(1);
    queue.shutdown();
    assert_eq!(queue.get(), Err(ShutDown));
    queue.done(&1);
    assert_eq!(queue.get(), Err(ShutDown));
}

#[test]
fn get_after_shutdown_with_nothing_queued_returns_the_signal_and_wakes_blocked_getters() {
    let queue: WorkQueue<u8> = WorkQueue::new();
    let blocked: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || queue.get())
        })
        .collect();
    queue.shutdown();
    for b in blocked {
        assert_eq!(b.join().unwrap(), Err(ShutDown));
    }
    assert_eq!(queue.get(), Err(ShutDown));
    assert!(queue.is_shutting_down());
}

#[test]
fn shutdown_drops_delayed_items_and_ends_a_drain_wait() {
    let (queue, clock) = fake_queue();
    queue.add_after("later", Duration::from_secs(1));
    queue.add("held");
    assert_eq!(queue.get(), Ok("held"));
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || queue.shutdown_with_drain())
    };
    while !queue.is_shutting_down() {
        thread::yield_now();
    }
    // "held" is never done: only a plain shutdown ends the wait.
    queue.shutdown();
    drainer.join().unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get(), Err(ShutDown));
    assert_eq!(queue.stats().delayed, 0);
}

#[tokio::test]
async fn async_drain_waits_for_done() {
    let queue = WorkQueue::new();
    queue.add(5u32);
    let item = queue.get_async().await.unwrap();
    let drain = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.shutdown_with_drain_async().await })
    };
    while !queue.is_shutting_down() {
        tokio::task::yield_now().await;
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!drain.is_finished());
    queue.done(&item);
    drain.await.unwrap();
    assert_eq!(queue.get_async().await, Err(ShutDown));
}

// ---------------------------------------------------------------------------------------------
// Metrics.

fn scrape(registry: &prometheus_client::registry::Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[test]
fn metrics_in_the_openmetrics_text() {
    let (registry, metrics) = QueueMetrics::new_registry();
    let clock = FakeClock::new();
    let queue = WorkQueue::builder()
        .name("hpa")
        .clock(clock.clone())
        .metrics(&metrics)
        .build();
    let other: WorkQueue<u8> = WorkQueue::builder().name("other").metrics(&metrics).build();

    queue.add("a");
    queue.add("b");
    queue.add("b");
    clock.advance(Duration::from_secs(2));
    assert_eq!(queue.get(), Ok("a")); // waited 2 s
    clock.advance(Duration::from_secs(3));
    assert_eq!(queue.get(), Ok("b")); // waited 5 s; "a" running 3 s
    clock.advance(Duration::from_millis(500));
    queue.add_after("c", Duration::from_secs(1));

    let text = scrape(&registry);
    for line in [
        "# TYPE workqueue_depth gauge",
        "workqueue_depth{name=\"hpa\"} 0",
        "workqueue_depth{name=\"other\"} 0",
        "# TYPE workqueue_adds counter",
        "workqueue_adds_total{name=\"hpa\"} 2",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# UNIT workqueue_queue_duration_seconds seconds",
        "workqueue_queue_duration_seconds_sum{name=\"hpa\"} 7.0",
        "workqueue_queue_duration_seconds_count{name=\"hpa\"} 2",
        "workqueue_queue_duration_seconds_bucket{le=\"1.0\",name=\"hpa\"} 0",
        "workqueue_queue_duration_seconds_bucket{le=\"10.0\",name=\"hpa\"} 2",
        "workqueue_queue_duration_seconds_bucket{le=\"+Inf\",name=\"hpa\"} 2",
        "workqueue_work_duration_seconds_count{name=\"hpa\"} 0",
        "workqueue_unfinished_work_seconds{name=\"hpa\"} 4.0",
        "workqueue_longest_running_processor_seconds{name=\"hpa\"} 3.5",
        "workqueue_retries_total{name=\"hpa\"} 1",
        "workqueue_retries_total{name=\"other\"} 0",
        "# EOF",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // One family per metric, whatever the number of queues.
    assert_eq!(text.matches("# TYPE workqueue_depth ").count(), 1);

    queue.done(&"a");
    clock.advance(Duration::from_secs(1));
    queue.done(&"b");
    let text = scrape(&registry);
    for line in [
        "workqueue_work_duration_seconds_count{name=\"hpa\"} 2",
        "workqueue_work_duration_seconds_sum{name=\"hpa\"} 5.0",
        "workqueue_unfinished_work_seconds{name=\"hpa\"} 0.0",
        // "c" became due: moved into the queue at its instant.
        "workqueue_depth{name=\"hpa\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }

    drop(other);
    assert!(!scrape(&registry).contains("name=\"other\""));
    let mut prefixed = prometheus_client::registry::Registry::with_prefix("ctrl");
    let m2 = QueueMetrics::register(&mut prefixed);
    let _q: WorkQueue<u8> = WorkQueue::builder().name("x").metrics(&m2).build();
    assert!(scrape(&prefixed).contains("ctrl_workqueue_depth{name=\"x\"} 0\n"));
}

// ---------------------------------------------------------------------------------------------
// Random operation sequences against a plain model of client-go's queue.

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    AddAfter(u8, u16),
    Get,
    Done(usize),
    Advance(u16),
    Shutdown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8).prop_map(Op::Add),
        3 => ((0u8..8), (0u16..50)).prop_map(|(k, d)| Op::AddAfter(k, d)),
        4 => Just(Op::Get),
        3 => (0usize..8).prop_map(Op::Done),
        2 => (0u16..30).prop_map(Op::Advance),
        1 => Just(Op::Shutdown),
    ]
}

/// client-go's structures, written plainly: a FIFO, a dirty set, a processing set, and a list
/// of waiting items with their instant.
#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    /// item -> (ready at ms, sequence)
    waiting: HashMap<u8, (u64, u64)>,
    seq: u64,
    now: u64,
    shut: bool,
}

impl Model {
    fn add(&mut self, k: u8) {
        if self.shut || self.dirty.contains(&k) {
            return;
        }
        self.dirty.insert(k);
        if !self.processing.contains(&k) {
            self.queue.push_back(k);
        }
    }
    fn promote(&mut self) {
        let mut due: Vec<(u64, u64, u8)> = self
            .waiting
            .iter()
            .filter(|(_, (at, _))| *at <= self.now)
            .map(|(k, (at, s))| (*at, *s, *k))
            .collect();
        due.sort();
        for (_, _, k) in due {
            self.waiting.remove(&k);
            self.add(k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn matches_the_reference_model(ops in proptest::collection::vec(op(), 1..120)) {
        let (queue, clock) = fake_queue::<u8>();
        let mut m = Model::default();
        let mut in_flight: Vec<u8> = Vec::new();
        for op in ops {
            match op {
                Op::Add(k) => { m.promote(); m.add(k); queue.add(k); }
                Op::AddAfter(k, d) => {
                    m.promote();
                    if !m.shut {
                        if d == 0 {
                            m.add(k);
                        } else {
                            let at = m.now + u64::from(d);
                            let seq = m.seq;
                            match m.waiting.get_mut(&k) {
                                Some(e) if at < e.0 => { *e = (at, seq); m.seq += 1; }
                                Some(_) => {}
                                None => { m.waiting.insert(k, (at, seq)); m.seq += 1; }
                            }
                        }
                    }
                    queue.add_after(k, MS * u32::from(d));
                }
                Op::Get if m.shut => prop_assert_eq!(queue.get(), Err(ShutDown)),
                Op::Get => {
                    m.promote();
                    // With nothing ready a get would block: skip it.
                    if let Some(k) = m.queue.pop_front() {
                        m.dirty.remove(&k);
                        m.processing.insert(k);
                        in_flight.push(k);
                        prop_assert_eq!(queue.get(), Ok(k));
                    }
                }
                Op::Done(i) => {
                    if in_flight.is_empty() { continue; }
                    let k = in_flight.swap_remove(i % in_flight.len());
                    m.promote();
                    m.processing.remove(&k);
                    if m.dirty.contains(&k) { m.queue.push_back(k); }
                    queue.done(&k);
                }
                Op::Advance(d) => {
                    m.now += u64::from(d);
                    m.promote();
                    clock.advance(MS * u32::from(d));
                }
                Op::Shutdown => {
                    m.shut = true;
                    m.waiting.clear();
                    queue.shutdown();
                }
            }
            let s = queue.stats();
            prop_assert_eq!(s.len, m.queue.len());
            prop_assert_eq!(s.depth, m.dirty.len());
            prop_assert_eq!(s.in_flight, m.processing.len());
            prop_assert_eq!(s.delayed, m.waiting.len());
        }
        // The rest comes out in the model's order, unless a plain shutdown stopped the queue.
        let expected: Vec<u8> = if m.shut { Vec::new() } else { m.queue.iter().copied().collect() };
        let rest: Vec<u8> = expected.iter().map(|_| queue.get().unwrap()).collect();
        prop_assert_eq!(rest, expected);
        queue.shutdown();
        prop_assert_eq!(queue.get(), Err(ShutDown));
    }
}
