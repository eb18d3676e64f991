//! `informer flood`: the whole pipeline against the embedded simulated API server. Objects are
//! stamped from real fixtures, listed and watched through the real wire format, flooded with
//! creates/updates/deletes, and at the end the store and every handler's view are compared
//! with the simulator's truth.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use informer::client::{ApiResource, ClientOptions, HttpListerWatcher, discover};
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::informer::{HandlerOptions, Informer, InformerConfig};
use informer::object::decode_list;
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::reflector::{ListOptions, ListerWatcher};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{FloodMix, SimConfig, SimServer, Truth};

use super::sim_args::{SimFlags, Template, fixtures_dir, load_templates};
use informer::store::StoreConfig;
use serde_json::json;

/// How the informer reaches the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// `SimServer` as the `ListerWatcher` (no sockets).
    InProcess,
    /// `HttpListerWatcher` over a loopback socket to `informer serve` (in this process unless
    /// `--server` is given).
    Http,
}

/// What the HTTP client accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Accept {
    /// `application/vnd.kubernetes.protobuf, application/json`.
    Protobuf,
    /// `application/json`.
    Json,
}

/// What a slow or lagging handler does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Policy {
    /// Buffer without bound (client-go's behaviour).
    Unbounded,
    /// Backpressure: at most 64 batches buffered per handler.
    Block,
    /// Keep only the latest notification per key while behind.
    Coalesce,
}

/// Arguments of `informer flood`.
#[derive(Debug, clap::Args)]
pub(crate) struct FloodArgs {
    /// Objects the flood keeps alive (it creates up to this many, then mostly updates); at
    /// most 10 million.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    objects: u64,
    /// Changes (ADDED/MODIFIED/DELETED events) to make after the initial list; at most 10
    /// billion.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000_000))]
    events: u64,
    /// Event handlers (listeners), each on its own thread keeping its own view; at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=1024))]
    handlers: u64,
    /// Object template.
    #[arg(long, value_enum, default_value_t = Template::HeadPod)]
    template: Template,
    /// Overflow policy of every handler.
    #[arg(long, value_enum, default_value_t = Policy::Unbounded)]
    policy: Policy,
    /// Percent of changes that are updates once the object count is reached (the rest are
    /// creates and deletes in equal parts).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u32).range(0..=100))]
    update_percent: u32,
    /// Store shards.
    #[arg(long, default_value_t = 16)]
    shards: usize,
    /// Seed of the simulator (same seed, same objects and events).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory of the fixtures (default: ../shared/fixtures).
    #[arg(long)]
    fixtures: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// How the informer reaches the simulator: method calls in one process, or HTTP over a
    /// loopback socket (protobuf or JSON per `--accept`).
    #[arg(long, value_enum, default_value_t = Transport::InProcess)]
    transport: Transport,
    /// With `--transport http`: use a running `informer serve` at this URL instead of
    /// starting one (its objects and template are its own; start it with `--rate 0`).
    #[arg(long)]
    server: Option<String>,
    /// With `--transport http`: what the client accepts.
    #[arg(long, value_enum, default_value_t = Accept::Protobuf)]
    accept: Accept,
    #[command(flatten)]
    sim: SimFlags,
    /// Do not draw a progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Changes made per generator step; the time of each step is recorded for latencies.
/// (At least this many; runs of over 256 million events use longer steps so that the table of
/// step times stays within a million entries.)
const STEP: u64 = 256;

/// When each generator step finished, indexed by step: a handler looks up the step of the
/// resourceVersion it sees to measure server-change-to-handler latency.
struct Clock {
    start: Instant,
    /// Changes per step.
    step: u64,
    first_rv: AtomicU64,
    step_done_ns: Vec<AtomicU64>,
}

impl Clock {
    fn latency_ns(&self, rv: u64) -> Option<u64> {
        let first = self.first_rv.load(Ordering::Acquire);
        if first == 0 || rv < first {
            return None;
        }
        let step = ((rv - first) / self.step) as usize;
        let done = self.step_done_ns.get(step)?.load(Ordering::Acquire);
        if done == 0 {
            return None;
        }
        let now = self.start.elapsed().as_nanos() as u64;
        Some(now.saturating_sub(done))
    }
}

/// A handler's view of the world: what a controller rebuilding state from notifications holds.
struct View {
    objects: HashMap<ObjectKey, (String, String)>,
    latency: Histogram<u64>,
    notifications: u64,
}

struct ViewHandler {
    view: Arc<Mutex<View>>,
    clock: Arc<Clock>,
}

impl ViewHandler {
    fn record(&self, view: &mut View, obj: &Object) {
        view.notifications += 1;
        if let Some(ns) =
            parse_resource_version(obj.resource_version()).and_then(|rv| self.clock.latency_ns(rv))
        {
            let _ = view.latency.record(ns.max(1));
        }
    }
}

impl EventHandler for ViewHandler {
    fn on_add(&mut self, obj: &Arc<Object>, _is_in_initial_list: bool) {
        let mut v = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        self.record(&mut v, obj);
        v.objects.insert(
            obj.key(),
            (obj.uid().to_owned(), obj.resource_version().to_owned()),
        );
    }

    fn on_update(&mut self, _old: &Arc<Object>, new: &Arc<Object>) {
        let mut v = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        self.record(&mut v, new);
        v.objects.insert(
            new.key(),
            (new.uid().to_owned(), new.resource_version().to_owned()),
        );
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        let mut v = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        self.record(&mut v, obj.object());
        v.objects.remove(&obj.key());
    }
}

fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs the command; returns the process exit code (1 when verification fails).
pub(crate) fn run(args: &FloodArgs) -> i32 {
    match run_inner(args) {
        Ok(ok) => i32::from(!ok),
        Err(e) => {
            eprintln!("informer flood: {e}");
            2
        }
    }
}

/// Where the flood's changes are made and its truth read.
enum Source {
    /// The simulator in this process.
    Local(SimServer),
    /// A running `informer serve`: changes through `POST /informer/v1/flood`, truth from an
    /// exact list at the store's resourceVersion.
    Remote(Box<Remote>),
}

/// A running `informer serve` reached over HTTP.
struct Remote {
    client: kube::Client,
    lw: HttpListerWatcher,
}

impl Source {
    async fn resource_version(&self) -> Result<u64, String> {
        match self {
            Source::Local(sim) => Ok(sim.resource_version()),
            Source::Remote(r) => {
                let v = control(&r.client, http::Method::GET, "/informer/v1/stats").await?;
                Ok(v["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0))
            }
        }
    }

    async fn flood(&self, n: u64) -> Result<u64, String> {
        match self {
            Source::Local(sim) => sim.flood(n).await.map_err(|e| e.to_string()),
            Source::Remote(r) => {
                let path = format!("/informer/v1/flood?events={n}");
                let v = control(&r.client, http::Method::POST, &path).await?;
                v["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("POST {path}: no resourceVersion in {v}"))
            }
        }
    }

    /// The server's objects at `rv` (remote) or now (local).
    async fn truth(&self, rv: u64) -> Result<Truth, String> {
        match self {
            Source::Local(sim) => Ok(sim.truth()),
            Source::Remote(r) => {
                let mut opts = ListOptions {
                    resource_version: Some(rv.to_string()),
                    resource_version_match: Some("Exact".into()),
                    limit: Some(500),
                    ..Default::default()
                };
                let mut objects = std::collections::BTreeMap::new();
                loop {
                    let page = r.lw.list(&opts).await.map_err(|e| e.to_string())?;
                    let list = decode_list(page).map_err(|e| e.to_string())?;
                    for o in list.items {
                        objects.insert(o.key(), Arc::new(o));
                    }
                    if list.continue_token.is_empty() {
                        break;
                    }
                    opts.continue_token = Some(list.continue_token);
                    opts.resource_version = None;
                    opts.resource_version_match = None;
                }
                Ok(Truth {
                    resource_version: rv,
                    objects,
                })
            }
        }
    }
}

/// A request to the simulator's control endpoints; the JSON answer.
async fn control(
    client: &kube::Client,
    method: http::Method,
    path: &str,
) -> Result<serde_json::Value, String> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    let resp = client.send(req).await.map_err(|e| format!("{path}: {e}"))?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "{path}: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{path}: {e}"))
}

fn run_inner(args: &FloodArgs) -> Result<bool, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let config = InformerConfig {
        store: StoreConfig::new().shards(args.shards),
        ..Default::default()
    };
    if args.transport == Transport::InProcess && args.server.is_none() {
        let (sim, _) = build_sim(args)?;
        let informer = Informer::new(sim.clone(), config);
        return run_pipeline(args, &runtime, informer, Source::Local(sim), "in-process");
    }
    // HTTP: a server in this process on a loopback port, or the one named by --server.
    let mut handle: Option<ServerHandle> = None;
    let (url, local) = match &args.server {
        Some(url) => (url.clone(), None),
        None => {
            let (sim, twins) = build_sim(args)?;
            let mut sc = ServerConfig::default();
            if let Some(t) = twins {
                sc = sc.json_twins(t);
            }
            let h = runtime
                .block_on(serve(
                    sim.clone(),
                    sc,
                    "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
                ))
                .map_err(|e| e.to_string())?;
            let url = h.url();
            handle = Some(h);
            (url, Some(sim))
        }
    };
    let client = runtime
        .block_on(
            ClientOptions {
                server: Some(url.clone()),
                ..Default::default()
            }
            .client(),
        )
        .map_err(|e| e.to_string())?;
    let resource: ApiResource = runtime
        .block_on(discover(&client, "pods"))
        .map_err(|e| e.to_string())?
        .resource
        .with_protobuf(args.accept == Accept::Protobuf);
    let lw = HttpListerWatcher::new(client.clone(), resource);
    let source = match local {
        Some(sim) => Source::Local(sim),
        None => Source::Remote(Box::new(Remote {
            client,
            lw: lw.clone(),
        })),
    };
    let informer = Informer::new(lw, config);
    let label = format!("http {} ({:?})", url, args.accept);
    let ok = run_pipeline(args, &runtime, informer, source, &label);
    if let Some(h) = handle {
        runtime.block_on(h.shutdown());
    }
    ok
}

/// The simulator of an in-process flood, and the JSON twins of its templates.
fn build_sim(args: &FloodArgs) -> Result<(SimServer, Option<Vec<Object>>), String> {
    let dir = fixtures_dir(args.fixtures.as_ref())?;
    let (templates, twins) = load_templates(args.template, &dir)?;
    let rest = 100 - args.update_percent;
    let objects = args.objects as usize;
    let mix = FloodMix {
        target_objects: objects,
        create: rest.div_ceil(2),
        update: args.update_percent,
        delete: rest / 2,
    };
    let base = SimConfig::new(templates)
        .seed(args.seed)
        .mix(mix)
        .initial_objects(objects)
        .history_window(10_000)
        .flow_control(true)
        .update_template(args.template.update_template());
    let sim = SimServer::new(args.sim.apply(base)).map_err(|e| e.to_string())?;
    args.sim.arm(&sim);
    Ok((sim, twins))
}

fn run_pipeline<L: ListerWatcher>(
    args: &FloodArgs,
    runtime: &tokio::runtime::Runtime,
    informer: Informer<L>,
    source: Source,
    transport: &str,
) -> Result<bool, String> {
    let handlers = args.handlers as usize;
    let step_len = STEP.max(args.events.div_ceil(1_000_000));
    let steps = args.events.div_ceil(step_len) as usize + 1;
    let clock = Arc::new(Clock {
        start: Instant::now(),
        step: step_len,
        first_rv: AtomicU64::new(0),
        step_done_ns: (0..steps).map(|_| AtomicU64::new(0)).collect(),
    });
    let policy = match args.policy {
        Policy::Unbounded => OverflowPolicy::Unbounded,
        Policy::Block => OverflowPolicy::Block { capacity: 64 },
        Policy::Coalesce => OverflowPolicy::CoalesceByKey,
    };
    let mut views = Vec::new();
    for i in 0..handlers {
        let view = Arc::new(Mutex::new(View {
            objects: HashMap::new(),
            latency: Histogram::new(3).map_err(|e| e.to_string())?,
            notifications: 0,
        }));
        informer
            .add_event_handler_with_options(
                ViewHandler {
                    view: view.clone(),
                    clock: clock.clone(),
                },
                HandlerOptions::new()
                    .name(format!("handler-{i}"))
                    .policy(policy),
            )
            .map_err(|e| e.to_string())?;
        views.push(view);
    }

    informer.start(runtime.handle());
    let synced = runtime.block_on(informer.wait_for_cache_sync(Duration::from_secs(120)));
    if !synced {
        return Err("the informer did not sync within 120 s".into());
    }
    let list_done = clock.start.elapsed();

    let show_bar = !(args.no_progress || args.json);
    let bar = {
        // Drawn only once the flood has run for a second (short runs stay quiet).
        let b = ProgressBar::with_draw_target(Some(args.events), ProgressDrawTarget::hidden());
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} flood [{elapsed_precise}] {bar:40} {pos}/{len} events ({per_sec})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };

    // The flood: a step at a time, recording when each step's changes exist on the server.
    let flood_start = Instant::now();
    let first_rv = runtime.block_on(source.resource_version())? + 1;
    clock.first_rv.store(first_rv, Ordering::Release);
    let mut made = 0u64;
    let mut step = 0usize;
    runtime.block_on(async {
        while made < args.events {
            let n = step_len.min(args.events - made);
            source.flood(n).await?;
            clock.step_done_ns[step]
                .store(clock.start.elapsed().as_nanos() as u64, Ordering::Release);
            step += 1;
            made += n;
            if show_bar && bar.is_hidden() && flood_start.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.set_position(made);
        }
        Ok::<(), String>(())
    })?;
    let generated = flood_start.elapsed();

    // Wait until the store reflects the server's last change and every handler caught up.
    let target = runtime.block_on(source.resource_version())?;
    let store = informer.store();
    let caught_up = store.wait_for_blocking(target, Duration::from_secs(120));
    informer.flush();
    let elapsed = flood_start.elapsed();
    bar.finish_and_clear();

    // Verification against the truth (at the store's version: the server may have moved on).
    let mut problems = Vec::new();
    if caught_up.is_err() {
        problems.push(format!(
            "store stuck at resourceVersion {} (server at {target})",
            store.resource_version(),
        ));
    }
    let snapshot = store.snapshot();
    let truth = runtime.block_on(source.truth(snapshot.resource_version().max(target)))?;
    let in_store: std::collections::BTreeMap<ObjectKey, (String, String)> = snapshot
        .iter()
        .map(|(k, o)| {
            (
                k.clone(),
                (o.uid().to_owned(), o.resource_version().to_owned()),
            )
        })
        .collect();
    if let Some(d) = truth.diff(&in_store) {
        problems.push(format!("store: {d}"));
    }
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut per_handler = Vec::new();
    for (i, view) in views.iter().enumerate() {
        let v = view.lock().unwrap_or_else(PoisonError::into_inner);
        let got: std::collections::BTreeMap<ObjectKey, (String, String)> = v
            .objects
            .iter()
            .map(|(k, x)| (k.clone(), x.clone()))
            .collect();
        if let Some(d) = truth.diff(&got) {
            problems.push(format!("handler-{i}: {d}"));
        }
        let _ = latency.add(&v.latency);
        per_handler.push(v.notifications);
    }
    let listener_stats: Vec<_> = informer
        .distributor()
        .listeners()
        .iter()
        .map(|l| l.stats())
        .collect();
    let rm = informer.reflector_metrics();
    let watch_bytes = rm
        .as_ref()
        .map_or(0, |m| m.watch_bytes.load(Ordering::Relaxed));
    let relists = rm.as_ref().map_or(0, |m| m.relists.load(Ordering::Relaxed));
    let watches = rm.as_ref().map_or(0, |m| m.watches.load(Ordering::Relaxed));
    let secs = elapsed.as_secs_f64().max(1e-9);
    let ok = problems.is_empty();
    let q = |p: f64| Duration::from_nanos(latency.value_at_quantile(p));
    informer.shutdown();

    if args.json {
        let report = json!({
            "template": format!("{:?}", args.template),
            "transport": transport,
            "objects": truth.objects.len(),
            "events": args.events,
            "handlers": args.handlers,
            "initial_list_seconds": list_done.as_secs_f64(),
            "seconds": secs,
            "generate_seconds": generated.as_secs_f64(),
            "events_per_second": args.events as f64 / secs,
            "watch_megabytes_per_second": watch_bytes as f64 / 1e6 / secs,
            "watch_bytes": watch_bytes,
            "latency_ns": {"p50": latency.value_at_quantile(0.5), "p99": latency.value_at_quantile(0.99),
                           "p999": latency.value_at_quantile(0.999), "max": latency.max(), "samples": latency.len()},
            "watches": watches,
            "relists": relists,
            "per_handler": listener_stats.iter().zip(&per_handler).map(|(s, n)| json!({
                "notifications": n, "max_pending": s.max_pending, "panics": s.panics})).collect::<Vec<_>>(),
            "peak_rss_bytes": peak_rss_bytes(),
            "verified": ok,
            "problems": problems,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        println!(
            "flood: {} events over {} objects ({:?} template), {} handlers ({:?})",
            args.events,
            truth.objects.len(),
            args.template,
            args.handlers,
            args.policy
        );
        println!("  transport:          {transport}");
        println!("  initial list:       {:.2} s", list_done.as_secs_f64());
        println!(
            "  throughput:         {:.0} events/s, {:.1} MB/s of watch stream ({:.2} s)",
            args.events as f64 / secs,
            watch_bytes as f64 / 1e6 / secs,
            secs
        );
        println!(
            "  handler latency:    p50 {:?}  p99 {:?}  p999 {:?}  (server change → handler, {} samples)",
            q(0.5),
            q(0.99),
            q(0.999),
            latency.len()
        );
        println!("  watches:            {watches} opened, {relists} relists");
        for (i, (s, n)) in listener_stats.iter().zip(&per_handler).enumerate() {
            println!(
                "  handler-{i}:          {n} notifications, max pending {}, panics {}",
                s.max_pending, s.panics
            );
        }
        if let Some(rss) = peak_rss_bytes() {
            println!(
                "  peak RSS:           {:.1} MiB",
                rss as f64 / (1024.0 * 1024.0)
            );
        }
        if ok {
            println!(
                "  verified:           store and all {} handler views equal the server's {} objects at resourceVersion {}",
                args.handlers,
                truth.objects.len(),
                truth.resource_version
            );
        } else {
            println!("  VERIFICATION FAILED:");
            for p in &problems {
                println!("    {p}");
            }
        }
    }
    Ok(ok)
}
