//! Stress tests of the listener threads' wake-up protocol (`src/distributor/wakeup.rs`): a
//! publish landing at every stage of a listener's wait (spin, yields, just before and after it
//! parks), for every overflow policy, with flushes, removals, shutdowns and handlers removing
//! themselves. Every wait is bounded, so a lost wake-up fails as a "deadlock" instead of
//! hanging. The random pauses between publishes are the point of the test (they move the
//! publish through the listener's wait), not a wait for a result. `WAKE_ITERS` sets the rounds
//! (default 20 000).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam::channel::{Sender, bounded, unbounded};
use informer::distributor::{Distributor, HandlerFns, OverflowPolicy};
use informer::object::Object;

use super::{one_update, within};

fn rvof(o: &Object) -> u64 {
    o.resource_version().parse().unwrap()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Sleeps 0..max_us, often 0: lands the publish at every stage of the listener's wait (spin,
/// yields, just before/after park).
fn jitter(r: &mut Rng, max_us: u64) {
    match r.next() % 4 {
        0 => {}
        1 => std::thread::yield_now(),
        2 => {
            let spins = r.next() % 2000;
            for _ in 0..spins {
                std::hint::spin_loop();
            }
        }
        _ => std::thread::sleep(Duration::from_micros(r.next() % max_us)),
    }
}

const POLICIES: [OverflowPolicy; 4] = [
    OverflowPolicy::Unbounded,
    OverflowPolicy::Block { capacity: 1 },
    OverflowPolicy::Block { capacity: 3 },
    OverflowPolicy::CoalesceByKey,
];

fn iters() -> u64 {
    std::env::var("WAKE_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

/// Ping-pong: publish one event, wait (bounded) for every listener to ack it. A lost wake-up
/// shows as a 2 s timeout.
#[test]
fn ping_pong_no_lost_wakeup() {
    let d = Arc::new(Distributor::new());
    let (ack_tx, ack_rx) = unbounded::<(usize, u64)>();
    for (i, p) in POLICIES.iter().enumerate() {
        let ack = ack_tx.clone();
        d.add_listener(
            &format!("pp{i}"),
            *p,
            HandlerFns::new().with_update(move |_, new| {
                ack.send((i, rvof(new))).unwrap();
            }),
        )
        .unwrap();
    }
    let mut r = Rng(0x9e3779b97f4a7c15);
    let n = iters();
    for k in 1..=n {
        d.publish(one_update("a", k));
        for _ in 0..POLICIES.len() {
            match ack_rx.recv_timeout(Duration::from_secs(2)) {
                Ok((_, rv)) => assert_eq!(rv, k),
                Err(_) => {
                    let stats: Vec<_> = d
                        .listeners()
                        .iter()
                        .map(|l| (l.name().to_owned(), l.stats().delivered))
                        .collect();
                    panic!("LOST WAKEUP at iteration {k}: {stats:?}");
                }
            }
        }
        jitter(&mut r, 60);
    }
    within(10, "shutdown", move || d.shutdown());
}

/// Publisher floods Block{1} listeners (so it often blocks in send_or_abort) while another
/// thread flushes; every flush must return.
#[test]
fn flood_with_flush_and_markers() {
    let d = Arc::new(Distributor::new());
    let seen = Arc::new(AtomicU64::new(0));
    for (i, p) in POLICIES.iter().enumerate() {
        let seen = seen.clone();
        d.add_listener(
            &format!("fl{i}"),
            *p,
            HandlerFns::new().with_update(move |_, _| {
                seen.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
    }
    let n = iters() * 5;
    let pubd = d.clone();
    let publisher = std::thread::spawn(move || {
        let mut r = Rng(7);
        for k in 1..=n {
            pubd.publish(one_update(&format!("k{}", k % 8), k));
            if k % 64 == 0 {
                jitter(&mut r, 100);
            }
        }
    });
    let start = Instant::now();
    let mut flushes = 0;
    while !publisher.is_finished() {
        let d2 = d.clone();
        within(10, "flush during flood", move || d2.flush());
        flushes += 1;
    }
    publisher.join().unwrap();
    let d2 = d.clone();
    within(10, "final flush", move || d2.flush());
    eprintln!("flushes: {flushes} in {:?}", start.elapsed());
    within(10, "shutdown", move || d.shutdown());
}

/// Add a listener, publish at it from another thread, remove it (or shut down) at a random
/// moment; nothing may hang and remove_listener must report everything published before it as
/// delivered.
#[test]
fn remove_and_shutdown_under_publish() {
    let rounds = iters() / 40;
    let mut r = Rng(12345);
    for round in 0..rounds {
        let d = Arc::new(Distributor::new());
        let policy = POLICIES[(r.next() % 4) as usize];
        // Not with Unbounded: its backlog behind a slow handler only takes long to drain.
        let slow = r.next().is_multiple_of(3) && policy != OverflowPolicy::Unbounded;
        let l = d
            .add_listener(
                "rm",
                policy,
                HandlerFns::new().with_update(move |_, _| {
                    if slow {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }),
            )
            .unwrap();
        let stop = Arc::new(AtomicU64::new(0));
        let (pd, ps) = (d.clone(), stop.clone());
        let publisher = std::thread::spawn(move || {
            let mut k = 0;
            while ps.load(Ordering::Relaxed) == 0 {
                k += 1;
                pd.publish(one_update("a", k));
            }
            k
        });
        jitter(&mut r, 300);
        let (d2, id) = (d.clone(), l.id());
        let mode = r.next() % 3;
        let (tx, rx) = bounded(1);
        std::thread::spawn(move || {
            match mode {
                0 => {
                    d2.remove_listener(id);
                }
                1 => d2.shutdown(),
                _ => {
                    d2.flush_listener(id);
                    d2.remove_listener(id);
                }
            }
            let _ = tx.send(());
        });
        if rx.recv_timeout(Duration::from_secs(10)).is_err() {
            let a = l.stats();
            std::thread::sleep(Duration::from_millis(500));
            let b = l.stats();
            panic!(
                "deadlock in round {round} ({policy:?}, slow {slow}, mode {mode}): published {} \
                 delivered {} pending {}, 0.5 s later published {} delivered {} pending {}",
                a.published, a.delivered, a.pending, b.published, b.delivered, b.pending
            );
        }
        stop.store(1, Ordering::Relaxed);
        within(10, "publisher end", move || publisher.join().unwrap());
        within(10, "drop", move || drop(d));
    }
}

/// A handler removes its own listener at a random event while the publisher keeps publishing.
#[test]
fn handler_removes_itself() {
    let rounds = iters() / 40;
    let mut r = Rng(999);
    for round in 0..rounds {
        let d = Arc::new(Distributor::new());
        let policy = POLICIES[(r.next() % 4) as usize];
        let at = r.next() % 50 + 1;
        let id = Arc::new(OnceLock::new());
        let (d2, id2) = (Arc::downgrade(&d), id.clone());
        let (done_tx, done_rx) = bounded::<()>(1);
        let mut count = 0;
        let done: Sender<()> = done_tx;
        let l = d
            .add_listener(
                "selfrm",
                policy,
                HandlerFns::new().with_update(move |_, _| {
                    count += 1;
                    if count == at {
                        if let (Some(d), Some(id)) = (d2.upgrade(), id2.get()) {
                            d.remove_listener(*id);
                        }
                        let _ = done.try_send(());
                    }
                }),
            )
            .unwrap();
        id.set(l.id()).unwrap();
        let pd = d.clone();
        let publisher = std::thread::spawn(move || {
            for k in 1..=200 {
                pd.publish(one_update(&format!("k{k}"), k));
            }
        });
        within(
            10,
            &format!("self-removal round {round} {policy:?}"),
            move || {
                publisher.join().unwrap();
            },
        );
        // The listener saw at least `at` events unless coalescing merged them.
        let _ = done_rx.recv_timeout(Duration::from_millis(1));
        within(10, "shutdown", move || d.shutdown());
        // Its thread must end (it was removed, so shutdown does not join it).
        let l2 = l.clone();
        let _ = l2;
    }
}
