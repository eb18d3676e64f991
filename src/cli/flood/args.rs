//! The flags of `informer flood` and the choices they name.

use std::time::Duration;

use informer::InformerConfig;

use crate::cli::cache::CompressionArg;
use informer::distributor::OverflowPolicy;
use informer::fifo::FifoKind;
use informer::reflector::ReflectorConfig;
use informer::store::StoreConfig;

use crate::cli::duration;
use crate::cli::sim_args::{Format, SimFlags, Template};

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

impl Policy {
    /// The distributor's policy this names.
    pub(super) fn overflow_policy(self) -> OverflowPolicy {
        match self {
            Policy::Unbounded => OverflowPolicy::Unbounded,
            Policy::Block => OverflowPolicy::Block { capacity: 64 },
            Policy::Coalesce => OverflowPolicy::CoalesceByKey,
        }
    }
}

impl Fifo {
    /// The informer's queue this names.
    pub(super) fn kind(self) -> FifoKind {
        match self {
            Fifo::Delta => FifoKind::DeltaFifo,
            Fifo::Real => FifoKind::RealFifo,
        }
    }
}

/// Arguments of `informer flood`.
#[derive(Debug, clap::Args)]
pub(crate) struct FloodArgs {
    /// Objects the flood keeps alive (it creates up to this many, then mostly updates); at
    /// most 10 million.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub(super) objects: u64,
    /// Changes (ADDED/MODIFIED/DELETED events) to make after the initial list; at most 10
    /// billion (default 500 000 unless `--duration` is given).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=10_000_000_000))]
    pub(super) events: Option<u64>,
    /// Flood for this many seconds instead of a number of events.
    #[arg(long, conflicts_with = "events", value_parser = duration::seconds_duration)]
    pub(super) duration: Option<Duration>,
    /// Changes per second the generator aims at, made one at a time (above 100 000/s in
    /// steps of ⌈rate / 100 000⌉; `--step` sets it), so that the latency figure is each
    /// change's own reaction time (default: as fast as the pipeline takes them, in steps of
    /// 256). The generator sleeps only once it is at least 25 µs ahead of its schedule; a change
    /// due sooner is made after it yields its core once (so that the threads the last change
    /// woke run first), and one overdue at once. With `--server` each step is one request, and
    /// changes the server makes by itself (`serve --rate`) shift the latency figures.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) rate: Option<u64>,
    /// Changes the generator makes at one instant (one step) instead of the default (see
    /// `--rate`); at most 65 536. A paced flood then sleeps between steps, so its events
    /// arrive in bursts of this many, as a busy API server sends a watch its events in batches;
    /// each latency is then measured from its step's start.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(super) step: Option<u64>,
    /// Event handlers (listeners), each on its own thread keeping its own view; at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub(super) handlers: u64,
    /// How many of the handlers are slow (the last ones): each spends `--slow-handler-delay`
    /// per notification.
    #[arg(long, default_value_t = 0)]
    pub(super) slow_handlers: u64,
    /// Time a slow handler spends per notification (`50us`, `2ms`, `0.5s`). Sleeps are
    /// taken once at least 1 ms is owed, so the average cost per notification is exact even
    /// below the OS sleep granularity.
    #[arg(long, default_value = "100us", value_parser = duration::delay)]
    pub(super) slow_handler_delay: Duration,
    /// Object template.
    #[arg(long, value_enum, default_value_t = Template::HeadPod)]
    pub(super) template: Template,
    /// Wire encoding the simulator serves (and the informer decodes).
    #[arg(long, value_enum, default_value_t = Format::Protobuf)]
    pub(super) format: Format,
    /// Extra labels on every object.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub(super) labels: u32,
    /// Annotations on every object.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub(super) annotations: u32,
    /// Overflow policy of every handler.
    #[arg(long, value_enum, default_value_t = Policy::Unbounded)]
    pub(super) policy: Policy,
    /// The informer's queue.
    #[arg(long, value_enum, default_value_t = Fifo::Delta)]
    pub(super) fifo: Fifo,
    /// Percent of changes that are updates once the object count is reached (the rest are
    /// creates and deletes in equal parts).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(super) update_percent: u32,
    /// Relative weights `CREATE:UPDATE:DELETE` of changes once the object count is reached
    /// (e.g. `10:80:10`); replaces `--update-percent`.
    #[arg(long, conflicts_with = "update_percent", value_parser = parse_mix)]
    pub(super) mix: Option<(u32, u32, u32)>,
    /// Store shards.
    #[arg(long, default_value_t = 16)]
    pub(super) shards: usize,
    /// Seed of the simulator (same seed, same objects and events).
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// Inject a fault every this many events, cycling through every one-shot fault of the
    /// simulator (`informer::sim::Fault::catalogue`: list and watch answers 410, 429, 500,
    /// too-large, too-large-legacy, refused; stream close, 410, corrupt, oversized, stall,
    /// reset), each list or watch fault followed by a stream fault that makes the reflector
    /// list or watch again so that it fires. A fault is injected only once the previous one
    /// fired, and the flood waits for that (at most 60 s) rather than run more than this many
    /// events past a fault that has not fired: faults come every this many events however long
    /// recoveries take. Needs the simulator in this process (not `--server`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) fault_every: Option<u64>,
    /// `retryAfterSeconds` of the 429 answers that `--fault-every` injects (the catalogue's
    /// `list:429:1` and `watch:429:1`) and of the simulator's too-large answers (default 1, as
    /// API servers send). 0 sends none, which client-go takes as no suggestion: the reflector
    /// waits its own backoff only. A stress run's knob: whole seconds of waiting per fault add
    /// up over hundreds of faults.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub(super) fault_retry_after: Option<u32>,
    /// Reflector watch timeout in seconds (client-go's 5 min by default; 1 s with
    /// `--fault-every`, so that a stalled stream costs at most 2 s).
    #[arg(long, value_parser = duration::seconds_duration)]
    pub(super) watch_timeout: Option<Duration>,
    /// Largest reflector backoff in seconds (client-go's 30 s by default; 0.1 s with
    /// `--fault-every`: faults every few seconds never let the backoff reset, and at 30 s (or
    /// even 1 s, plus jitter) the flood would spend its time waiting; the first backoff is then
    /// 10 ms instead of 800 ms).
    #[arg(long, value_parser = duration::seconds_duration)]
    pub(super) backoff_max: Option<Duration>,
    /// Write the stream the informer consumed to this trace file (`proto/trace.proto`), for
    /// `informer replay`.
    #[arg(long, value_name = "FILE")]
    pub(super) record: Option<std::path::PathBuf>,
    /// Directory of the fixtures (default: ../shared/fixtures).
    #[arg(long)]
    pub(super) fixtures: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// How the informer reaches the simulator: method calls in one process, or HTTP over a
    /// loopback socket (protobuf or JSON per `--accept`).
    #[arg(long, value_enum, default_value_t = Transport::InProcess)]
    pub(super) transport: Transport,
    /// With `--transport http`: use a running `informer serve` at this URL instead of
    /// starting one (its objects and template are its own; start it with `--rate 0`).
    #[arg(long)]
    pub(super) server: Option<String>,
    /// With `--transport http`: what the client accepts.
    #[arg(long, value_enum, default_value_t = Accept::Protobuf)]
    pub(super) accept: Accept,
    #[command(flatten)]
    pub(super) sim: SimFlags,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub(super) no_progress: bool,
    /// How the informer's cache holds objects: as received, or zstd-compressed once idle (the
    /// report's `cache` figures are then taken once every object is compressed).
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub(super) compression: CompressionArg,
    /// Run the informer's reflector on a thread of its own (`InformerConfig::reflector_thread`)
    /// instead of on the flood's tokio runtime.
    #[arg(long)]
    pub(super) reflector_thread: bool,
}

impl FloodArgs {
    /// The informer's settings: the queue and store shards asked for, and
    /// [`reflector_config`](Self::reflector_config).
    pub(super) fn informer_config(&self) -> InformerConfig {
        InformerConfig {
            store: StoreConfig::new().shards(self.shards),
            reflector: self.reflector_config(),
            fifo: self.fifo.kind(),
            compression: self.compression.config(),
            reflector_thread: self.reflector_thread,
            ..Default::default()
        }
    }

    /// Reflector settings of a flood: client-go's, with the shorter watch timeout, a 10 ms
    /// first backoff and the 100 ms backoff cap of a fault run unless given.
    fn reflector_config(&self) -> ReflectorConfig {
        let faults = self.fault_every.is_some();
        let mut rc = ReflectorConfig::default();
        if let Some(t) = self
            .watch_timeout
            .or(faults.then_some(Duration::from_secs(1)))
        {
            rc = rc.min_watch_timeout(t);
        }
        if faults {
            rc.backoff.initial = Duration::from_millis(10);
        }
        if let Some(m) = self
            .backoff_max
            .or(faults.then_some(Duration::from_millis(100)))
        {
            rc.backoff.max = m;
            rc.backoff.initial = rc.backoff.initial.min(m);
        }
        rc
    }
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
