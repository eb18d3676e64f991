//! `informer serve`: the simulated API server on a loopback socket, for kubectl, kube-rs,
//! client-go programs and `informer watch`/`informer flood --server`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use informer::server::{ServerConfig, ServerHandle, drive, serve_many};
use informer::sim::{SimConfig, SimServer};

use super::sim_args::{SimFlags, Template, fixtures_dir, load_templates};

/// Arguments of `informer serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// TCP port on 127.0.0.1 (0 = any free port; the URL is printed).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Objects created before serving (the flood then holds about this many). Repeatable:
    /// one value per `--template`, in order; the last one given applies to the rest (more
    /// values than templates is an error).
    #[arg(long, default_values_t = [1_000u64], value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    objects: Vec<u64>,
    /// Changes (ADDED/MODIFIED/DELETED) per second, generated until stopped; 0 = none (use
    /// `POST /informer/v1/flood?events=N[&resource=PLURAL]` to make changes on demand).
    /// `POST /informer/v1/rate?rate=R`, `/informer/v1/pause` and `/informer/v1/resume`
    /// change, stop and restart it while serving. Repeatable like `--objects`.
    #[arg(long, default_values_t = [0.0])]
    rate: Vec<f64>,
    /// Object template. Repeatable: each one is served as its own resource by its own
    /// simulator (same seed and flags), e.g. `--template deployments --template pod-states`
    /// for the Deployments and Pods of one simulated cluster.
    #[arg(long, value_enum, default_values_t = [Template::HeadPod])]
    template: Vec<Template>,
    /// How objects are kept and served: protobuf (JSON clients get them converted, through
    /// the fixtures' JSON twins or the Kubernetes schema) or JSON (protobuf clients get 406
    /// and fall back to JSON). Writes are taken in either encoding and converted.
    #[arg(long, value_enum, default_value_t = super::sim_args::Format::Protobuf)]
    format: super::sim_args::Format,
    /// Seed of the simulators (the same for each, so that the Pods of `pod-states` belong to
    /// the Deployments of `deployments`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory of the fixtures (default: ../shared/fixtures).
    #[arg(long)]
    fixtures: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_parser = super::duration::seconds)]
    duration: Option<f64>,
    /// Seconds between status lines on stderr (0 = none).
    #[arg(long, default_value_t = 10.0, value_parser = super::duration::seconds)]
    status_every: f64,
    #[command(flatten)]
    sim: SimFlags,
}

/// Runs the command; returns the process exit code.
pub(crate) fn run(args: &ServeArgs) -> i32 {
    super::block_on_command("serve", run_async(args))
}

/// The `i`-th value of a repeatable flag: the last one given applies to the rest.
fn nth<T: Copy>(values: &[T], i: usize) -> T {
    values[i.min(values.len() - 1)]
}

/// The simulator configuration of `informer serve`: a real server's behaviour (no flow
/// control, lagging watchers get 410) unless flags say otherwise.
fn sim_config(
    args: &ServeArgs,
    template: Template,
    templates: informer::sim::Templates,
    objects: u64,
) -> SimConfig {
    let base = SimConfig::new(templates)
        .seed(args.seed)
        .initial_objects(objects as usize)
        .target_objects(objects as usize)
        .update_template(template.update_template());
    args.sim.apply(base)
}

async fn run_async(args: &ServeArgs) -> Result<(), String> {
    if let Some(r) = args.rate.iter().find(|r| !(r.is_finite() && **r >= 0.0)) {
        return Err(format!("--rate {r} is not a rate"));
    }
    for (flag, n) in [
        ("--objects", args.objects.len()),
        ("--rate", args.rate.len()),
    ] {
        if n > args.template.len() {
            return Err(format!(
                "{n} {flag} values for {} --template values (one per template at most)",
                args.template.len()
            ));
        }
    }
    let dir = fixtures_dir(args.fixtures.as_ref())?;
    let mut served = Vec::new();
    let mut sims = Vec::new();
    for (i, &template) in args.template.iter().enumerate() {
        let (templates, twins) = load_templates(template, args.format, &dir)?;
        let config = sim_config(args, template, templates, nth(&args.objects, i));
        let sim = SimServer::new(config).map_err(|e| e.to_string())?;
        args.sim.arm(&sim);
        let mut config = ServerConfig::default();
        // A varied Pod matches no twin: JSON clients get it converted by the schema.
        if let Some(t) = twins {
            config = config.json_twins(t);
        }
        served.push((sim.clone(), config));
        sims.push((sim, template, nth(&args.rate, i)));
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let handle = serve_many(served, addr).await.map_err(|e| e.to_string())?;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for (sim, template, rate) in &sims {
        // A closed stdout (a reader that took the URL and left) is no reason to stop serving.
        let _ = writeln!(
            out,
            "serving {} {} ({} objects at resourceVersion {}, {:?} template, {} events/s) at {}",
            sim.gvk().api_version(),
            sim.config().resource,
            sim.stats().objects,
            sim.resource_version(),
            template,
            rate,
            handle.url()
        );
    }
    let _ = out.flush();
    drop(out);

    let started = Instant::now();
    let stop = super::until_stop(args.duration);
    let status = async {
        if args.status_every <= 0.0 {
            return std::future::pending().await;
        }
        let mut tick = tokio::time::interval(Duration::from_secs_f64(args.status_every));
        tick.tick().await;
        loop {
            tick.tick().await;
            eprintln!("{}", status_line(&sims, &handle, started));
        }
    };
    let drives =
        futures_util::future::try_join_all(sims.iter().map(|(sim, _, rate)| drive(sim, *rate)));
    let result = tokio::select! {
        () = stop => Ok(()),
        r = drives => r.map(drop).map_err(|e| e.to_string()),
        () = status => Ok(()),
    };
    eprintln!("{}", status_line(&sims, &handle, started));
    handle.shutdown().await;
    result
}

fn status_line(
    sims: &[(SimServer, Template, f64)],
    handle: &ServerHandle,
    started: Instant,
) -> String {
    let h = handle.stats();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let mut line = format!("[{:>7.1}s]", started.elapsed().as_secs_f64());
    for (sim, _, _) in sims {
        let s = sim.stats();
        let name = if sims.len() > 1 {
            format!("{}: ", sim.config().resource)
        } else {
            String::new()
        };
        line.push_str(&format!(
            " {name}resourceVersion {}  objects {}  events {} ",
            s.resource_version, s.objects, s.events
        ));
    }
    line.push_str(&format!(
        " requests {}  lists {}  watches {} ({} open)  watch MB sent {:.1}  errors {}",
        l(&h.requests),
        l(&h.lists),
        l(&h.watches),
        l(&h.watches_open),
        l(&h.watch_bytes) as f64 / 1e6,
        l(&h.errors),
    ));
    line
}
