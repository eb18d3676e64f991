//! One flood through an informer: sync, generate the changes (with faults and pacing), wait
//! for the store and the handlers, verify, report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use informer::Informer;
use informer::reflector::ListerWatcher;
use informer::sim::Truth;
use informer::trace::TraceWriter;

use super::args::FloodArgs;
use super::clock::{Clock, STEP};
use super::faults::{FaultDriver, settle};
use super::progress::Progress;
use super::report::{CommonReport, FloodReport, FloodRun, RecordReport, RunReport, TimeReport};
use super::source::Source;
use super::view::{add_views, verify};
use super::wait::{WaitCounters, us_to_secs};
use crate::cli::cache::{CacheReport, CompressionArg};

/// Most generator steps per second of a paced flood: above this rate a step makes
/// ⌈`rate / PACED_STEPS_PER_SEC`⌉ changes (a step costs the generator a few microseconds).
const PACED_STEPS_PER_SEC: u64 = 100_000;

/// How far ahead of its schedule a paced generator runs before it sleeps. A thread sleep
/// costs the generator several microseconds of CPU (the syscall and a context switch out and
/// back), on the cores the engine under test shares: at 75 000 changes a second, one sleep per
/// change was an eighth of all the CPU time of a run (`perf record`, 2026-12-06). Changes due
/// less than this far ahead are made after one `sched_yield` instead (see `generate`), each
/// still marked as it is made, so the latencies stay each change's own.
const PACE_AHEAD: Duration = Duration::from_micros(25);

/// How many changes a flood makes, in steps of how many.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Changes to make; `u64::MAX` for a `--duration` run.
    limit: u64,
    /// Changes per step: [`STEP`] flat out; one when paced (more above
    /// [`PACED_STEPS_PER_SEC`]).
    step_len: u64,
}

impl Plan {
    /// `--events` (default 500 000), or no bound with `--duration`.
    fn new(args: &FloodArgs) -> Self {
        let limit = match (args.events, args.duration) {
            (Some(n), _) => n,
            (None, Some(_)) => u64::MAX,
            (None, None) => 500_000,
        };
        // A paced flood makes its changes one at a time, so that each event's latency is the
        // engine's reaction to that change, not the drain of a burst made at the same instant.
        let step_len = match (args.step, args.rate) {
            (Some(step), _) => step,
            (None, Some(rate)) => rate.div_ceil(PACED_STEPS_PER_SEC).max(1),
            (None, None) => STEP,
        };
        Plan { limit, step_len }
    }
}

/// What the generator did.
#[derive(Clone, Copy, Debug)]
struct Flooded {
    /// When it started.
    start: Instant,
    /// Changes made.
    made: u64,
    /// Most resourceVersions the store was behind the server after a step.
    lag_max: u64,
}

/// When each phase after the flood's start ended (measured from it), and the waits inside the
/// run.
#[derive(Clone, Copy, Debug)]
struct Timeline {
    generated: Duration,
    faults_settled: Duration,
    store_caught_up: Duration,
    elapsed: Duration,
    waits: WaitCounters,
    /// Whether the store reached the server's resourceVersion after the flood.
    caught_up: bool,
}

/// Runs a flood from `source` through `informer` (whose lister-watcher reaches the source
/// over `transport`, recording to `writer` if given), prints the report; whether it verified.
pub(super) fn run_pipeline<L: ListerWatcher>(
    args: &FloodArgs,
    runtime: &tokio::runtime::Runtime,
    informer: Informer<L>,
    source: &Source,
    transport: &str,
    writer: Option<&Arc<TraceWriter>>,
) -> Result<bool, String> {
    let plan = Plan::new(args);
    // One slot per step of an `--events` run (plus one: the last step may be short), so a
    // small flood allocates a small ring.
    let clock = Arc::new(Clock::new(
        plan.step_len,
        plan.limit.div_ceil(plan.step_len).saturating_add(1),
    ));
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

    let mut faults = args
        .fault_every
        .map(|every| FaultDriver::new(every, args.fault_retry_after));
    let progress = Progress::new(plan.limit, args.duration, !(args.no_progress || args.json));
    let flooded = runtime.block_on(generate(
        args,
        plan,
        &clock,
        &informer,
        source,
        faults.as_mut(),
        &progress,
    ))?;
    let (timeline, target) = drain(runtime, &informer, source, faults.as_mut(), &flooded)?;
    progress.finish();

    let mut problems = Vec::new();
    let store = informer.store();
    if !timeline.caught_up {
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
    let secs = timeline.elapsed.as_secs_f64().max(1e-9);
    let cache = cache_report(&informer, args.compression);
    let mut common = CommonReport::new(
        &informer,
        flooded.made,
        secs,
        &latency,
        &per_handler,
        args.slow_handlers,
        problems,
    );
    common.cache = Some(cache);
    informer.shutdown();
    let mut run = flood_run(args, transport, &truth, list_done, &timeline, &flooded);
    if let (Some(f), Some(sim)) = (&faults, source.local()) {
        run.faults = Some(f.report(&sim.stats()));
    }
    run.record = args.record.as_ref().map(|path| RecordReport {
        path: path.display().to_string(),
        records: writer.map(|w| w.records()),
    });
    let report = FloodReport {
        common,
        run: RunReport::Flood(Box::new(run)),
    };
    report.print(args.json);
    Ok(report.common.verified)
}

/// The flood: a step at a time, recording when each step's changes exist on the server,
/// injecting `faults` and keeping to `--rate`.
async fn generate<L: ListerWatcher>(
    args: &FloodArgs,
    plan: Plan,
    clock: &Clock,
    informer: &Informer<L>,
    source: &Source,
    mut faults: Option<&mut FaultDriver>,
    progress: &Progress,
) -> Result<Flooded, String> {
    let store = informer.store();
    let start = Instant::now();
    clock.set_first_rv(source.resource_version().await? + 1);
    // Thread sleeps of a paced flood wake within a few microseconds instead of Linux's default
    // 50 µs timer slack (which, at tens of thousands of changes a second, would release them
    // in small bursts). Only this thread (block_on's) is affected.
    #[cfg(target_os = "linux")]
    if args.rate.is_some() {
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    }
    let (mut made, mut step, mut lag_max) = (0u64, 0u64, 0u64);
    let mut shown = start;
    while made < plan.limit && args.duration.is_none_or(|d| start.elapsed() < d) {
        let n = plan.step_len.min(plan.limit - made);
        // Marked before the changes too: a handler that sees one before `flood` returns
        // measures from the step's start instead of finding no time (and dropping the sample).
        // The start mark precedes the simulator's flow-control wait (a watcher more than the
        // history window behind), which a change seen mid-step then includes.
        clock.mark(step);
        let rv = source.flood(n).await?;
        clock.mark(step);
        step += 1;
        made += n;
        lag_max = lag_max.max(rv.saturating_sub(store.resource_version()));
        if let (Some(f), Some(sim)) = (faults.as_deref_mut(), source.local()) {
            f.tick(sim, informer, made);
            // Pacing: the flood runs at most `every` events past a fault that has not fired,
            // so that faults come every `every` events however long recoveries take (a fault
            // that never fires holds it back for at most 60 s).
            if f.due(made) {
                settle(sim).await;
                f.tick(sim, informer, made);
            }
        }
        if let Some(rate) = args.rate {
            let due = Duration::from_secs_f64(made as f64 / rate as f64);
            match due.checked_sub(start.elapsed()) {
                Some(wait) if wait >= PACE_AHEAD => pace(wait).await,
                // Ahead, but by less than a sleep is worth: give this core to whatever the last
                // change woke. The kernel often queues the reflector's worker on the waker's
                // core, where it waited for the generator to sleep or be preempted (about 20 µs
                // in a `perf sched timehist` at 3 000/s, 2026-12-07); on a real cluster the API
                // server does not share the client's cores. A generator behind its schedule does
                // not yield, so it still reaches the rate asked for.
                Some(_) => std::thread::yield_now(),
                None => {}
            }
        }
        // The bar at most 20 times a second: a paced flood takes up to 100 000 steps a second.
        let now = Instant::now();
        if now.duration_since(shown) >= Duration::from_millis(50) || made >= plan.limit {
            shown = now;
            progress.update(made, now.duration_since(start));
        }
    }
    Ok(Flooded {
        start,
        made,
        lag_max,
    })
}

/// Waits `wait`: on the tokio timer (millisecond resolution) down to the last 2 ms, then a
/// thread sleep (a few microseconds late with the timer slack `generate` sets), so that changes
/// paced below a millisecond apart are not released in bursts at each timer tick. Blocking is
/// fine here: the generator runs on `block_on`'s own thread, not on a runtime worker.
async fn pace(wait: Duration) {
    const TIMER: Duration = Duration::from_millis(2);
    if let Some(coarse) = wait.checked_sub(TIMER) {
        let end = Instant::now() + wait;
        tokio::time::sleep(coarse).await;
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
    } else {
        std::thread::sleep(wait);
    }
}

/// After the generator: gives faults still waiting for a request (a list fault whose relist
/// has not come yet) a bounded time to fire, waits until the store reflects the server's last
/// change and every handler caught up, closes the last fault cycle; the timeline and the
/// server's resourceVersion the store was to reach.
fn drain<L: ListerWatcher>(
    runtime: &tokio::runtime::Runtime,
    informer: &Informer<L>,
    source: &Source,
    faults: Option<&mut FaultDriver>,
    flooded: &Flooded,
) -> Result<(Timeline, u64), String> {
    let start = flooded.start;
    let generated = start.elapsed();
    if let (Some(sim), Some(_)) = (source.local(), &faults) {
        runtime.block_on(settle(sim));
    }
    let faults_settled = start.elapsed();
    let target = runtime.block_on(source.resource_version())?;
    let caught_up = informer
        .store()
        .wait_for_blocking(target, Duration::from_secs(120))
        .is_ok();
    let store_caught_up = start.elapsed();
    informer.flush();
    let elapsed = start.elapsed();
    if let (Some(f), Some(sim)) = (faults, source.local()) {
        f.close(&sim.stats(), informer, flooded.made);
    }
    let waits = source
        .local()
        .map(|sim| WaitCounters::read(&sim.stats(), informer))
        .unwrap_or_default();
    let timeline = Timeline {
        generated,
        faults_settled,
        store_caught_up,
        elapsed,
        waits,
        caught_up,
    };
    Ok((timeline, target))
}

/// The flood's part of the report, without faults and record.
fn flood_run(
    args: &FloodArgs,
    transport: &str,
    truth: &Truth,
    list_done: Duration,
    t: &Timeline,
    flooded: &Flooded,
) -> FloodRun {
    FloodRun {
        template: format!("{:?}", args.template),
        format: format!("{:?}", args.format),
        transport: transport.to_owned(),
        objects: truth.objects.len(),
        resource_version: truth.resource_version,
        initial_list_seconds: list_done.as_secs_f64(),
        generate_seconds: t.generated.as_secs_f64(),
        time: TimeReport {
            generate_seconds: t.generated.as_secs_f64(),
            last_faults_seconds: (t.faults_settled - t.generated).as_secs_f64(),
            store_catch_up_seconds: (t.store_caught_up - t.faults_settled).as_secs_f64(),
            handler_drain_seconds: (t.elapsed - t.store_caught_up).as_secs_f64(),
            flow_control_wait_seconds: us_to_secs(t.waits.flood_wait_us),
            backoff_seconds: us_to_secs(t.waits.backoff_us),
            retry_after_extra_seconds: us_to_secs(t.waits.retry_after_us),
        },
        store_lag_max: flooded.lag_max,
        policy: format!("{:?}", args.policy),
        slow_handlers: args.slow_handlers,
        slow_handler_delay_ns: args.slow_handler_delay.as_nanos() as u64,
        seed: args.seed,
        step: Plan::new(args).step_len,
        faults: None,
        record: None,
    }
}

/// The cache figures at the end of a run; with compression on, once every cached object is
/// compressed (the processing thread compacts when idle), or once 2 s pass without one more
/// compressed (e.g. too few objects to train a dictionary from).
fn cache_report<L: ListerWatcher>(
    informer: &Informer<L>,
    compression: CompressionArg,
) -> CacheReport {
    if compression != CompressionArg::None {
        let (mut last, mut since) = (usize::MAX, Instant::now());
        loop {
            let s = informer.cache_stats();
            if s.compressed == s.objects {
                break;
            }
            if s.compressed != last {
                (last, since) = (s.compressed, Instant::now());
            } else if since.elapsed() >= Duration::from_secs(2) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    CacheReport::new(compression, &informer.cache_stats())
}
