//! `informer replay`: a trace written by `flood --record` fed back through the pipeline, the
//! store and every handler's view compared with the state the trace implies.

use std::time::{Duration, Instant};

use informer::object::DEFAULT_FRAME_LIMIT;
use informer::reflector::ReflectorConfig;
use informer::store::StoreConfig;
use informer::trace::{ReplayListerWatcher, TraceReader, expected_state};
use informer::{Informer, InformerConfig};

use super::args::Policy;
use super::report::{CommonReport, FloodReport, ReplayRun, RunReport};
use super::view::{add_views, verify};
use crate::cli::duration;

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
    #[arg(long, value_parser = duration::seconds_duration)]
    backoff_max: Option<Duration>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `informer replay`; the exit code (1 when verification fails, 2 on a bad trace).
pub(crate) fn run(args: &ReplayArgs) -> i32 {
    match replay(args) {
        Ok(ok) => i32::from(!ok),
        Err(e) => {
            eprintln!("informer replay: {e}");
            2
        }
    }
}

/// The informer's settings: the store shards asked for, and a reflector with a 10 ms first
/// backoff capped at `--backoff-max` (default 0.1 s).
fn informer_config(args: &ReplayArgs) -> InformerConfig {
    let mut rc = ReflectorConfig::default();
    let max = args.backoff_max.unwrap_or(Duration::from_millis(100));
    rc.backoff.max = max;
    rc.backoff.initial = Duration::from_millis(10).min(max);
    InformerConfig {
        store: StoreConfig::new().shards(args.shards),
        reflector: rc,
        ..Default::default()
    }
}

/// Replays the trace and prints the report; whether it verified.
fn replay(args: &ReplayArgs) -> Result<bool, String> {
    let path = args.file.display().to_string();
    // The whole trace is read once for the expected state: a bad file fails here, typed.
    let expected =
        expected_state(&args.file, DEFAULT_FRAME_LIMIT).map_err(|e| format!("{path}: {e}"))?;
    let reader = TraceReader::open(&args.file).map_err(|e| format!("{path}: {e}"))?;
    let lw = ReplayListerWatcher::new(reader);
    let runtime = crate::cli::runtime().map_err(|e| e.to_string())?;
    let informer = Informer::new(lw.clone(), informer_config(args));
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
    let common = CommonReport::new(
        &informer,
        expected.events,
        secs,
        &latency,
        &per_handler,
        0,
        problems,
    );
    informer.shutdown();
    let run = ReplayRun {
        trace: path,
        objects: expected.objects.len(),
        resource_version: expected.resource_version,
        trace_lists: expected.lists,
        broken_streams: expected.broken_streams,
        records_served: lw.served(),
        records_skipped: lw.skipped(),
        records_skipped_by_kind: lw
            .skipped_by_kind()
            .into_iter()
            .map(|(k, n)| (k.as_str_name().to_owned(), n))
            .collect(),
        policy: format!("{:?}", args.policy),
    };
    let report = FloodReport {
        common,
        run: RunReport::Replay(run),
    };
    report.print(args.json);
    Ok(report.common.verified)
}
