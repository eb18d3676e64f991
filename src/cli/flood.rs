//! `informer flood`: the whole pipeline against the embedded simulated API server. Objects are
//! stamped from real fixtures, listed and watched through the real wire format, flooded with
//! creates/updates/deletes, and at the end the store and every handler's view are compared
//! with the simulator's truth.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use informer::client::{ApiResource, ClientOptions, HttpListerWatcher, discover};
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::{DeltaObject, FifoKind};
use informer::informer::{HandlerOptions, Informer, InformerConfig};
use informer::object::{
    DEFAULT_FRAME_LIMIT, Object, ObjectKey, decode_list, parse_resource_version,
};
use informer::reflector::{ListOptions, ListerWatcher, ReflectorConfig};
use informer::server::{ServerConfig, ServerHandle, serve};
use informer::sim::{
    ErrorAnswer, Fault, FloodMix, SimConfig, SimServer, StreamFault, Truth, diff_views,
};
use informer::store::StoreConfig;
use informer::trace::{
    RecordingListerWatcher, ReplayListerWatcher, TraceReader, TraceWriter, expected_state,
};
use serde_json::json;

use super::sim_args::{Format, SimFlags, Template, fixtures_dir, load_templates};

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

/// The informer's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Fifo {
    /// Per-key delta lists (client-go DeltaFIFO).
    Delta,
    /// Every change in order, relists applied atomically (client-go RealFIFO).
    Real,
}

/// Arguments of `informer flood`.
#[derive(Debug, clap::Args)]
pub(crate) struct FloodArgs {
    /// Objects the flood keeps alive (it creates up to this many, then mostly updates); at
    /// most 10 million.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    objects: u64,
    /// Changes (ADDED/MODIFIED/DELETED events) to make after the initial list; at most 10
    /// billion (default 500 000 unless `--duration` is given).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=10_000_000_000))]
    events: Option<u64>,
    /// Flood for this many seconds instead of a number of events.
    #[arg(long, conflicts_with = "events", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Changes per second the generator aims at (default: as fast as the pipeline takes them).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
    /// Event handlers (listeners), each on its own thread keeping its own view; at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=1024))]
    handlers: u64,
    /// How many of the handlers are slow (the last ones): each spends `--slow-handler-delay`
    /// per notification.
    #[arg(long, default_value_t = 0)]
    slow_handlers: u64,
    /// Time a slow handler spends per notification (`50us`, `2ms`, `0.5s`). Sleeps are
    /// taken once at least 1 ms is owed, so the average cost per notification is exact even
    /// below the OS sleep granularity.
    #[arg(long, default_value = "100us", value_parser = parse_delay)]
    slow_handler_delay: Duration,
    /// Object template.
    #[arg(long, value_enum, default_value_t = Template::HeadPod)]
    template: Template,
    /// Wire encoding the simulator serves (and the informer decodes).
    #[arg(long, value_enum, default_value_t = Format::Protobuf)]
    format: Format,
    /// Extra labels on every object.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    labels: u32,
    /// Annotations on every object.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    annotations: u32,
    /// Overflow policy of every handler.
    #[arg(long, value_enum, default_value_t = Policy::Unbounded)]
    policy: Policy,
    /// The informer's queue.
    #[arg(long, value_enum, default_value_t = Fifo::Delta)]
    fifo: Fifo,
    /// Percent of changes that are updates once the object count is reached (the rest are
    /// creates and deletes in equal parts).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u32).range(0..=100))]
    update_percent: u32,
    /// Relative weights `CREATE:UPDATE:DELETE` of changes once the object count is reached
    /// (e.g. `10:80:10`); replaces `--update-percent`.
    #[arg(long, conflicts_with = "update_percent", value_parser = parse_mix)]
    mix: Option<(u32, u32, u32)>,
    /// Store shards.
    #[arg(long, default_value_t = 16)]
    shards: usize,
    /// Seed of the simulator (same seed, same objects and events).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Inject a fault every this many events, cycling through every one-shot fault of the
    /// simulator (`informer::sim::Fault::catalogue`: list and watch answers 410, 429, 500,
    /// too-large, too-large-legacy, refused; stream close, 410, corrupt, oversized, stall,
    /// reset), each list or watch fault followed by a stream fault that makes the reflector
    /// list or watch again so that it fires. A fault is injected only once the previous one
    /// fired, and the flood waits for that (at most 60 s) rather than run more than this many
    /// events past a fault that has not fired: faults come every this many events however long
    /// recoveries take. Needs the simulator in this process (not `--server`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    fault_every: Option<u64>,
    /// `retryAfterSeconds` of the 429 answers that `--fault-every` injects (the catalogue's
    /// `list:429:1` and `watch:429:1`) and of the simulator's too-large answers (default 1, as
    /// API servers send). 0 sends none, which client-go takes as no suggestion: the reflector
    /// waits its own backoff only. A stress run's knob: whole seconds of waiting per fault add
    /// up over hundreds of faults.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=3600))]
    fault_retry_after: Option<u32>,
    /// Reflector watch timeout in seconds (client-go's 5 min by default; 1 s with
    /// `--fault-every`, so that a stalled stream costs at most 2 s).
    #[arg(long, value_parser = parse_seconds)]
    watch_timeout: Option<Duration>,
    /// Largest reflector backoff in seconds (client-go's 30 s by default; 0.1 s with
    /// `--fault-every`: faults every few seconds never let the backoff reset, and at 30 s (or
    /// even 1 s, plus jitter) the flood would spend its time waiting; the first backoff is then
    /// 10 ms instead of 800 ms).
    #[arg(long, value_parser = parse_seconds)]
    backoff_max: Option<Duration>,
    /// Write the stream the informer consumed to this trace file (`proto/trace.proto`), for
    /// `informer replay`.
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
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

/// Arguments of `informer replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// A trace written by `informer flood --record`.
    file: std::path::PathBuf,
    /// Event handlers, each keeping its own view; at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=1024))]
    handlers: u64,
    /// Overflow policy of every handler.
    #[arg(long, value_enum, default_value_t = Policy::Unbounded)]
    policy: Policy,
    /// Store shards.
    #[arg(long, default_value_t = 16)]
    shards: usize,
    /// Largest reflector backoff in seconds after a recorded error (default 0.1 s; the first
    /// backoff is 10 ms: there is no server to spare).
    #[arg(long, value_parser = parse_seconds)]
    backoff_max: Option<Duration>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `SECS` (fractional allowed) as a duration.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    Duration::try_from_secs_f64(v).map_err(|e| format!("{s:?}: {e}"))
}

/// `NUMBER UNIT` with UNIT one of `ns`, `us`, `µs`, `ms`, `s`.
fn parse_delay(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?}: a unit is needed (ns, us, ms, s)"))?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|e| format!("{s:?}: {e}"))?;
    let secs = match unit.trim() {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        other => return Err(format!("{s:?}: unknown unit {other:?} (ns, us, ms, s)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// `C:U:D` relative weights, not all zero.
fn parse_mix(s: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [c, u, d] = parts.as_slice() else {
        return Err(format!(
            "{s:?}: expected CREATE:UPDATE:DELETE weights, e.g. 10:80:10"
        ));
    };
    let n = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|e| format!("{s:?}: {x:?}: {e}"))
    };
    let (c, u, d) = (n(c)?, n(u)?, n(d)?);
    if c.saturating_add(u).saturating_add(d) == 0 {
        return Err(format!("{s:?}: the weights are all zero"));
    }
    Ok((c, u, d))
}

/// Changes made per generator step; the time of each step is recorded for latencies.
const STEP: u64 = 256;

/// Entries of the step-time table (8 MiB): runs of more steps (over 268 million events at 256
/// per step) keep flooding but record no latency samples past it.
const MAX_STEPS: usize = 1 << 20;

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
    fn new(step: u64, steps: usize) -> Self {
        Clock {
            start: Instant::now(),
            step,
            first_rv: AtomicU64::new(0),
            step_done_ns: (0..steps).map(|_| AtomicU64::new(0)).collect(),
        }
    }

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

    fn mark(&self, step: usize) {
        if let Some(s) = self.step_done_ns.get(step) {
            s.store(self.start.elapsed().as_nanos() as u64, Ordering::Release);
        }
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
    clock: Option<Arc<Clock>>,
    /// Time spent per notification by a slow handler.
    delay: Option<Duration>,
    /// Delay owed and not slept yet.
    owed: Duration,
}

impl ViewHandler {
    fn record(&mut self, obj: &Object) -> std::sync::MutexGuard<'_, View> {
        if let Some(d) = self.delay {
            self.owed += d;
            if self.owed >= Duration::from_millis(1) {
                let t = Instant::now();
                std::thread::sleep(self.owed);
                self.owed = self.owed.saturating_sub(t.elapsed());
            }
        }
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        view.notifications += 1;
        if let Some(ns) = self.clock.as_ref().and_then(|c| {
            parse_resource_version(obj.resource_version()).and_then(|rv| c.latency_ns(rv))
        }) {
            let _ = view.latency.record(ns.max(1));
        }
        view
    }
}

impl EventHandler for ViewHandler {
    fn on_add(&mut self, obj: &Arc<Object>, _is_in_initial_list: bool) {
        let mut v = self.record(obj);
        v.objects.insert(
            obj.key(),
            (obj.uid().to_owned(), obj.resource_version().to_owned()),
        );
    }

    fn on_update(&mut self, _old: &Arc<Object>, new: &Arc<Object>) {
        let mut v = self.record(new);
        v.objects.insert(
            new.key(),
            (new.uid().to_owned(), new.resource_version().to_owned()),
        );
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        let mut v = self.record(obj.object());
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
                let mut objects = BTreeMap::new();
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

/// Reflector settings of a flood: client-go's, with the shorter watch timeout, a 10 ms first
/// backoff and the 100 ms backoff cap of a fault run unless given.
fn reflector_config(args: &FloodArgs) -> ReflectorConfig {
    let faults = args.fault_every.is_some();
    let mut rc = ReflectorConfig::default();
    if let Some(t) = args
        .watch_timeout
        .or(faults.then_some(Duration::from_secs(1)))
    {
        rc = rc.min_watch_timeout(t);
    }
    if faults {
        rc.backoff.initial = Duration::from_millis(10);
    }
    if let Some(m) = args
        .backoff_max
        .or(faults.then_some(Duration::from_millis(100)))
    {
        rc.backoff.max = m;
        rc.backoff.initial = rc.backoff.initial.min(m);
    }
    rc
}

fn run_inner(args: &FloodArgs) -> Result<bool, String> {
    if args.slow_handlers > args.handlers {
        return Err(format!(
            "--slow-handlers {} is more than --handlers {}",
            args.slow_handlers, args.handlers
        ));
    }
    if args.fault_every.is_some() && args.server.is_some() {
        return Err("--fault-every needs the simulator in this process (not --server)".into());
    }
    let runtime = super::runtime().map_err(|e| e.to_string())?;
    let config = InformerConfig {
        store: StoreConfig::new().shards(args.shards),
        reflector: reflector_config(args),
        fifo: match args.fifo {
            Fifo::Delta => FifoKind::DeltaFifo,
            Fifo::Real => FifoKind::RealFifo,
        },
        ..Default::default()
    };
    let writer = match &args.record {
        Some(path) => Some(TraceWriter::create(path, "pods").map_err(|e| e.to_string())?),
        None => None,
    };
    let ok = if args.transport == Transport::InProcess && args.server.is_none() {
        let (sim, _) = build_sim(args)?;
        let source = Source::Local(sim.clone());
        match &writer {
            Some(w) => {
                let lw = RecordingListerWatcher::new(sim, w.clone());
                run_pipeline(
                    args,
                    &runtime,
                    Informer::new(lw, config),
                    source,
                    "in-process",
                    Some(w),
                )
            }
            None => run_pipeline(
                args,
                &runtime,
                Informer::new(sim, config),
                source,
                "in-process",
                None,
            ),
        }
    } else {
        run_http(args, &runtime, config, writer.as_ref())
    };
    if let Some(w) = writer {
        w.finish().map_err(|e| e.to_string())?;
    }
    ok
}

fn run_http(
    args: &FloodArgs,
    runtime: &tokio::runtime::Runtime,
    config: InformerConfig,
    writer: Option<&Arc<TraceWriter>>,
) -> Result<bool, String> {
    // A server in this process on a loopback port, or the one named by --server.
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
    let label = format!("http {} ({:?})", url, args.accept);
    let ok = match writer {
        Some(w) => {
            let lw = RecordingListerWatcher::new(lw, w.clone());
            run_pipeline(
                args,
                runtime,
                Informer::new(lw, config),
                source,
                &label,
                Some(w),
            )
        }
        None => run_pipeline(
            args,
            runtime,
            Informer::new(lw, config),
            source,
            &label,
            None,
        ),
    };
    if let Some(h) = handle {
        runtime.block_on(h.shutdown());
    }
    ok
}

/// The simulator of an in-process flood, and the JSON twins of its templates.
fn build_sim(args: &FloodArgs) -> Result<(SimServer, Option<Vec<Object>>), String> {
    let dir = fixtures_dir(args.fixtures.as_ref())?;
    let (templates, twins) = load_templates(args.template, args.format, &dir)?;
    let objects = args.objects as usize;
    let (create, update, delete) = args.mix.unwrap_or_else(|| {
        let rest = 100 - args.update_percent;
        (rest.div_ceil(2), args.update_percent, rest / 2)
    });
    let mix = FloodMix {
        target_objects: objects,
        create,
        update,
        delete,
    };
    let base = SimConfig::new(templates)
        .seed(args.seed)
        .mix(mix)
        .initial_objects(objects)
        .history_window(10_000)
        .flow_control(true)
        .update_template(args.template.update_template())
        .extra_labels(args.labels)
        .extra_annotations(args.annotations)
        .too_large_retry_after(args.fault_retry_after.unwrap_or(1));
    let sim = SimServer::new(args.sim.apply(base)).map_err(|e| e.to_string())?;
    args.sim.arm(&sim);
    Ok((sim, twins))
}

/// Handlers with their views, registered on an informer.
fn add_views<L: ListerWatcher>(
    informer: &Informer<L>,
    handlers: u64,
    slow: u64,
    delay: Duration,
    policy: Policy,
    clock: Option<&Arc<Clock>>,
) -> Result<Vec<Arc<Mutex<View>>>, String> {
    let policy = match policy {
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
        let is_slow = i >= handlers - slow;
        informer
            .add_event_handler(
                ViewHandler {
                    view: view.clone(),
                    clock: clock.cloned(),
                    delay: is_slow.then_some(delay),
                    owed: Duration::ZERO,
                },
                HandlerOptions::new()
                    .name(format!("handler-{i}"))
                    .policy(policy),
            )
            .map_err(|e| e.to_string())?;
        views.push(view);
    }
    Ok(views)
}

/// Compares the store and every view with `expected`; the problems found, the merged latency
/// histogram and each view's notification count.
fn verify<L: ListerWatcher>(
    informer: &Informer<L>,
    views: &[Arc<Mutex<View>>],
    expected: &BTreeMap<ObjectKey, (String, String)>,
    rv: u64,
    problems: &mut Vec<String>,
) -> Result<(Histogram<u64>, Vec<u64>), String> {
    let snapshot = informer.store().snapshot();
    let in_store: BTreeMap<ObjectKey, (String, String)> = snapshot
        .iter()
        .map(|(k, o)| {
            (
                k.clone(),
                (o.uid().to_owned(), o.resource_version().to_owned()),
            )
        })
        .collect();
    if let Some(d) = diff_views(expected, &in_store, rv) {
        problems.push(format!("store: {d}"));
    }
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut per_handler = Vec::new();
    for (i, view) in views.iter().enumerate() {
        let v = view.lock().unwrap_or_else(PoisonError::into_inner);
        let got: BTreeMap<ObjectKey, (String, String)> = v
            .objects
            .iter()
            .map(|(k, x)| (k.clone(), x.clone()))
            .collect();
        if let Some(d) = diff_views(expected, &got, rv) {
            problems.push(format!("handler-{i}: {d}"));
        }
        let _ = latency.add(&v.latency);
        per_handler.push(v.notifications);
    }
    Ok((latency, per_handler))
}

/// The parts of a report every run has: throughput, latency, reflector counters, handlers,
/// memory and verification.
#[allow(clippy::too_many_arguments)]
fn common_report<L: ListerWatcher>(
    informer: &Informer<L>,
    events: u64,
    secs: f64,
    latency: &Histogram<u64>,
    per_handler: &[u64],
    slow: u64,
    problems: &[String],
) -> serde_json::Value {
    let listener_stats: Vec<_> = informer
        .distributor()
        .listeners()
        .iter()
        .map(|l| l.stats())
        .collect();
    let stats = informer
        .reflector_metrics()
        .map(|m| m.snapshot())
        .unwrap_or_default();
    let n = per_handler.len() as u64;
    json!({
        "events": events,
        "seconds": secs,
        "events_per_second": events as f64 / secs,
        "watch_megabytes_per_second": stats.watch_bytes as f64 / 1e6 / secs,
        "watch_bytes": stats.watch_bytes,
        "latency_ns": {"p50": latency.value_at_quantile(0.5), "p99": latency.value_at_quantile(0.99),
                       "p999": latency.value_at_quantile(0.999), "max": latency.max(), "samples": latency.len()},
        "lists": stats.lists,
        "watches": stats.watches,
        "relists": stats.relists,
        "watch_timeouts": stats.watch_timeouts,
        "watch_events": stats.events,
        "errors": stats.errors,
        "backoffs": stats.backoffs,
        "handlers": n,
        "per_handler": listener_stats.iter().zip(per_handler).enumerate().map(|(i, (s, got))| json!({
            "name": format!("handler-{i}"),
            "slow": (i as u64) >= n - slow.min(n),
            "notifications": got,
            "delivered": s.delivered,
            "coalesced": s.coalesced,
            "max_pending": s.max_pending,
            "panics": s.panics})).collect::<Vec<_>>(),
        "max_pending": listener_stats.iter().map(|s| s.max_pending).max().unwrap_or(0),
        "panics": listener_stats.iter().map(|s| s.panics).sum::<u64>(),
        "peak_rss_bytes": peak_rss_bytes(),
        "verified": problems.is_empty(),
        "problems": problems,
    })
}

/// Prints `report` as JSON or as text.
fn print_report(title: &str, report: &serde_json::Value, as_json: bool) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
        return;
    }
    let r = report;
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let u = |k: &str| r[k].as_u64().unwrap_or(0);
    let ns = |q: &str| Duration::from_nanos(r["latency_ns"][q].as_u64().unwrap_or(0));
    println!("{title}");
    if let Some(t) = r["transport"].as_str() {
        println!("  transport:          {t}");
    }
    if let Some(s) = r["initial_list_seconds"].as_f64() {
        println!("  initial list:       {s:.2} s");
    }
    println!(
        "  throughput:         {:.0} events/s, {:.1} MB/s of watch stream ({:.2} s)",
        f("events_per_second"),
        f("watch_megabytes_per_second"),
        f("seconds")
    );
    if r["latency_ns"]["samples"].as_u64().unwrap_or(0) > 0 {
        println!(
            "  handler latency:    p50 {:?}  p99 {:?}  p999 {:?}  (server change → handler, {} samples)",
            ns("p50"),
            ns("p99"),
            ns("p999"),
            r["latency_ns"]["samples"]
        );
    }
    if let Some(lag) = r["store_lag_max"].as_u64() {
        println!(
            "  store lag:          max {lag} resourceVersions behind the server (sampled per step)"
        );
    }
    println!(
        "  reflector:          {} lists ({} relists), {} watches, {} watch timeouts, {} errors",
        u("lists"),
        u("relists"),
        u("watches"),
        u("watch_timeouts"),
        u("errors")
    );
    if r["faults"].is_object() {
        println!(
            "  faults:             {} injected, {} fired, {} of {} kinds, {} pending",
            r["faults"]["injected"],
            r["faults"]["fired"],
            r["faults"]["kinds_fired"],
            r["faults"]["kinds"],
            r["faults"]["pending"]
        );
    }
    if let Some(rec) = r["record"].as_object() {
        println!(
            "  recorded:           {} records to {}",
            rec.get("records").unwrap_or(&serde_json::Value::Null),
            rec.get("path").and_then(|p| p.as_str()).unwrap_or("")
        );
    }
    for h in r["per_handler"].as_array().into_iter().flatten() {
        println!(
            "  {:<18}  {} notifications, max pending {}, panics {}{}",
            format!("{}:", h["name"].as_str().unwrap_or("")),
            h["notifications"],
            h["max_pending"],
            h["panics"],
            if h["slow"] == true { " (slow)" } else { "" }
        );
    }
    if let Some(rss) = r["peak_rss_bytes"].as_u64() {
        println!(
            "  peak RSS:           {:.1} MiB",
            rss as f64 / (1024.0 * 1024.0)
        );
    }
    if r["verified"] == true {
        println!(
            "  verified:           store and all {} handler views equal the expected {} objects at resourceVersion {}",
            u("handlers"),
            r["objects"],
            r["resource_version"]
        );
    } else {
        println!("  VERIFICATION FAILED:");
        for p in r["problems"].as_array().into_iter().flatten() {
            println!("    {}", p.as_str().unwrap_or(""));
        }
    }
}

/// The faults `--fault-every` cycles through: [`Fault::catalogue`], with `retry_after` (if
/// given) as the `retryAfterSeconds` of its 429 answers.
fn fault_catalogue(retry_after: Option<u32>) -> Vec<Fault> {
    let with = |a: ErrorAnswer| match (a, retry_after) {
        (ErrorAnswer::TooManyRequests { .. }, Some(secs)) => ErrorAnswer::TooManyRequests {
            retry_after_seconds: secs,
        },
        _ => a,
    };
    Fault::catalogue()
        .into_iter()
        .map(|f| match f {
            Fault::List(a) => Fault::List(with(a)),
            Fault::Watch(a) => Fault::Watch(with(a)),
            Fault::Stream { .. } => f,
        })
        .collect()
}

/// Counters whose growth during a fault's cycle is charged to that fault's kind.
#[derive(Clone, Copy, Debug, Default)]
struct WaitCounters {
    /// `SimStats::flood_wait_us`: the generator held back by flow control.
    flood_wait_us: u64,
    /// `ReflectorStats::backoff_wait_us`.
    backoff_us: u64,
    /// `ReflectorStats::retry_after_extra_us`.
    retry_after_us: u64,
    /// `ReflectorStats::watch_timeouts`: stalled streams the reflector's deadline ended.
    watch_timeouts: u64,
    /// `ReflectorStats::relists`.
    relists: u64,
    /// `ReflectorStats::backoffs`.
    backoffs: u64,
}

impl WaitCounters {
    fn read<L: ListerWatcher>(sim: &informer::sim::SimStats, informer: &Informer<L>) -> Self {
        let r = informer
            .reflector_metrics()
            .map(|m| m.snapshot())
            .unwrap_or_default();
        WaitCounters {
            flood_wait_us: sim.flood_wait_us,
            backoff_us: r.backoff_wait_us,
            retry_after_us: r.retry_after_extra_us,
            watch_timeouts: r.watch_timeouts,
            relists: r.relists,
            backoffs: r.backoffs,
        }
    }

    fn since(self, before: WaitCounters) -> WaitCounters {
        WaitCounters {
            flood_wait_us: self.flood_wait_us.saturating_sub(before.flood_wait_us),
            backoff_us: self.backoff_us.saturating_sub(before.backoff_us),
            retry_after_us: self.retry_after_us.saturating_sub(before.retry_after_us),
            watch_timeouts: self.watch_timeouts.saturating_sub(before.watch_timeouts),
            relists: self.relists.saturating_sub(before.relists),
            backoffs: self.backoffs.saturating_sub(before.backoffs),
        }
    }

    fn add(&mut self, d: WaitCounters) {
        self.flood_wait_us += d.flood_wait_us;
        self.backoff_us += d.backoff_us;
        self.retry_after_us += d.retry_after_us;
        self.watch_timeouts += d.watch_timeouts;
        self.relists += d.relists;
        self.backoffs += d.backoffs;
    }
}

/// Where the wall time of one fault kind's cycles went (a cycle runs from the fault's
/// injection to the next fault's injection, or to the end of the run).
#[derive(Clone, Copy, Debug, Default)]
struct KindTimes {
    cycles: u64,
    /// Wall time of the cycles, microseconds.
    cycle_us: u64,
    /// Injection to firing (as the generator saw it, at step granularity), microseconds.
    fire_us: u64,
    /// Events the generator made during the cycles.
    events: u64,
    waits: WaitCounters,
}

/// The fault being waited for or recovered from.
struct Cycle {
    kind: usize,
    started: Instant,
    fired: Option<Duration>,
    made_at_start: u64,
    base: WaitCounters,
}

/// Injects the simulator's one-shot faults in turn, each with what makes it fire, and charges
/// the wall time until the next injection to the fault's kind.
struct FaultDriver {
    every: u64,
    next_at: u64,
    catalogue: Vec<Fault>,
    next: usize,
    injected: u64,
    /// Kinds injected (each fired once the next one is injected or at the end).
    kinds_injected: std::collections::BTreeSet<String>,
    /// Per catalogue entry.
    times: Vec<KindTimes>,
    current: Option<Cycle>,
}

impl FaultDriver {
    fn new(every: u64, catalogue: Vec<Fault>) -> Self {
        FaultDriver {
            every,
            next_at: every,
            times: vec![KindTimes::default(); catalogue.len()],
            catalogue,
            next: 0,
            injected: 0,
            kinds_injected: Default::default(),
            current: None,
        }
    }

    /// Closes the current cycle at `made` events.
    fn close<L: ListerWatcher>(
        &mut self,
        st: &informer::sim::SimStats,
        informer: &Informer<L>,
        made: u64,
    ) {
        if let Some(c) = self.current.take() {
            let t = &mut self.times[c.kind];
            let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            t.cycles += 1;
            t.cycle_us += us(c.started.elapsed());
            t.fire_us += us(c.fired.unwrap_or_else(|| c.started.elapsed()));
            t.events += made - c.made_at_start;
            t.waits.add(WaitCounters::read(st, informer).since(c.base));
        }
    }

    /// After `made` events: injects the next fault when due and the previous ones fired.
    fn tick<L: ListerWatcher>(&mut self, sim: &SimServer, informer: &Informer<L>, made: u64) {
        let st = sim.stats();
        if let Some(c) = self.current.as_mut().filter(|c| c.fired.is_none())
            && st.faults_pending == 0
        {
            c.fired = Some(c.started.elapsed());
        }
        if made < self.next_at || st.faults_pending > 0 {
            return;
        }
        self.close(&st, informer, made);
        let kind = self.next % self.catalogue.len();
        let fault = self.catalogue[kind];
        self.next += 1;
        self.current = Some(Cycle {
            kind,
            started: Instant::now(),
            fired: None,
            made_at_start: made,
            base: WaitCounters::read(&st, informer),
        });
        sim.inject(fault);
        // A list or watch fault waits for the next list or watch: make the reflector ask.
        match fault {
            Fault::List(_) => sim.inject(Fault::Stream {
                after_events: 0,
                action: StreamFault::Expired,
            }),
            // After one event: a watch closed with none within 1 s is a "very short watch"
            // that the reflector answers with a relist, which the watch fault never sees.
            Fault::Watch(_) => sim.inject(Fault::Stream {
                after_events: 1,
                action: StreamFault::Close,
            }),
            Fault::Stream { .. } => {}
        }
        self.injected += 1;
        self.kinds_injected.insert(fault.to_string());
        self.next_at = made + self.every;
    }

    /// Whether the next fault is due at `made` events (it is injected once the previous one
    /// fired).
    fn due(&self, made: u64) -> bool {
        made >= self.next_at
    }

    /// The per-kind breakdown, in catalogue order.
    fn breakdown(&self) -> Vec<serde_json::Value> {
        let s = |us: u64| us as f64 / 1e6;
        self.catalogue
            .iter()
            .zip(&self.times)
            .map(|(f, t)| {
                json!({
                    "kind": f.to_string(),
                    "cycles": t.cycles,
                    "events": t.events,
                    "cycle_seconds": s(t.cycle_us),
                    "fire_seconds": s(t.fire_us),
                    "flow_control_wait_seconds": s(t.waits.flood_wait_us),
                    "backoff_seconds": s(t.waits.backoff_us),
                    "retry_after_extra_seconds": s(t.waits.retry_after_us),
                    "backoffs": t.waits.backoffs,
                    "watch_timeouts": t.waits.watch_timeouts,
                    "relists": t.waits.relists,
                })
            })
            .collect()
    }
}

fn run_pipeline<L: ListerWatcher>(
    args: &FloodArgs,
    runtime: &tokio::runtime::Runtime,
    informer: Informer<L>,
    source: Source,
    transport: &str,
    writer: Option<&Arc<TraceWriter>>,
) -> Result<bool, String> {
    let limit = match (args.events, args.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 500_000,
    };
    let step_len = if limit == u64::MAX {
        STEP
    } else {
        STEP.max(limit.div_ceil(MAX_STEPS as u64))
    };
    let steps = (limit.div_ceil(step_len) as usize)
        .saturating_add(1)
        .min(MAX_STEPS);
    let clock = Arc::new(Clock::new(step_len, steps));
    let views = add_views(
        &informer,
        args.handlers,
        args.slow_handlers,
        args.slow_handler_delay,
        args.policy,
        Some(&clock),
    )?;

    informer.start(runtime.handle());
    if let Err(e) = runtime.block_on(informer.wait_for_cache_sync(Duration::from_secs(120))) {
        return Err(format!("the informer did not sync within 120 s: {e}"));
    }
    let list_done = clock.start.elapsed();

    let show_bar = !(args.no_progress || args.json);
    let bar = {
        // Drawn only once the flood has run for a second (short runs stay quiet).
        let len = if limit == u64::MAX {
            args.duration.map_or(0, |d| d.as_secs())
        } else {
            limit
        };
        let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = if limit == u64::MAX {
            "{spinner} flood [{elapsed_precise}] {bar:40} {pos}/{len} s {msg}"
        } else {
            "{spinner} flood [{elapsed_precise}] {bar:40} {pos}/{len} events ({per_sec})"
        };
        b.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };

    // The flood: a step at a time, recording when each step's changes exist on the server.
    let store = informer.store();
    let mut faults = args
        .fault_every
        .map(|every| FaultDriver::new(every, fault_catalogue(args.fault_retry_after)));
    let flood_start = Instant::now();
    let first_rv = runtime.block_on(source.resource_version())? + 1;
    clock.first_rv.store(first_rv, Ordering::Release);
    let mut made = 0u64;
    let mut step = 0usize;
    let mut lag_max = 0u64;
    runtime.block_on(async {
        while made < limit && args.duration.is_none_or(|d| flood_start.elapsed() < d) {
            let n = step_len.min(limit - made);
            let rv = source.flood(n).await?;
            clock.mark(step);
            step += 1;
            made += n;
            lag_max = lag_max.max(rv.saturating_sub(store.resource_version()));
            if let (Some(f), Source::Local(sim)) = (faults.as_mut(), &source) {
                f.tick(sim, &informer, made);
                // Pacing: the flood runs at most `every` events past a fault that has not
                // fired, so that faults come every `every` events however long recoveries
                // take (a fault that never fires holds it back for at most 60 s).
                if f.due(made) {
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while sim.stats().faults_pending > 0 && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    f.tick(sim, &informer, made);
                }
            }
            if let Some(rate) = args.rate {
                let due = Duration::from_secs_f64(made as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(flood_start.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            if show_bar && bar.is_hidden() && flood_start.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            if limit == u64::MAX {
                bar.set_position(flood_start.elapsed().as_secs());
                bar.set_message(format!("{made} events"));
            } else {
                bar.set_position(made);
            }
        }
        Ok::<(), String>(())
    })?;
    let generated = flood_start.elapsed();

    // Faults still waiting for a request (a list fault whose relist has not come yet) get a
    // bounded time to fire.
    let mut problems = Vec::new();
    if let (Source::Local(sim), Some(_)) = (&source, &faults) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while sim.stats().faults_pending > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let faults_settled = flood_start.elapsed();

    // Wait until the store reflects the server's last change and every handler caught up.
    let target = runtime.block_on(source.resource_version())?;
    let caught_up = store.wait_for_blocking(target, Duration::from_secs(120));
    let store_caught_up = flood_start.elapsed();
    informer.flush();
    let elapsed = flood_start.elapsed();
    if let (Some(f), Source::Local(sim)) = (faults.as_mut(), &source) {
        f.close(&sim.stats(), &informer, made);
    }
    let run_waits = match &source {
        Source::Local(sim) => WaitCounters::read(&sim.stats(), &informer),
        Source::Remote(_) => WaitCounters::default(),
    };
    bar.finish_and_clear();

    if caught_up.is_err() {
        problems.push(format!(
            "store stuck at resourceVersion {} (server at {target})",
            store.resource_version(),
        ));
    }
    // Verification against the truth (at the store's version: the server may have moved on).
    let truth = runtime.block_on(source.truth(store.snapshot().resource_version().max(target)))?;
    let (latency, per_handler) = verify(
        &informer,
        &views,
        &truth.versions(),
        truth.resource_version,
        &mut problems,
    )?;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mut report = common_report(
        &informer,
        made,
        secs,
        &latency,
        &per_handler,
        args.slow_handlers,
        &problems,
    );
    informer.shutdown();
    let r = report.as_object_mut().ok_or("report is not an object")?;
    r.insert("template".into(), json!(format!("{:?}", args.template)));
    r.insert("format".into(), json!(format!("{:?}", args.format)));
    r.insert("transport".into(), json!(transport));
    r.insert("objects".into(), json!(truth.objects.len()));
    r.insert("resource_version".into(), json!(truth.resource_version));
    r.insert(
        "initial_list_seconds".into(),
        json!(list_done.as_secs_f64()),
    );
    r.insert("generate_seconds".into(), json!(generated.as_secs_f64()));
    // Where the wall time after the flood's start went: generating (flow-control waits
    // included), waiting for the last faults to fire, the store catching up, the handlers
    // draining; and the waits inside the run.
    r.insert(
        "time".into(),
        json!({
            "generate_seconds": generated.as_secs_f64(),
            "last_faults_seconds": (faults_settled - generated).as_secs_f64(),
            "store_catch_up_seconds": (store_caught_up - faults_settled).as_secs_f64(),
            "handler_drain_seconds": (elapsed - store_caught_up).as_secs_f64(),
            "flow_control_wait_seconds": run_waits.flood_wait_us as f64 / 1e6,
            "backoff_seconds": run_waits.backoff_us as f64 / 1e6,
            "retry_after_extra_seconds": run_waits.retry_after_us as f64 / 1e6,
        }),
    );
    r.insert("store_lag_max".into(), json!(lag_max));
    r.insert("policy".into(), json!(format!("{:?}", args.policy)));
    r.insert("slow_handlers".into(), json!(args.slow_handlers));
    r.insert(
        "slow_handler_delay_ns".into(),
        json!(args.slow_handler_delay.as_nanos() as u64),
    );
    r.insert("seed".into(), json!(args.seed));
    if let (Some(f), Source::Local(sim)) = (&faults, &source) {
        let st = sim.stats();
        r.insert(
            "faults".into(),
            json!({
                "every": f.every,
                "injected": f.injected,
                "fired": st.faults_fired,
                "pending": st.faults_pending,
                "kinds": f.catalogue.len(),
                "kinds_fired": if st.faults_pending == 0 { f.kinds_injected.len() } else { f.kinds_injected.len().saturating_sub(1) },
                "kinds_list": f.kinds_injected.iter().collect::<Vec<_>>(),
                "per_kind": f.breakdown(),
            }),
        );
    }
    if let Some(path) = &args.record {
        r.insert(
            "record".into(),
            json!({"path": path.display().to_string(), "records": writer.map(|w| w.records())}),
        );
    }
    let ok = problems.is_empty();
    let title = format!(
        "flood: {made} events over {} objects ({:?} template, {:?}), {} handlers ({:?}, {} slow)",
        truth.objects.len(),
        args.template,
        args.format,
        args.handlers,
        args.policy,
        args.slow_handlers
    );
    print_report(&title, &report, args.json);
    Ok(ok)
}

/// Runs `informer replay`; the exit code (1 when verification fails, 2 on a bad trace).
pub(crate) fn replay(args: &ReplayArgs) -> i32 {
    match replay_inner(args) {
        Ok(ok) => i32::from(!ok),
        Err(e) => {
            eprintln!("informer replay: {e}");
            2
        }
    }
}

fn replay_inner(args: &ReplayArgs) -> Result<bool, String> {
    let path = args.file.display().to_string();
    // The whole trace is read once for the expected state: a bad file fails here, typed.
    let expected =
        expected_state(&args.file, DEFAULT_FRAME_LIMIT).map_err(|e| format!("{path}: {e}"))?;
    let reader = TraceReader::open(&args.file).map_err(|e| format!("{path}: {e}"))?;
    let lw = ReplayListerWatcher::new(reader);
    let mut rc = ReflectorConfig::default();
    let max = args.backoff_max.unwrap_or(Duration::from_millis(100));
    rc.backoff.max = max;
    rc.backoff.initial = Duration::from_millis(10).min(max);
    let config = InformerConfig {
        store: StoreConfig::new().shards(args.shards),
        reflector: rc,
        ..Default::default()
    };
    let runtime = super::runtime().map_err(|e| e.to_string())?;
    let informer = Informer::new(lw.clone(), config);
    let views = add_views(
        &informer,
        args.handlers,
        0,
        Duration::ZERO,
        args.policy,
        None,
    )?;
    let start = Instant::now();
    informer.start(runtime.handle());
    // The trace is consumed when a request or read finds nothing more; then the store must
    // reach the last resourceVersion the trace implies.
    let deadline = Instant::now() + Duration::from_secs(600);
    while !lw.is_exhausted() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut problems = Vec::new();
    if !lw.is_exhausted() {
        problems.push(format!(
            "the replaying informer stopped asking for records after {} of them (10 min)",
            lw.served()
        ));
    }
    if let Some(e) = lw.error() {
        problems.push(format!("trace: {e}"));
    }
    let store = informer.store();
    if store
        .wait_for_blocking(expected.resource_version, Duration::from_secs(60))
        .is_err()
    {
        problems.push(format!(
            "store stuck at resourceVersion {} (trace reaches {})",
            store.resource_version(),
            expected.resource_version
        ));
    }
    informer.flush();
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let (latency, per_handler) = verify(
        &informer,
        &views,
        &expected.objects,
        expected.resource_version,
        &mut problems,
    )?;
    let mut report = common_report(
        &informer,
        expected.events,
        secs,
        &latency,
        &per_handler,
        0,
        &problems,
    );
    informer.shutdown();
    let r = report.as_object_mut().ok_or("report is not an object")?;
    r.insert("trace".into(), json!(path));
    r.insert("objects".into(), json!(expected.objects.len()));
    r.insert("resource_version".into(), json!(expected.resource_version));
    r.insert("trace_lists".into(), json!(expected.lists));
    r.insert("broken_streams".into(), json!(expected.broken_streams));
    r.insert("records_served".into(), json!(lw.served()));
    r.insert("records_skipped".into(), json!(lw.skipped()));
    r.insert(
        "records_skipped_by_kind".into(),
        lw.skipped_by_kind()
            .into_iter()
            .map(|(k, n)| (k.as_str_name().to_owned(), json!(n)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    let ok = problems.is_empty();
    let title = format!(
        "replay: {} events from {path} ({} lists in the trace), {} handlers ({:?})",
        expected.events, expected.lists, args.handlers, args.policy
    );
    print_report(&title, &report, args.json);
    Ok(ok)
}
