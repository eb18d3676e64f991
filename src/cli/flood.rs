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
use informer::distributor::{EventHandler, OverflowPolicy};
use informer::fifo::DeltaObject;
use informer::informer::{HandlerOptions, Informer, InformerConfig};
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::sim::{FloodMix, SimConfig, SimServer, Templates, default_fixtures_dir};
use informer::store::StoreConfig;
use serde_json::json;

/// Which fixture objects are stamped from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Template {
    /// `k8s-testdata/HEAD/core.v1.Pod.pb`: every Pod field set (13.5 KB protobuf).
    HeadPod,
    /// The real Pod an API server stored in etcd (1.6 KB protobuf).
    EtcdPod,
    /// Both protobuf Pods, alternating.
    ProtobufPods,
    /// Seven real OpenShift Pods as JSON (8–33 KB each): the JSON path.
    OpenshiftJson,
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

fn run_inner(args: &FloodArgs) -> Result<bool, String> {
    let dir = match &args.fixtures {
        Some(d) => d.clone(),
        None => default_fixtures_dir().map_err(|e| e.to_string())?,
    };
    let templates = match args.template {
        Template::HeadPod => Templates::head_pod(&dir),
        Template::EtcdPod => Templates::etcd_pod(&dir),
        Template::ProtobufPods => Templates::protobuf_pods(&dir),
        Template::OpenshiftJson => Templates::openshift_json(&dir),
    }
    .map_err(|e| e.to_string())?;
    let rest = 100 - args.update_percent;
    let objects = args.objects as usize;
    let handlers = args.handlers as usize;
    let mix = FloodMix {
        target_objects: objects,
        create: rest.div_ceil(2),
        update: args.update_percent,
        delete: rest / 2,
    };
    let sim = SimServer::new(
        SimConfig::new(templates)
            .seed(args.seed)
            .mix(mix)
            .initial_objects(objects)
            .history_window(10_000)
            .flow_control(true),
    )
    .map_err(|e| e.to_string())?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    let informer = Informer::new(
        sim.clone(),
        InformerConfig {
            store: StoreConfig::new().shards(args.shards),
            ..Default::default()
        },
    );
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
    let first_rv = sim.resource_version() + 1;
    clock.first_rv.store(first_rv, Ordering::Release);
    let mut made = 0u64;
    let mut step = 0usize;
    runtime.block_on(async {
        while made < args.events {
            let n = step_len.min(args.events - made);
            sim.flood(n).await.map_err(|e| e.to_string())?;
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
    let truth = sim.truth();
    let store = informer.store();
    let caught_up = store.wait_for_blocking(truth.resource_version, Duration::from_secs(120));
    informer.flush();
    let elapsed = flood_start.elapsed();
    bar.finish_and_clear();

    // Verification against the truth.
    let mut problems = Vec::new();
    if caught_up.is_err() {
        problems.push(format!(
            "store stuck at resourceVersion {} (server at {})",
            store.resource_version(),
            truth.resource_version
        ));
    }
    let snapshot = store.snapshot();
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
