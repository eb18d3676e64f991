//! Rough throughput check of the distributor, `#[ignore]`d: run with
//! `cargo test --release --test distributor_throughput -- --ignored --nocapture`.
//! Not a benchmark (criterion benches with baselines live in `benches/`); it prints
//! notifications per second delivered and asserts that every listener got everything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use informer::distributor::{Distributor, HandlerFns, Notification, OverflowPolicy};
use informer::object::ObjectMetaFields;
use informer::object::{Encoding, GroupVersionKind, Object, ObjectMeta};

#[test]
#[ignore = "throughput run, prints figures; use --release"]
fn fan_out_throughput() {
    const N: usize = 1_000_000;
    const BATCH: usize = 256;
    let objs: Vec<Arc<Object>> = (0..1000)
        .map(|i| {
            let meta = ObjectMeta::from(ObjectMetaFields {
                name: format!("o{i}").into(),
                namespace: "ns".into(),
                resource_version: i.to_string().into(),
                ..Default::default()
            });
            Arc::new(Object::from_parts(
                Arc::new(GroupVersionKind::new("", "v1", "ConfigMap")),
                meta,
                Bytes::new(),
                Encoding::Json,
            ))
        })
        .collect();
    let all: Vec<Notification> = (0..N)
        .map(|i| {
            let o = &objs[i % objs.len()];
            Notification::Update {
                old: o.clone(),
                new: o.clone(),
            }
        })
        .collect();
    let batches: Vec<Arc<[Notification]>> = all.chunks(BATCH).map(Arc::from).collect();

    for listeners in [1usize, 8, 64] {
        let d = Distributor::new();
        let counters: Vec<Arc<AtomicU64>> = (0..listeners)
            .map(|_| Arc::new(AtomicU64::new(0)))
            .collect();
        for (i, c) in counters.iter().enumerate() {
            let c = c.clone();
            d.add_listener(
                &format!("l{i}"),
                OverflowPolicy::Unbounded,
                HandlerFns::new().with_update(move |_, _| {
                    c.fetch_add(1, Ordering::Relaxed);
                }),
            )
            .unwrap();
        }
        let start = Instant::now();
        for b in &batches {
            d.publish(b.clone());
        }
        let published = start.elapsed();
        d.flush();
        let elapsed = start.elapsed();
        for c in &counters {
            assert_eq!(c.load(Ordering::Relaxed), N as u64);
        }
        let delivered = (N * listeners) as f64;
        println!(
            "{listeners:>3} listeners: publish {:>7.1} ms, all delivered {:>7.1} ms, \
             {:>6.1} M notifications/s delivered, {:>5.1} ns per notification per listener",
            published.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e3,
            delivered / elapsed.as_secs_f64() / 1e6,
            elapsed.as_nanos() as f64 / delivered,
        );
        d.shutdown();
    }
}
