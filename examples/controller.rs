//! A controller in the shape of Kubernetes' HorizontalPodAutoscaler controller, on this
//! crate's informers: one `SharedInformerFactory` with a Deployment and a Pod informer (typed
//! through k8s-pb), handlers that put `namespace/name` keys on a rate-limited `WorkQueue` (a
//! Pod's events enqueue its Deployment, found through its ReplicaSet owner), workers that
//! reconcile each Deployment from the listers (desired replicas, owned Pods, ready Pods, by a
//! Pod index), `wait_for_cache_sync` before the workers start, and on Ctrl-C (or after
//! `--duration`) a drain of the queue and a summary. The controller itself is in
//! `examples/controller/hpa.rs`; `tests/controller.rs` runs it too.
//!
//! Where it gets Deployments and Pods from:
//!
//! - by default, over HTTP from the simulated API server of `informer serve`, started here on
//!   a loopback port with the Deployments and Pods of one simulated cluster (what
//!   `informer serve --template deployments --template pod-states` serves), flooded while
//!   the controller runs, which writes each Deployment's status back through the API
//!   (`PUT .../deployments/NAME/status`, protobuf, as the deployment controller does); at the
//!   end it waits until its caches hold the servers' last change, drains its queue and checks
//!   every Deployment's status, computed and as written to the server, against the
//!   simulators' truth (exit code 1 if one differs);
//! - `--server URL`: a running `informer serve --template deployments --template pod-states`
//!   (or any API server reachable without credentials, e.g. `kubectl proxy`);
//! - `--kubeconfig PATH` (and `--context`): a real cluster, read-only (list and watch;
//!   `--write-status` writes statuses, which a real cluster's deployment controller owns);
//!   at the end the controller lists Deployments and Pods afresh and waits (up to
//!   `--sync-timeout`) until its caches hold exactly those versions before it drains, so the
//!   summary describes the cluster as it was at the stop (on a busy cluster they may never
//!   match: the summary then says by how many objects they differ);
//! - `--in-process`: the two simulators without HTTP (statuses written to them directly),
//!   verified as by default.
//!
//! Run: `cargo run --release --example controller -- --duration 10`
//! (`--help` for the rest).

#[path = "controller/cli.rs"]
mod cli;
#[path = "controller/hpa.rs"]
mod hpa;
#[path = "controller/truth.rs"]
mod truth;

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::net::{Ipv4Addr, SocketAddr};

use informer::Informer;
use informer::client::ClientOptions;
use informer::election::{LeaderElectionConfig, LeaderElector, Leadership};
use informer::factory::{GroupVersionResource, MakeListerWatcher, SharedInformerFactory};
use informer::reflector::ListerWatcher;
use informer::server::{ServerConfig, serve_many};
use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::workqueue::{QueueMetrics, WorkQueue};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_pb::api::apps::v1::Deployment;
use k8s_pb::api::core::v1::Pod;

use hpa::{
    Controller, StatusWriter, deployment_of, http_lister_watchers, http_status_writer,
    sim_status_writer,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command-line arguments.
#[derive(Debug, clap::Parser)]
#[command(about = "A HorizontalPodAutoscaler-shaped controller on informer's caches")]
struct Args {
    /// An API server without credentials, e.g. a running `informer serve --template
    /// deployments --template pod-states` (its URL) or `kubectl proxy`.
    #[arg(long, conflicts_with_all = ["kubeconfig", "in_process"])]
    server: Option<String>,
    /// A real cluster, from this kubeconfig file.
    #[arg(long, conflicts_with = "in_process")]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    context: Option<String>,
    /// Only this namespace (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Watch the two simulators directly instead of over HTTP.
    #[arg(long, conflicts_with = "namespace")]
    in_process: bool,
    /// Worker threads reconciling Deployments.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
    /// Stop after this many seconds (default: at Ctrl-C).
    #[arg(long, value_parser = cli::seconds)]
    duration: Option<f64>,
    /// Seconds to wait for the caches to sync before giving up.
    #[arg(long, default_value_t = 30.0, value_parser = cli::seconds)]
    sync_timeout: f64,
    /// Seconds between status lines (0 = none).
    #[arg(long, default_value_t = 2.0, value_parser = cli::seconds)]
    status_every: f64,
    /// Print the work queue's metrics (OpenMetrics text) at the end.
    #[arg(long)]
    metrics: bool,
    /// Print, last, one JSON line with every Deployment's status
    /// (`{"statuses":{"ns/name":{"generation":G,"desired":D,"pods":P,"ready":R}},...}`).
    #[arg(long)]
    json: bool,
    /// Simulator (default and --in-process): Deployments created before start (the flood holds about this many; at
    /// most `namespaces * apps`).
    #[arg(long, default_value_t = 400)]
    deployments: usize,
    /// Simulator: Pods created before start (the flood holds about this many).
    #[arg(long, default_value_t = 4_000)]
    pods: usize,
    /// Simulator: Pod changes per second while running (Deployments get a tenth of that).
    #[arg(long, default_value_t = 5_000.0)]
    rate: f64,
    /// Simulator: namespaces.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    namespaces: u32,
    /// Simulator: apps (one Deployment per namespace and app).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    apps: u32,
    /// Simulator: seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write each Deployment's status through the API (`PUT .../status`) against `--server`
    /// or `--kubeconfig` too (always done with the simulators; a real cluster's deployment
    /// controller owns that status, so this is off there by default).
    #[arg(long)]
    write_status: bool,
    /// With `--kubeconfig`: run the workers only while this replica leads, elected over the
    /// Lease `informer-controller` (client-go `tools/leaderelection` semantics; 15 s lease,
    /// 10 s renew deadline, 2 s retry). Caches sync before the election, so a new leader
    /// starts warm; a replica that loses the Lease stops at once and exits with code 1.
    #[arg(long, requires = "kubeconfig")]
    leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "default")]
    leader_elect_namespace: String,
    /// This replica's identity in the election (default: hostname and pid).
    #[arg(long)]
    identity: Option<String>,
}

fn main() -> ExitCode {
    let args: Args = clap::Parser::parse();
    // Lease request failures, a lost election and handler panics are logged through
    // `tracing`: to stderr, filtered by RUST_LOG (default `warn`).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("controller: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("controller: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs against the source the arguments name; `Ok(false)` when a verification failed.
async fn run(args: &Args) -> Result<bool, Box<dyn Error>> {
    if !(args.rate.is_finite() && args.rate >= 0.0) {
        return Err(format!("--rate {} is not a rate", args.rate).into());
    }
    let remote = ClientOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        server: args.server.clone(),
    };
    if args.server.is_some() || args.kubeconfig.is_some() {
        let client = remote.client().await?;
        println!(
            "API server {} ({})",
            args.server.as_deref().unwrap_or("of the kubeconfig"),
            args.namespace
                .as_deref()
                .map_or("all namespaces".to_owned(), |n| format!("namespace {n}"))
        );
        let factory = with_namespace(
            SharedInformerFactory::new(http_lister_watchers(client.clone())),
            args,
        );
        let writer = args
            .write_status
            .then(|| http_status_writer(client.clone(), tokio::runtime::Handle::current()));
        return control(args, factory, Source::Cluster(&client), writer).await;
    }

    let sims = Sims::new(args)?;
    println!(
        "simulated cluster: {} deployments, {} pods in {} namespaces, {} pod changes/s",
        sims.deployments.stats().objects,
        sims.pods.stats().objects,
        args.namespaces,
        args.rate
    );
    if args.in_process {
        let (d, p) = (sims.deployments.clone(), sims.pods.clone());
        let factory =
            SharedInformerFactory::new(move |gvr: &GroupVersionResource, _: Option<&str>| {
                if gvr.resource == "deployments" {
                    d.clone()
                } else {
                    p.clone()
                }
            });
        println!("watching it in process (no HTTP)");
        let writer = sim_status_writer(sims.deployments.clone());
        return control(
            args,
            with_namespace(factory, args),
            Source::Sims(&sims),
            Some(writer),
        )
        .await;
    }
    // The simulated API server `informer serve` runs, on a loopback port.
    let server = serve_many(
        vec![
            (sims.deployments.clone(), ServerConfig::default()),
            (sims.pods.clone(), ServerConfig::default()),
        ],
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    )
    .await?;
    println!("serving it over HTTP at {}", server.url());
    let client = ClientOptions {
        server: Some(server.url()),
        ..ClientOptions::default()
    }
    .client()
    .await?;
    let writer = http_status_writer(client.clone(), tokio::runtime::Handle::current());
    let factory = with_namespace(
        SharedInformerFactory::new(http_lister_watchers(client)),
        args,
    );
    let verified = control(args, factory, Source::Sims(&sims), Some(writer)).await;
    server.shutdown().await;
    verified
}

/// `factory` restricted to `--namespace`, if given.
fn with_namespace<L: ListerWatcher, F: MakeListerWatcher<L>>(
    factory: SharedInformerFactory<L, F>,
    args: &Args,
) -> SharedInformerFactory<L, F> {
    match &args.namespace {
        Some(ns) => factory.namespace(ns),
        None => factory,
    }
}

/// A simulated cluster: a server of Deployments and one of Pods with the same seed,
/// namespaces and apps (so that Pods belong to the Deployments), moving objects between
/// template variants on updates (scaling, readiness changes).
struct Sims {
    deployments: SimServer,
    pods: SimServer,
}

impl Sims {
    fn new(args: &Args) -> Result<Self, Box<dyn Error>> {
        let dir = default_fixtures_dir()?;
        let config = |t: Templates, n: usize| {
            SimConfig::new(t)
                .seed(args.seed)
                .namespaces(args.namespaces)
                .apps(args.apps)
                .initial_objects(n)
                .target_objects(n)
                .update_template(true)
        };
        let capacity = args.namespaces as usize * args.apps as usize;
        Ok(Sims {
            deployments: SimServer::new(config(
                Templates::deployments(&dir)?,
                args.deployments.min(capacity),
            ))?,
            pods: SimServer::new(config(Templates::pod_states(&dir)?, args.pods))?,
        })
    }

    /// Floods both servers at `rate` Pod changes per second (a tenth of that for
    /// Deployments), in 100 ms steps, until cancelled.
    async fn drive(&self, rate: f64) -> Result<(), Box<dyn Error>> {
        if rate <= 0.0 {
            return std::future::pending().await;
        }
        let step = Duration::from_millis(100);
        let mut tick = tokio::time::interval(step);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let started = tokio::time::Instant::now();
        let (mut pods, mut deployments) = (0u64, 0u64);
        loop {
            tick.tick().await;
            let secs = started.elapsed().as_secs_f64();
            let p = (rate * secs) as u64 - pods;
            let d = (rate / 10.0 * secs) as u64 - deployments;
            self.pods.flood(p).await?;
            self.deployments.flood(d).await?;
            pods += p;
            deployments += d;
        }
    }
}

/// What the informers watch.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The simulators, flooded while the controller runs and checked at the end.
    Sims(&'a Sims),
    /// A real cluster (or any API server) through this client: read; written only with
    /// `--write-status`.
    Cluster(&'a kube::Client),
}

/// Runs the controller on `factory` until Ctrl-C or `--duration`, then drains and prints the
/// summary. With simulators, also floods them and verifies the result; returns whether it
/// matched (always `true` against a cluster).
async fn control<L, F>(
    args: &Args,
    factory: SharedInformerFactory<L, F>,
    source: Source<'_>,
    writer: Option<StatusWriter>,
) -> Result<bool, Box<dyn Error>>
where
    L: ListerWatcher,
    F: MakeListerWatcher<L>,
{
    let started = Instant::now();
    let (registry, metrics) = QueueMetrics::new_registry();
    // The HPA controller's queue: client-go's default controller rate limiter for retries.
    let queue = WorkQueue::builder()
        .name("horizontalpodautoscaler")
        .metrics(&metrics)
        .build();
    let controller = Controller::new(&factory, queue)?;
    let writes = writer.is_some();
    if let Some(w) = writer.clone() {
        controller.set_status_writer(w);
    }
    let d_informer = factory.informer::<Deployment>().informer().clone();
    let p_informer = factory.informer::<Pod>().informer().clone();

    factory.start(&tokio::runtime::Handle::current());
    let timeout = Duration::from_secs_f64(args.sync_timeout.max(0.0));
    let synced = tokio::select! {
        s = factory.wait_for_cache_sync(timeout) => s,
        () = stop_signal() => {
            // A stop, not a failure (a rolling update stops replicas at any point).
            println!("stopped before the caches synced");
            tokio::task::block_in_place(|| factory.shutdown());
            return Ok(true);
        }
    };
    if let Err(e) = synced {
        tokio::task::block_in_place(|| factory.shutdown());
        return Err(format!("within {:.0} s: {e}", timeout.as_secs_f64()).into());
    }
    println!(
        "caches synced in {:.2} s: {} deployments, {} pods; starting {} workers",
        started.elapsed().as_secs_f64(),
        d_informer.store().len(),
        p_informer.store().len(),
        args.workers
    );
    // With --leader-elect: stand in the election, and start the workers once leading.
    let (elector, stop_election) = match (&source, args.leader_elect) {
        (Source::Cluster(client), true) => {
            let identity = args
                .identity
                .clone()
                .unwrap_or_else(|| informer::election::default_identity("controller"));
            let leases =
                kube::Api::<Lease>::namespaced((*client).clone(), &args.leader_elect_namespace);
            let elector = Arc::new(LeaderElector::new(
                leases,
                LeaderElectionConfig::new("informer-controller", &identity),
            )?);
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let e = elector.clone();
            tokio::spawn(async move {
                e.run(async {
                    let _ = rx.await;
                })
                .await
            });
            let mut status = elector.watch();
            println!(
                "{identity}: waiting to lead (Lease {}/informer-controller)",
                args.leader_elect_namespace
            );
            tokio::select! {
                r = status.wait_for(|s| *s == Leadership::Leading) => { r?; }
                () = stop_signal() => {
                    // A standby stopped: a clean exit, as `informer elect` makes.
                    println!("{identity}: stopped before leading");
                    let _ = tx.send(());
                    tokio::task::block_in_place(|| factory.shutdown());
                    return Ok(true);
                }
            }
            println!("{identity}: leading");
            // Every write checks the lead first: a worker busy when the lead is lost, or
            // stalled past the renew deadline, must not write once another replica may.
            if let Some(StatusWriter(write)) = writer {
                let e = elector.clone();
                controller.set_status_writer(StatusWriter(Arc::new(move |d: &Deployment| {
                    if e.is_leader() {
                        write(d)
                    } else {
                        Err("not leading: status write skipped".to_owned())
                    }
                })));
            }
            (Some(elector), Some(tx))
        }
        _ => (None, None),
    };
    let lost = async {
        match &elector {
            Some(e) => {
                let mut status = e.watch();
                let _ = status.wait_for(|s| *s == Leadership::Lost).await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lost);
    let workers = controller.start_workers(usize::from(args.workers))?;
    let running = Instant::now();

    let stop = async {
        match args.duration {
            Some(d) => tokio::time::sleep(Duration::from_secs_f64(d.max(0.0))).await,
            None => stop_signal().await,
        }
    };
    let sims = match source {
        Source::Sims(s) => Some(s),
        Source::Cluster(_) => None,
    };
    let drive = async {
        match sims {
            Some(s) => s.drive(args.rate).await,
            None => std::future::pending().await,
        }
    };
    let status = async {
        if args.status_every <= 0.0 {
            return std::future::pending().await;
        }
        let mut tick = tokio::time::interval(Duration::from_secs_f64(args.status_every));
        tick.tick().await;
        loop {
            tick.tick().await;
            println!("{}", status_line(&controller, running));
        }
    };
    let outcome = tokio::select! {
        () = &mut lost => {
            // Another replica may act from now on: stop without draining.
            println!("leadership lost: stopping");
            controller.queue().shutdown();
            // Let the items in flight end (their writes are refused by now).
            tokio::task::block_in_place(|| workers.join());
            tokio::task::block_in_place(|| factory.shutdown());
            return Ok(false);
        }
        () = stop => Ok(()),
        r = drive => r,
        () = status => Ok(()),
    };
    let ran = running.elapsed();
    println!("stopping: draining the queue");

    // The drain runs only while this replica still leads: a loss during it stops at once.
    let drain = async {
        // With simulators: let the caches and handlers catch up with the last change first, so
        // the drained result can be checked against the truth.
        // The controller's own status writes are changes too: wait again while they move the
        // Deployments on, until the queue is idle at the servers' last change.
        if let Some(s) = sims {
            let wait = Duration::from_secs(60);
            loop {
                let (d_rv, p_rv) = (s.deployments.resource_version(), s.pods.resource_version());
                tokio::time::timeout(wait, d_informer.store().wait_for(d_rv)).await??;
                tokio::time::timeout(wait, p_informer.store().wait_for(p_rv)).await??;
                tokio::task::block_in_place(|| {
                    d_informer.flush();
                    p_informer.flush();
                });
                tokio::time::timeout(wait, async {
                    loop {
                        let q = controller.queue().stats();
                        if (q.depth, q.in_flight, q.delayed) == (0, 0, 0) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await?;
                if (s.deployments.resource_version(), s.pods.resource_version()) == (d_rv, p_rv) {
                    break;
                }
            }
        }
        // Against a cluster: let the caches reach what a fresh list says first.
        if let Source::Cluster(client) = source {
            let differ =
                settle_with_cluster(client, args, &d_informer, &p_informer, timeout).await?;
            if differ > 0 {
                println!(
                    "caches still differ from a fresh list by {differ} objects after {:.0} s",
                    timeout.as_secs_f64()
                );
            }
        }
        tokio::task::block_in_place(|| {
            d_informer.flush();
            p_informer.flush();
        });
        controller.queue().shutdown_with_drain_async().await;
        Ok::<_, Box<dyn Error>>(tokio::task::block_in_place(|| workers.join()))
    };
    let panicked = tokio::select! {
        r = drain => r?,
        () = &mut lost => {
            println!("leadership lost while draining: stopping");
            controller.queue().shutdown();
            tokio::task::block_in_place(|| factory.shutdown());
            return Ok(false);
        }
    };
    // The workers are done: give the Lease up so another replica leads at once.
    if let (Some(tx), Some(e)) = (stop_election, &elector) {
        let _ = tx.send(());
        let mut status = e.watch();
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            status.wait_for(|s| *s == Leadership::Stopped),
        )
        .await;
    }
    let drained = running.elapsed() - ran;

    let verified = match sims {
        Some(s) => {
            let mut expected = truth::expected(&s.deployments.truth(), &s.pods.truth())?;
            if let Some(ns) = &args.namespace {
                expected.retain(|k, _| k.namespace() == ns);
            }
            let written = if writes {
                truth::written_diff(&expected, &s.deployments.truth())?
            } else {
                None
            };
            match truth::diff(&expected, &controller.statuses()).or(written) {
                None => {
                    println!(
                        "verified: all {} deployment statuses equal the simulators' truth{}",
                        expected.len(),
                        if writes {
                            ", in the controller and as written to the server"
                        } else {
                            ""
                        }
                    );
                    true
                }
                Some(d) => {
                    println!("VERIFICATION FAILED: {d}");
                    false
                }
            }
        }
        None => true,
    };
    print_summary(
        &controller,
        &d_informer,
        &p_informer,
        ran,
        drained,
        panicked,
    );
    if args.json {
        let statuses: std::collections::BTreeMap<String, serde_json::Value> = controller
            .statuses()
            .into_iter()
            .map(|(k, s)| {
                let v = serde_json::json!({
                    "generation": s.generation,
                    "desired": s.desired,
                    "pods": s.pods,
                    "ready": s.ready,
                });
                (k.to_string(), v)
            })
            .collect();
        let report = serde_json::json!({
            "statuses": statuses,
            "deployments_cached": d_informer.store().len(),
            "pods_cached": p_informer.store().len(),
            "worker_panics": panicked,
        });
        println!("{report}");
    }
    if args.metrics {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        print!("{text}");
    }
    tokio::task::block_in_place(|| factory.shutdown());
    outcome?;
    Ok(verified && panicked == 0)
}

/// Lists Deployments and Pods from `client` and waits (up to `timeout`) until both caches
/// hold exactly those `(uid, resourceVersion)`s, relisting every 200 ms; returns by how many
/// objects they still differ (0 when they match).
async fn settle_with_cluster<L: ListerWatcher>(
    client: &kube::Client,
    args: &Args,
    deployments: &Arc<Informer<L>>,
    pods: &Arc<Informer<L>>,
    timeout: Duration,
) -> Result<usize, Box<dyn Error>> {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core};
    use kube::api::{Api, ListParams};
    type Versions = std::collections::BTreeMap<String, (String, String)>;
    fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    fn cached<L: ListerWatcher>(informer: &Informer<L>) -> Versions {
        let snap = informer.store().snapshot();
        snap.iter()
            .map(|(k, o)| {
                let v = (o.uid().to_owned(), o.resource_version().to_owned());
                (k.to_string(), v)
            })
            .collect()
    }
    fn listed<'a>(metas: impl Iterator<Item = &'a kube::api::ObjectMeta>) -> Versions {
        metas
            .map(|m| {
                let name = m.name.clone().unwrap_or_default();
                let key = match m.namespace.as_deref() {
                    Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
                    _ => name,
                };
                let v = (
                    m.uid.clone().unwrap_or_default(),
                    m.resource_version.clone().unwrap_or_default(),
                );
                (key, v)
            })
            .collect()
    }
    let ns = args.namespace.as_deref();
    let deadline = Instant::now() + timeout;
    loop {
        let d = api::<apps::Deployment>(client, ns)
            .list(&ListParams::default())
            .await?;
        let p = api::<core::Pod>(client, ns)
            .list(&ListParams::default())
            .await?;
        let want_d = listed(d.items.iter().map(|o| &o.metadata));
        let want_p = listed(p.items.iter().map(|o| &o.metadata));
        let differ = |want: &Versions, got: &Versions| {
            want.iter().filter(|(k, v)| got.get(*k) != Some(v)).count()
                + got.keys().filter(|k| !want.contains_key(*k)).count()
        };
        let n = differ(&want_d, &cached(deployments)) + differ(&want_p, &cached(pods));
        if n == 0 || Instant::now() >= deadline {
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn status_line(c: &Controller, since: Instant) -> String {
    let s = c.stats();
    let q = c.queue().stats();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    format!(
        "[{:>6.1}s] events: pods {} deployments {}  reconciles {} (errors {})  queue: depth {} in flight {} delayed {}  statuses {}",
        since.elapsed().as_secs_f64(),
        l(&s.pod_events),
        l(&s.deployment_events),
        l(&s.reconciles),
        l(&s.errors),
        q.depth,
        q.in_flight,
        q.delayed,
        c.statuses().len(),
    )
}

fn print_summary<L: ListerWatcher>(
    c: &Controller,
    deployments: &Arc<Informer<L>>,
    pods: &Arc<Informer<L>>,
    ran: Duration,
    drained: Duration,
    panicked: usize,
) {
    let statuses = c.statuses();
    let desired: i64 = statuses.values().map(|s| i64::from(s.desired)).sum();
    let owned: u64 = statuses.values().map(|s| u64::from(s.pods)).sum();
    let ready: u64 = statuses.values().map(|s| u64::from(s.ready)).sum();
    let available = statuses
        .values()
        .filter(|s| i64::from(s.ready) >= i64::from(s.desired))
        .count();
    let empty = statuses.values().filter(|s| s.pods == 0).count();
    let d_store = deployments.store().snapshot();
    let p_store = pods.store().snapshot();
    let orphans = p_store
        .iter()
        .filter(|(_, p)| deployment_of(p).is_none_or(|k| !d_store.contains_key(k.as_str())))
        .count();
    let s = c.stats();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let q = c.queue().stats();
    let secs = ran.as_secs_f64().max(1e-9);
    println!(
        "summary after {:.1} s (drain {:.0} ms):",
        secs,
        drained.as_secs_f64() * 1e3
    );
    println!(
        "  cache        {} deployments, {} pods ({} without a cached deployment)",
        d_store.len(),
        p_store.len(),
        orphans
    );
    println!(
        "  statuses     {} deployments: {} desired replicas, {} pods, {} ready; {} fully ready, {} without pods",
        statuses.len(),
        desired,
        owned,
        ready,
        available,
        empty
    );
    println!(
        "  events       pods {} ({:.0}/s, {} without a deployment owner), deployments {} ({:.0}/s)",
        l(&s.pod_events),
        l(&s.pod_events) as f64 / secs,
        l(&s.unowned_pod_events),
        l(&s.deployment_events),
        l(&s.deployment_events) as f64 / secs
    );
    println!(
        "  reconciles   {} ({:.0}/s; {} gone; {} status writes), errors {}, dropped {}, worker panics {}",
        l(&s.reconciles),
        l(&s.reconciles) as f64 / secs,
        l(&s.gone),
        l(&s.status_writes),
        l(&s.errors),
        l(&s.dropped),
        panicked
    );
    println!(
        "  queue        {} adds, {} retries ({} events per reconcile)",
        q.adds,
        q.retries,
        format_ratio(l(&s.pod_events) + l(&s.deployment_events), l(&s.reconciles))
    );
}

fn format_ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}", a as f64 / b as f64)
    }
}

/// Completes at Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `kill` and Kubernetes send first),
/// so that a leader gives its Lease up either way.
async fn stop_signal() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            r = tokio::signal::ctrl_c() => {
                if r.is_err() {
                    term.recv().await;
                }
            }
            _ = term.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}
