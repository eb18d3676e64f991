//! One small controller written twice: once with kube-runtime (`watcher` + `reflector` +
//! `Controller`), once with this crate (`KubeInformer` + `WorkQueue` + workers), so that a
//! kube-rs user sees what moves where. `tests/kube_migration.rs` runs both halves side by
//! side against `informer serve` and against a real kube-apiserver and checks that they decide
//! the same things.
//!
//! The controller reconciles the Deployments of one namespace (or all): each reconcile reads
//! the Deployment from the engine's cache and records its *decision*, `namespace/name →
//! (resourceVersion, spec.replicas, status.readyReplicas)` of the version it saw. Nothing is
//! written to the server.
//!
//! | kube-runtime                                  | informer                                                 |
//! |-----------------------------------------------|----------------------------------------------------------|
//! | `watcher(api, watcher::Config::default())`    | `KubeInformer::from_api(api, InformerConfig::default())` (its `events()` is a `watcher`-shaped stream) |
//! | `reflector::Store<K>` (`store.get(&ObjectRef)`) | `TypedLister<K>` (`lister.get_by_key(&key)`, `lister.get(ns, name)`) |
//! | `store.wait_until_ready()`                    | `informer.wait_for_cache_sync(timeout)`                  |
//! | `Controller::run(reconcile, error_policy, ctx)` | a `WorkQueue<ObjectKey>` registered as the handler (it enqueues every changed key), N workers that `get` a key, read the lister, `forget`/`add_rate_limited`, `done` |
//! | `Controller` concurrency                      | the number of workers                                    |
//! | `error_policy` → `Action::requeue(d)`         | `queue.add_rate_limited(key)` (per-key exponential backoff) |
//! | reconcile gets `Arc<K>`                       | a worker gets a key and reads the lister: the object may be gone |
//!
//! Deletions differ: kube-runtime never reconciles a deleted object (a `Controller` is
//! triggered by applied objects only, and skips a key whose object left the store before its
//! turn; cleanup is meant to go through finalizers, which write), so its half sweeps decisions
//! of keys gone from the store before it reports. Our workers see the key of
//! a deleted object, find nothing in the lister and forget the decision, as client-go
//! controllers do.
//!
//! The controller runs until its stdin reaches EOF, then waits (up to `--settle-timeout`
//! seconds) until its cache holds what a fresh list from the server says (uid and
//! resourceVersion per key) and every cached Deployment was last reconciled at its cached
//! version, prints a report (`--json`: one JSON line) and exits 0, or 1 if it never got there.
//!
//! Run, with `informer serve --template deployments --objects 50 --rate 20` in another
//! terminal (`cargo run --release --features cli -- serve ...`; it prints its URL):
//!
//! ```sh
//! cargo run --release --example kube_migration -- --engine informer --server http://127.0.0.1:PORT
//! cargo run --release --example kube_migration -- --engine kube-runtime --kubeconfig ~/.kube/config --namespace default
//! ```
//!
//! (Ctrl-D ends it. Against a server whose objects keep changing, the report may say that it
//! did not converge: the wait needs the server to be quiet for a moment.)

use std::collections::BTreeMap;
use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, ObjectMeta};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Command-line arguments.
#[derive(Debug, clap::Parser)]
#[command(about = "One Deployment controller, on kube-runtime or on informer")]
struct Args {
    /// Which machinery runs the controller.
    #[arg(long, value_enum)]
    engine: Engine,
    /// An API server without credentials (e.g. `informer serve`, `kubectl proxy`).
    #[arg(long, conflicts_with = "kubeconfig")]
    server: Option<String>,
    /// A kubeconfig file (default: kube's inference, `$KUBECONFIG` or in-cluster).
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Only this namespace (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Reconciles at once (kube-runtime's concurrency, our worker count).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    workers: u16,
    /// Seconds to wait, after stdin's EOF, for the cache and the decisions to catch up.
    #[arg(long, default_value_t = 60)]
    settle_timeout: u64,
    /// Print the report as one JSON line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Engine {
    KubeRuntime,
    Informer,
}

/// What a reconcile decided for one Deployment, from the version it saw.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Decision {
    resource_version: String,
    replicas: Option<i32>,
    ready_replicas: Option<i32>,
}

/// The controller's state, shared by every reconcile (kube-runtime's `Context`).
#[derive(Debug, Default)]
struct Ctx {
    decisions: Mutex<BTreeMap<String, Decision>>,
    reconciles: AtomicU64,
}

impl Ctx {
    /// The reconcile proper, the same for both engines.
    fn reconcile(&self, d: &Deployment) {
        let decision = Decision {
            resource_version: d.metadata.resource_version.clone().unwrap_or_default(),
            replicas: d.spec.replicas,
            ready_replicas: d.status.as_ref().and_then(|s| s.ready_replicas),
        };
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        self.decisions().insert(key(&d.metadata), decision);
    }

    fn decisions(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Decision>> {
        self.decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// `(uid, resourceVersion)` by `namespace/name`.
type Versions = BTreeMap<String, (String, String)>;

fn key(m: &ObjectMeta) -> String {
    let name = m.name.as_deref().unwrap_or_default();
    match m.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

fn versions<'a>(metas: impl IntoIterator<Item = &'a ObjectMeta>) -> Versions {
    let v = |m: &ObjectMeta| {
        let uid = m.uid.clone().unwrap_or_default();
        (uid, m.resource_version.clone().unwrap_or_default())
    };
    metas.into_iter().map(|m| (key(m), v(m))).collect()
}

// ---- kube-runtime ----------------------------------------------------------------------

mod with_kube_runtime {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::StreamExt;
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::Api;
    use kube_runtime::controller::{self, Action, Controller};
    use kube_runtime::watcher;

    use super::{Args, Ctx, Report, settle, stdin_eof, versions};

    async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, Infallible> {
        ctx.reconcile(&d);
        Ok(Action::await_change())
    }

    fn error_policy(_: Arc<Deployment>, e: &Infallible, _: Arc<Ctx>) -> Action {
        match *e {}
    }

    pub(super) async fn run(api: Api<Deployment>, ctx: Arc<Ctx>, args: &Args) -> Report {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let controller = Controller::new(api.clone(), watcher::Config::default())
            .with_config(controller::Config::default().concurrency(args.workers))
            .graceful_shutdown_on(async {
                let _ = stopped.await;
            });
        let store = controller.store();
        let running = tokio::spawn(
            controller
                .run(reconcile, error_policy, ctx.clone())
                .for_each(|r| async move {
                    match r {
                        // Deleted between its trigger and its turn: nothing to do.
                        Err(controller::Error::ObjectNotFound(_)) | Ok(_) => {}
                        Err(e) => eprintln!("kube-runtime: {e}"),
                    }
                }),
        );
        // Polled, not awaited once: in kube-runtime 5.0 the store's readiness is a oneshot with
        // one waker slot, which the Controller's own wait takes, so this task would never wake.
        let ready = Duration::from_millis(50);
        while tokio::time::timeout(ready, store.wait_until_ready())
            .await
            .is_err()
        {}
        println!("synced: {} deployments", store.len());
        stdin_eof().await;
        let report = settle(&api, &ctx, args, || {
            let cached = versions(store.state().iter().map(|d| &d.metadata));
            // No reconcile for deleted objects: forget their decisions here.
            ctx.decisions().retain(|k, _| cached.contains_key(k));
            cached
        })
        .await;
        let _ = stop.send(());
        let _ = running.await;
        report
    }
}

// ---- informer --------------------------------------------------------------------------

mod with_informer {
    use std::error::Error;
    use std::sync::Arc;
    use std::time::Duration;

    use informer::{
        HandlerOptions, InformerConfig, KubeInformer, ObjectKey, TypedLister, WorkQueue,
    };
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::Api;

    use super::{Args, Ctx, Report, settle, stdin_eof};

    /// A worker: takes a key, reconciles it from the lister, marks it done.
    async fn worker(queue: WorkQueue<ObjectKey>, lister: TypedLister<Deployment>, ctx: Arc<Ctx>) {
        while let Ok(key) = queue.get_async().await {
            match lister.get_by_key(&key) {
                Ok(Some(d)) => {
                    ctx.reconcile(&d);
                    queue.forget(&key);
                }
                Ok(None) => {
                    ctx.decisions().remove(key.as_str());
                    queue.forget(&key);
                }
                Err(e) => {
                    eprintln!("informer: {key}: {e}");
                    queue.add_rate_limited(key.clone());
                }
            }
            queue.done(&key);
        }
    }

    pub(super) async fn run(
        api: Api<Deployment>,
        ctx: Arc<Ctx>,
        args: &Args,
    ) -> Result<Report, Box<dyn Error>> {
        let informer = KubeInformer::from_api(api.clone(), InformerConfig::default());
        let queue = WorkQueue::<ObjectKey>::builder()
            .name("deployments")
            .build();
        // The queue is the handler: every add, update and delete enqueues the object's key.
        let _registration =
            informer.add_event_handler(queue.clone(), HandlerOptions::new().name("deployments"))?;
        informer.start(&tokio::runtime::Handle::current());
        informer
            .wait_for_cache_sync(Duration::from_secs(30))
            .await?;
        println!("synced: {} deployments", informer.lister().len());
        let workers: Vec<_> = (0..args.workers)
            .map(|_| tokio::spawn(worker(queue.clone(), informer.lister(), ctx.clone())))
            .collect();
        stdin_eof().await;
        let report = settle(&api, &ctx, args, || {
            let snapshot = informer.store().snapshot();
            let v = |o: &informer::Object| (o.uid().to_owned(), o.resource_version().to_owned());
            snapshot
                .iter()
                .map(|(k, o)| (k.to_string(), v(o)))
                .collect()
        })
        .await;
        queue.shutdown_with_drain_async().await;
        for w in workers {
            let _ = w.await;
        }
        informer.shutdown_async().await;
        Ok(report)
    }
}

// ---- shared: stop, settle, report -------------------------------------------------------

/// Resolves when stdin reaches EOF (a thread reads it: tokio's stdin would need a feature).
async fn stdin_eof() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// What the controller prints at the end.
#[derive(Debug, serde::Serialize)]
struct Report {
    engine: &'static str,
    /// Deployments in the cache.
    objects: usize,
    reconciles: u64,
    /// The cache equals a fresh list, and every cached key was reconciled at its version.
    converged: bool,
    /// Keys still differing when the wait ended (0 when converged).
    behind: usize,
    settle_seconds: f64,
    decisions: BTreeMap<String, Decision>,
}

/// Lists the Deployments every 100 ms until `cached()` equals the list and every cached
/// key's decision was made at the cached resourceVersion (with no decision left for a key no
/// longer cached), or until `--settle-timeout`.
async fn settle(
    api: &Api<Deployment>,
    ctx: &Ctx,
    args: &Args,
    cached: impl Fn() -> Versions,
) -> Report {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.settle_timeout);
    loop {
        let listed = match api.list(&ListParams::default()).await {
            Ok(l) => Some(versions(l.items.iter().map(|d| &d.metadata))),
            Err(e) => {
                eprintln!("list: {e}");
                None
            }
        };
        let cache = cached();
        let decisions = ctx.decisions().clone();
        let stale = cache
            .iter()
            .filter(|(k, (_, rv))| decisions.get(*k).map(|d| &d.resource_version) != Some(rv))
            .count()
            + decisions.keys().filter(|k| !cache.contains_key(*k)).count();
        let behind = stale
            + listed.as_ref().map_or(1, |l| {
                l.iter().filter(|(k, v)| cache.get(*k) != Some(v)).count()
                    + cache.keys().filter(|k| !l.contains_key(*k)).count()
            });
        if behind == 0 || Instant::now() >= deadline {
            return Report {
                engine: match args.engine {
                    Engine::KubeRuntime => "kube-runtime",
                    Engine::Informer => "informer",
                },
                objects: cache.len(),
                reconciles: ctx.reconciles.load(Ordering::Relaxed),
                converged: behind == 0,
                behind,
                settle_seconds: started.elapsed().as_secs_f64(),
                decisions,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn client(args: &Args) -> Result<kube::Client, Box<dyn Error>> {
    let config = match (&args.server, &args.kubeconfig) {
        (Some(url), _) => kube::Config::new(url.parse()?),
        (None, Some(path)) => {
            let kubeconfig = Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        (None, None) => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

async fn run(args: &Args) -> Result<Report, Box<dyn Error>> {
    let client = client(args).await?;
    let api: Api<Deployment> = match &args.namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let ctx = Arc::new(Ctx::default());
    match args.engine {
        Engine::KubeRuntime => Ok(with_kube_runtime::run(api, ctx, args).await),
        Engine::Informer => with_informer::run(api, ctx, args).await,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Args = clap::Parser::parse();
    let report = match run(&args).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kube_migration: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!(
            "{}: {} deployments, {} reconciles, {} after {:.2} s",
            report.engine,
            report.objects,
            report.reconciles,
            if report.converged {
                "converged".to_owned()
            } else {
                format!("NOT converged ({} keys behind)", report.behind)
            },
            report.settle_seconds
        );
        for (k, d) in &report.decisions {
            let n = |v: Option<i32>| v.map_or("-".to_owned(), |v| v.to_string());
            println!(
                "  {k}  rv {}  replicas {}  ready {}",
                d.resource_version,
                n(d.replicas),
                n(d.ready_replicas)
            );
        }
    }
    if report.converged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
