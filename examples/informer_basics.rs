//! The library in a few lines: an informer over the embedded simulated API server, a
//! closure-based handler, a lock-free read through the namespace index, typed decode on demand.
//!
//! Run: `cargo run --release --example informer_basics`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use informer::distributor::HandlerFns;
use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::{Informer, InformerConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A simulated API server holding 1 000 Pods stamped from the real etcd Pod fixture.
    let templates = Templates::etcd_pod(&default_fixtures_dir()?)?;
    let sim = SimServer::new(
        SimConfig::new(templates)
            .initial_objects(1_000)
            .target_objects(1_000)
            .flow_control(true),
    )?;

    // An informer with one handler counting what it is told.
    let informer = Informer::new(sim.clone(), InformerConfig::default());
    let (adds, updates, deletes) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let (a, u, d) = (adds.clone(), updates.clone(), deletes.clone());
    informer.add_event_handler(
        HandlerFns::new()
            .with_add(move |_, _| {
                a.fetch_add(1, Ordering::Relaxed);
            })
            .with_update(move |_, _| {
                u.fetch_add(1, Ordering::Relaxed);
            })
            .with_delete(move |_| {
                d.fetch_add(1, Ordering::Relaxed);
            }),
        informer::HandlerOptions::new(),
    )?;
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await?;

    // 10 000 changes on the server; wait until the store reflects the last one.
    let rv = sim.flood(10_000).await?;
    let store = informer.store();
    store.wait_for(rv).await?;
    informer.flush();

    // Lock-free reads: everything in one namespace, on one consistent snapshot.
    let snapshot = store.snapshot();
    let in_ns0 = snapshot.by_index("namespace", "ns-0")?;
    println!(
        "store at resourceVersion {}: {} pods, {} in ns-0",
        snapshot.resource_version(),
        snapshot.len(),
        in_ns0.len()
    );
    println!(
        "handler saw {} adds, {} updates, {} deletes",
        adds.load(Ordering::Relaxed),
        updates.load(Ordering::Relaxed),
        deletes.load(Ordering::Relaxed)
    );

    // The typed object is decoded only when asked for.
    if let Some(obj) = in_ns0.first() {
        let pod: k8s_pb::api::core::v1::Pod = obj.decode()?;
        let containers: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .filter_map(|c| c.image.clone())
            .collect();
        println!("{} runs {:?}", obj.key(), containers);
    }
    informer.shutdown();
    Ok(())
}
