//! `informer shard`: one member of a shard group: a membership Lease, an informer of one
//! resource filtered to the member's keys, and workers that "reconcile" each changed key
//! under a claim. Prints JSON lines: the members and whether it acts (at once on each change of
//! the ring or of acting), its cache (count and an XOR of key hashes, so a checker can compare it
//! with the expected share: as the store holds it, and as the handlers saw it through adds and
//! deletes, with the wall time of the last one), and each claim.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::client::{HttpListerWatcher, discover};
use informer::distributor::HandlerFns;
use informer::object::ObjectKey;
use informer::sharding::{ShardConfig, ShardMember, attach, shard_hash};
use informer::workqueue::WorkQueue;
use informer::{HandlerOptions, Informer, InformerConfig};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

use super::lease_args::{LeaseArgs, emit, instant_ns, wall_ns};

/// Arguments of `informer shard`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShardArgs {
    /// The shard group's name (its members' Leases are `<group>-<identity>`).
    #[arg(long, default_value = "informer-shard")]
    group: String,
    /// Resource whose objects are shared out, as kubectl names it.
    #[arg(long, default_value = "configmaps")]
    resource: String,
    /// Namespace of the objects (default: all namespaces).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Concurrent reconciles.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Milliseconds one reconcile holds its claim.
    #[arg(long, default_value_t = 5)]
    work_ms: u64,
    /// Do not print a line per claim (only views and cache changes).
    #[arg(long)]
    quiet_claims: bool,
    #[command(flatten)]
    common: LeaseArgs,
}

/// Runs the command; returns the process exit code.
pub(crate) fn run(args: &ShardArgs) -> i32 {
    super::block_on_command("shard", run_async(args))
}

async fn run_async(args: &ShardArgs) -> Result<(), String> {
    let client = args.common.client().await?;
    let identity = args.common.identity();
    let config = ShardConfig::new(&args.group, &identity).timing(args.common.timing());
    let leases = kube::Api::<Lease>::namespaced(client.clone(), &args.common.lease_namespace);
    let member = Arc::new(ShardMember::new(leases, config).map_err(|e| e.to_string())?);
    let shard = member.shard();

    let found = discover(&client, &args.resource)
        .await
        .map_err(|e| e.to_string())?;
    let mut resource = found.resource.clone();
    if let Some(ns) = args.namespace.as_deref().filter(|n| !n.is_empty()) {
        resource = resource.in_namespace(ns);
    }
    let handle = tokio::runtime::Handle::current();
    let informer = Arc::new(Informer::new(
        HttpListerWatcher::new(client, resource),
        InformerConfig::default(),
    ));
    attach(&shard, &informer, &handle).map_err(|e| e.to_string())?;
    let queue = WorkQueue::<ObjectKey>::builder().name("shard").build();
    informer
        .add_event_handler(queue.clone(), HandlerOptions::new().name("enqueue"))
        .map_err(|e| e.to_string())?;
    let seen = Arc::new(SeenKeys::default());
    informer
        .add_event_handler(seen.handler(), HandlerOptions::new().name("seen"))
        .map_err(|e| e.to_string())?;
    emit(
        json!({"event": "member", "identity": identity, "group": args.group, "t_ns": wall_ns() as u64}),
    );
    let m = member.clone();
    let stop = super::until_stop(args.common.duration);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let membership = tokio::spawn(async move {
        m.run(async {
            let _ = stop_rx.await;
        })
        .await;
    });
    informer.start(&handle);

    let mut workers = Vec::new();
    for _ in 0..args.workers.max(1) {
        let (queue, shard) = (queue.clone(), shard.clone());
        let (work, quiet) = (Duration::from_millis(args.work_ms), args.quiet_claims);
        workers.push(tokio::spawn(async move {
            while let Ok(key) = queue.get_async().await {
                if let Some(claim) = shard.claim(key.as_str()) {
                    let start = wall_ns();
                    if !quiet {
                        emit(
                            json!({"event": "claim", "key": key.as_str(), "start_ns": start as u64,
                            "deadline_ns": instant_ns(claim.deadline()) as u64}),
                        );
                    }
                    tokio::time::sleep(work).await;
                    let valid = claim.is_valid();
                    drop(claim);
                    if !quiet {
                        emit(
                            json!({"event": "acted", "key": key.as_str(), "start_ns": start as u64,
                            "end_ns": wall_ns() as u64, "valid": valid}),
                        );
                    }
                }
                queue.done(&key);
            }
        }));
    }

    // Views at once on each change, the cache every 50 ms (the handlers' view carries the time
    // of its last change, so a checker times a shard move to the event); keys enqueued again
    // each time acting starts.
    tokio::pin!(stop);
    let mut acting = shard.acting_changes();
    let mut ring = shard.ring_changes();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let (mut last_view, mut last_cache) = (None, None);
    loop {
        tokio::select! {
            () = &mut stop => break,
            Ok(()) = acting.changed() => {
                if *acting.borrow_and_update() {
                    for key in informer.store().keys() {
                        queue.add(key);
                    }
                }
            }
            Ok(()) = ring.changed() => {
                ring.borrow_and_update();
            }
            _ = tick.tick() => {}
        }
        let view = (shard.members(), shard.acting_until().is_some());
        if last_view.as_ref() != Some(&view) {
            emit(
                json!({"event": "view", "members": view.0, "acting": view.1, "t_ns": wall_ns() as u64}),
            );
            last_view = Some(view);
        }
        let keys = informer.store().keys();
        let xor = keys.iter().fold(0u64, |x, k| x ^ shard_hash(k.as_str()));
        let (seen_count, seen_xor, changed_ns) = *seen.state.lock().expect("not poisoned");
        let cache = (keys.len(), xor, informer.has_synced(), seen_count, seen_xor);
        if last_cache != Some(cache) {
            emit(
                json!({"event": "cache", "count": cache.0, "xor": format!("{:016x}", cache.1),
                "synced": cache.2, "seen_count": seen_count, "seen_xor": format!("{seen_xor:016x}"),
                "changed_ns": changed_ns, "t_ns": wall_ns() as u64}),
            );
            last_cache = Some(cache);
        }
    }
    let _ = stop_tx.send(());
    let _ = membership.await;
    queue.shutdown();
    for w in workers {
        let _ = w.await;
    }
    informer.shutdown_async().await;
    emit(json!({"event": "left", "t_ns": wall_ns() as u64}));
    Ok(())
}

/// The keys as the handlers saw them: adds minus deletes, counted and XORed by key hash, with the
/// wall time (ns) of the last add or delete.
#[derive(Default)]
struct SeenKeys {
    state: Mutex<(u64, u64, u64)>,
}

impl SeenKeys {
    fn handler(self: &Arc<Self>) -> HandlerFns {
        let (on_add, on_delete) = (self.clone(), self.clone());
        HandlerFns::new()
            .with_add(move |obj, _| on_add.change(obj.key().as_str(), true))
            .with_delete(move |obj| on_delete.change(obj.key().as_str(), false))
    }

    fn change(&self, key: &str, added: bool) {
        let mut s = self.state.lock().expect("not poisoned");
        s.0 = if added {
            s.0 + 1
        } else {
            s.0.saturating_sub(1)
        };
        s.1 ^= shard_hash(key);
        s.2 = wall_ns() as u64;
    }
}
