//! Write throughput, side by side in one run: the same kube-rs clients making the same writes
//! (create, then updates with the resourceVersion they read, then a JSON merge patch, then a
//! delete, per Deployment) against (a) `informer serve`'s server in JSON form (`--format
//! json`, in this process), (a') the same server keeping protobuf (every JSON body and answer
//! converted by the Kubernetes schema), and (b) a real kube-apiserver with etcd
//! (`interop/apiserver`, its own processes), all on loopback. The figure is writes per second
//! (every request that changed an object) and the ratios to (b).
//!
//! Run: `cargo bench --bench writes` (about a minute on 2 cores with the kube-apiserver's
//! start; `-- --writers N --objects N --updates N`, `-- --no-apiserver` for (a) alone).

// The bench has no public items to document.
#![allow(missing_docs)]

#[path = "../tests/interop/mod.rs"]
mod interop;
#[path = "../tests/kube_apiserver/mod.rs"]
mod kube_apiserver;

use std::time::Instant;

use informer::object::ObjectMeta;
use informer::server::{ServerConfig, serve};
use informer::sim::{SimConfig, SimServer, Templates};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

#[derive(Debug, clap::Parser)]
struct Args {
    /// Concurrent writers (each its own share of the Deployments).
    #[arg(long, default_value_t = 16)]
    writers: usize,
    /// Deployments per writer.
    #[arg(long, default_value_t = 40)]
    objects: usize,
    /// Updates (PUT with the resourceVersion last read) per Deployment.
    #[arg(long, default_value_t = 3)]
    updates: usize,
    /// Skip the real kube-apiserver.
    #[arg(long)]
    no_apiserver: bool,
    /// Criterion's flag when run by `cargo bench` (ignored).
    #[arg(long, hide = true)]
    bench: bool,
}

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}
            }
        }
    }))
    .unwrap()
}

/// Runs the workload on `api`; returns (writes, seconds).
async fn workload(api: Api<Deployment>, args: &Args) -> (u64, f64) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..args.writers {
        let api = api.clone();
        let (objects, updates) = (args.objects, args.updates);
        tasks.push(tokio::spawn(async move {
            let mut writes = 0u64;
            for i in 0..objects {
                let name = format!("w{w}-d{i}");
                let pp = PostParams::default();
                let mut cur = api.create(&pp, &deployment(&name, "app:0")).await.unwrap();
                writes += 1;
                for u in 1..=updates {
                    let mut next = deployment(&name, &format!("app:{u}"));
                    next.metadata.resource_version = cur.metadata.resource_version.clone();
                    cur = api.replace(&name, &pp, &next).await.unwrap();
                    writes += 1;
                }
                let patch = serde_json::json!({"metadata": {"labels": {"patched": "yes"}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .unwrap();
                api.delete(&name, &DeleteParams::default()).await.unwrap();
                writes += 2;
            }
            writes
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    (total, started.elapsed().as_secs_f64())
}

fn main() {
    let args: Args = clap::Parser::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let template = serde_json::to_string(&deployment("template", "app:0")).unwrap();
        let mut t = informer::object::decode(template.into()).unwrap();
        let mut meta = t.meta().to_fields();
        meta.namespace = "default".into();
        t = t.with_meta(ObjectMeta::from(meta)).unwrap();
        let json = Templates::from_objects(vec![t]).unwrap();
        let protobuf =
            Templates::deployments(&informer::sim::default_fixtures_dir().unwrap()).unwrap();
        println!(
            "| target | writers | writes | seconds | writes/s | ratio |\n|---|---|---|---|---|---|"
        );
        let mut ours = Vec::new();
        for (label, templates) in [
            ("informer serve (JSON, in process)", json),
            (
                "informer serve (protobuf, JSON converted, in process)",
                protobuf,
            ),
        ] {
            let sim = SimServer::new(SimConfig::new(templates)).unwrap();
            let server = serve(sim, ServerConfig::default(), "127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let client =
                kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
            // Warm up connections and code paths.
            workload(
                Api::namespaced(client.clone(), "ns-0"),
                &Args {
                    objects: 2,
                    ..clap::Parser::parse_from(["writes"])
                },
            )
            .await;
            let (n, secs) = workload(Api::namespaced(client, "ns-1"), &args).await;
            server.shutdown().await;
            ours.push((label, n, secs));
        }
        if args.no_apiserver {
            for (label, n, secs) in ours {
                let rate = n as f64 / secs;
                println!(
                    "| {label} | {} | {n} | {secs:.2} | {rate:.0} | |",
                    args.writers
                );
            }
            return;
        }
        // Blocks this thread while it starts; nothing else runs meanwhile.
        let kas = kube_apiserver::KubeApiServer::start(&[]);
        let client = kas.client().await;
        let ns = kube_apiserver::namespace(&client, "writes").await;
        let warm = kube_apiserver::namespace(&client, "warm").await;
        workload(
            Api::namespaced(client.clone(), &warm),
            &Args {
                objects: 2,
                ..clap::Parser::parse_from(["writes"])
            },
        )
        .await;
        let (real, real_s) = workload(Api::namespaced(client, &ns), &args).await;
        let real_rate = real as f64 / real_s;
        for (label, n, secs) in ours {
            let rate = n as f64 / secs;
            println!(
                "| {label} | {} | {n} | {secs:.2} | {rate:.0} | {:.1}× |",
                args.writers,
                rate / real_rate
            );
        }
        println!(
            "| kube-apiserver v1.37 + etcd | {} | {real} | {real_s:.2} | {real_rate:.0} | 1× |",
            args.writers
        );
    });
}
