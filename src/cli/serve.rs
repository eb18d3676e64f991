//! `informer serve`: the simulated API server on a loopback socket, for kubectl, kube-rs,
//! client-go programs and `informer watch`/`informer flood --server`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use informer::server::{ServerConfig, ServerHandle, drive, serve};
use informer::sim::{SimConfig, SimServer};

use super::sim_args::{SimFlags, Template, fixtures_dir, load_templates};

/// Arguments of `informer serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// TCP port on 127.0.0.1 (0 = any free port; the URL is printed).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Objects created before serving (the flood then holds about this many).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    objects: u64,
    /// Changes (ADDED/MODIFIED/DELETED) per second, generated until stopped; 0 = none (use
    /// `POST /informer/v1/flood?events=N` to make changes on demand).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Object template.
    #[arg(long, value_enum, default_value_t = Template::HeadPod)]
    template: Template,
    /// Seed of the simulator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory of the fixtures (default: ../shared/fixtures).
    #[arg(long)]
    fixtures: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds between status lines on stderr (0 = none).
    #[arg(long, default_value_t = 10.0)]
    status_every: f64,
    #[command(flatten)]
    sim: SimFlags,
}

/// Runs the command; returns the process exit code.
pub(crate) fn run(args: &ServeArgs) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("informer serve: {e}");
            return 2;
        }
    };
    match runtime.block_on(run_async(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("informer serve: {e}");
            2
        }
    }
}

/// The simulator configuration of `informer serve`: a real server's behaviour (no flow
/// control, lagging watchers get 410) unless flags say otherwise.
fn sim_config(args: &ServeArgs, templates: informer::sim::Templates) -> SimConfig {
    let base = SimConfig::new(templates)
        .seed(args.seed)
        .initial_objects(args.objects as usize)
        .target_objects(args.objects as usize);
    args.sim.apply(base)
}

async fn run_async(args: &ServeArgs) -> Result<(), String> {
    if !(args.rate.is_finite() && args.rate >= 0.0) {
        return Err(format!("--rate {} is not a rate", args.rate));
    }
    let dir = fixtures_dir(args.fixtures.as_ref())?;
    let (templates, twins) =
        load_templates(args.template, super::sim_args::Format::Protobuf, &dir)?;
    let sim = SimServer::new(sim_config(args, templates)).map_err(|e| e.to_string())?;
    args.sim.arm(&sim);
    let mut config = ServerConfig::default();
    if let Some(t) = twins {
        config = config.json_twins(t);
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let handle = serve(sim.clone(), config, addr)
        .await
        .map_err(|e| e.to_string())?;
    let gvk = sim.gvk();
    println!(
        "serving {} {} ({} objects at resourceVersion {}, {:?} template, {} events/s) at {}",
        gvk.api_version(),
        sim.config().resource,
        sim.stats().objects,
        sim.resource_version(),
        args.template,
        args.rate,
        handle.url()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let started = Instant::now();
    let stop = async {
        match args.duration {
            Some(d) => tokio::time::sleep(Duration::from_secs_f64(d.max(0.0))).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
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
            eprintln!("{}", status_line(&sim, &handle, started));
        }
    };
    let result = tokio::select! {
        () = stop => Ok(()),
        r = drive(&sim, args.rate) => r.map_err(|e| e.to_string()),
        () = status => Ok(()),
    };
    eprintln!("{}", status_line(&sim, &handle, started));
    handle.shutdown().await;
    result
}

fn status_line(sim: &SimServer, handle: &ServerHandle, started: Instant) -> String {
    let s = sim.stats();
    let h = handle.stats();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    format!(
        "[{:>7.1}s] resourceVersion {}  objects {}  events {}  requests {}  lists {}  watches {} ({} open)  watch MB sent {:.1}  errors {}",
        started.elapsed().as_secs_f64(),
        s.resource_version,
        s.objects,
        s.events,
        l(&h.requests),
        l(&h.lists),
        l(&h.watches),
        l(&h.watches_open),
        l(&h.watch_bytes) as f64 / 1e6,
        l(&h.errors),
    )
}
