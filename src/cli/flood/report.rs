//! The report of a flood or replay: serialized as the `--json` output, displayed as the
//! human-readable summary.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use informer::Informer;
use informer::reflector::ListerWatcher;
use serde::{Serialize, Serializer};

use crate::cli::cache::CacheReport;

/// What a flood or replay measured and whether it verified.
#[derive(Debug, Serialize)]
pub(super) struct FloodReport {
    /// What every run reports.
    #[serde(flatten)]
    pub(super) common: CommonReport,
    /// What only a flood or only a replay reports.
    #[serde(flatten)]
    pub(super) run: RunReport,
}

/// The parts of a report every run has: throughput, latency, reflector counters, handlers,
/// memory and verification.
#[derive(Debug, Serialize)]
pub(super) struct CommonReport {
    /// Changes the run made (flood) or the trace holds (replay).
    pub(super) events: u64,
    /// Wall time of the run.
    pub(super) seconds: f64,
    pub(super) events_per_second: f64,
    pub(super) watch_megabytes_per_second: f64,
    /// Bytes of watch stream the reflector read.
    pub(super) watch_bytes: u64,
    /// Server-change-to-handler latency over every handler.
    pub(super) latency_ns: LatencyReport,
    pub(super) lists: u64,
    pub(super) watches: u64,
    pub(super) relists: u64,
    pub(super) watch_timeouts: u64,
    /// Watch events the reflector received.
    pub(super) watch_events: u64,
    pub(super) errors: u64,
    pub(super) backoffs: u64,
    /// Number of handlers.
    pub(super) handlers: u64,
    pub(super) per_handler: Vec<HandlerReport>,
    /// Largest `max_pending` of any handler.
    pub(super) max_pending: u64,
    /// Panics over every handler.
    pub(super) panics: u64,
    /// `VmHWM` of `/proc/self/status`; `null` where that is not readable.
    pub(super) peak_rss_bytes: Option<u64>,
    /// Bytes per cached object and compression ratio at the end (floods only).
    pub(super) cache: Option<CacheReport>,
    /// Whether the store and every view equal the expected objects.
    pub(super) verified: bool,
    /// What differed (empty when verified).
    pub(super) problems: Vec<String>,
}

/// Quantiles of a latency histogram, nanoseconds.
#[derive(Debug, Serialize)]
pub(super) struct LatencyReport {
    pub(super) p50: u64,
    pub(super) p99: u64,
    pub(super) p999: u64,
    pub(super) max: u64,
    /// Values recorded.
    pub(super) samples: u64,
}

/// One handler's counters.
#[derive(Debug, Serialize)]
pub(super) struct HandlerReport {
    /// `handler-N`.
    pub(super) name: String,
    /// Whether it spent `--slow-handler-delay` per notification.
    pub(super) slow: bool,
    /// Notifications its view received.
    pub(super) notifications: u64,
    pub(super) delivered: u64,
    pub(super) coalesced: u64,
    pub(super) max_pending: u64,
    pub(super) panics: u64,
}

/// What only one kind of run reports.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum RunReport {
    /// `informer flood`.
    Flood(Box<FloodRun>),
    /// `informer replay`.
    Replay(ReplayRun),
}

/// What a flood reports beyond [`CommonReport`].
#[derive(Debug, Serialize)]
pub(super) struct FloodRun {
    /// The `--template`, as its variant name.
    pub(super) template: String,
    /// The `--format`, as its variant name.
    pub(super) format: String,
    /// `in-process`, or `http URL (ACCEPT)`.
    pub(super) transport: String,
    /// Objects on the server at the end.
    pub(super) objects: usize,
    /// The resourceVersion verified at.
    pub(super) resource_version: u64,
    /// Start to synced informer.
    pub(super) initial_list_seconds: f64,
    /// Time the generator ran.
    pub(super) generate_seconds: f64,
    pub(super) time: TimeReport,
    /// Most resourceVersions the store was behind the server after a generator step.
    pub(super) store_lag_max: u64,
    /// The `--policy`, as its variant name.
    pub(super) policy: String,
    pub(super) slow_handlers: u64,
    pub(super) slow_handler_delay_ns: u64,
    pub(super) seed: u64,
    /// Changes the generator made at one instant (`--step`, or what `--rate` implies).
    pub(super) step: u64,
    /// With `--fault-every`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) faults: Option<FaultsReport>,
    /// With `--record`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) record: Option<RecordReport>,
}

/// Where the wall time after the flood's start went: generating (flow-control waits
/// included), waiting for the last faults to fire, the store catching up, the handlers
/// draining; and the waits inside the run. Seconds.
#[derive(Debug, Serialize)]
pub(super) struct TimeReport {
    pub(super) generate_seconds: f64,
    pub(super) last_faults_seconds: f64,
    pub(super) store_catch_up_seconds: f64,
    pub(super) handler_drain_seconds: f64,
    /// The generator held back by the simulator's flow control.
    pub(super) flow_control_wait_seconds: f64,
    /// The reflector's backoff sleeps.
    pub(super) backoff_seconds: f64,
    /// Waits a `Retry-After` added to the backoff.
    pub(super) retry_after_extra_seconds: f64,
}

/// The faults `--fault-every` injected.
#[derive(Debug, Serialize)]
pub(super) struct FaultsReport {
    /// `--fault-every`.
    pub(super) every: u64,
    pub(super) injected: u64,
    /// Faults the simulator saw fire (the stream faults that make list and watch faults fire
    /// included).
    pub(super) fired: u64,
    /// Faults still waiting for a request at the end.
    pub(super) pending: usize,
    /// Kinds in the catalogue.
    pub(super) kinds: usize,
    pub(super) kinds_fired: usize,
    /// The kinds injected, sorted.
    pub(super) kinds_list: Vec<String>,
    /// Per catalogue entry, in catalogue order.
    pub(super) per_kind: Vec<KindReport>,
}

/// Where the wall time of one fault kind's cycles went (a cycle runs from the fault's
/// injection to the next fault's injection, or to the end of the run).
#[derive(Debug, Serialize)]
pub(super) struct KindReport {
    /// The fault, as `Fault`'s `Display` writes it.
    pub(super) kind: String,
    pub(super) cycles: u64,
    /// Events the generator made during the cycles.
    pub(super) events: u64,
    pub(super) cycle_seconds: f64,
    /// Injection to firing, as the generator saw it (at step granularity).
    pub(super) fire_seconds: f64,
    pub(super) flow_control_wait_seconds: f64,
    pub(super) backoff_seconds: f64,
    pub(super) retry_after_extra_seconds: f64,
    pub(super) backoffs: u64,
    pub(super) watch_timeouts: u64,
    pub(super) relists: u64,
}

/// The trace `--record` wrote.
#[derive(Debug, Serialize)]
pub(super) struct RecordReport {
    pub(super) path: String,
    /// Records written.
    pub(super) records: Option<u64>,
}

/// What a replay reports beyond [`CommonReport`].
#[derive(Debug, Serialize)]
pub(super) struct ReplayRun {
    /// The trace file.
    pub(super) trace: String,
    /// Objects the trace implies at its end.
    pub(super) objects: usize,
    /// The last resourceVersion the trace implies.
    pub(super) resource_version: u64,
    /// Lists in the trace.
    pub(super) trace_lists: u64,
    pub(super) broken_streams: u64,
    pub(super) records_served: u64,
    pub(super) records_skipped: u64,
    /// Skipped records by record kind name, in the order the trace reader gives.
    #[serde(serialize_with = "as_map")]
    pub(super) records_skipped_by_kind: Vec<(String, u64)>,
    /// The `--policy`, as its variant name (in the title only).
    #[serde(skip)]
    pub(super) policy: String,
}

/// Serializes pairs as a map, in their order.
fn as_map<S: Serializer>(pairs: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, n)| (k, n)))
}

impl CommonReport {
    /// The common part of the report of a run through `informer` that took `secs` seconds for
    /// `events` changes: `latency` and `per_handler` (notifications) come from
    /// [`verify`](super::view::verify), the last `slow` handlers are the slow ones.
    pub(super) fn new<L: ListerWatcher>(
        informer: &Informer<L>,
        events: u64,
        secs: f64,
        latency: &Histogram<u64>,
        per_handler: &[u64],
        slow: u64,
        problems: Vec<String>,
    ) -> Self {
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
        CommonReport {
            events,
            seconds: secs,
            events_per_second: events as f64 / secs,
            watch_megabytes_per_second: stats.watch_bytes as f64 / 1e6 / secs,
            watch_bytes: stats.watch_bytes,
            latency_ns: LatencyReport {
                p50: latency.value_at_quantile(0.5),
                p99: latency.value_at_quantile(0.99),
                p999: latency.value_at_quantile(0.999),
                max: latency.max(),
                samples: latency.len(),
            },
            lists: stats.lists,
            watches: stats.watches,
            relists: stats.relists,
            watch_timeouts: stats.watch_timeouts,
            watch_events: stats.events,
            errors: stats.errors,
            backoffs: stats.backoffs,
            handlers: n,
            per_handler: listener_stats
                .iter()
                .zip(per_handler)
                .enumerate()
                .map(|(i, (s, &got))| HandlerReport {
                    name: format!("handler-{i}"),
                    slow: (i as u64) >= n - slow.min(n),
                    notifications: got,
                    delivered: s.delivered,
                    coalesced: s.coalesced,
                    max_pending: s.max_pending,
                    panics: s.panics,
                })
                .collect(),
            max_pending: listener_stats
                .iter()
                .map(|s| s.max_pending)
                .max()
                .unwrap_or(0),
            panics: listener_stats.iter().map(|s| s.panics).sum(),
            peak_rss_bytes: crate::cli::cache::proc_status_bytes("VmHWM:"),
            cache: None,
            verified: problems.is_empty(),
            problems,
        }
    }
}

impl FloodReport {
    /// Prints the report to stdout: pretty JSON, or the [`Display`](fmt::Display) summary.
    pub(super) fn print(&self, as_json: bool) {
        if as_json {
            println!("{}", serde_json::to_string_pretty(self).unwrap_or_default());
        } else {
            print!("{self}");
        }
    }

    /// Objects and resourceVersion verified at.
    fn expected(&self) -> (usize, u64) {
        match &self.run {
            RunReport::Flood(f) => (f.objects, f.resource_version),
            RunReport::Replay(r) => (r.objects, r.resource_version),
        }
    }
}

impl fmt::Display for FloodReport {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.common;
        let flood = match &self.run {
            RunReport::Flood(f) => Some(&**f),
            RunReport::Replay(_) => None,
        };
        match &self.run {
            RunReport::Flood(f) => writeln!(
                out,
                "flood: {} events over {} objects ({} template, {}), {} handlers ({}, {} slow)",
                c.events, f.objects, f.template, f.format, c.handlers, f.policy, f.slow_handlers
            )?,
            RunReport::Replay(r) => writeln!(
                out,
                "replay: {} events from {} ({} lists in the trace), {} handlers ({})",
                c.events, r.trace, r.trace_lists, c.handlers, r.policy
            )?,
        }
        if let Some(f) = flood {
            writeln!(out, "  transport:          {}", f.transport)?;
            writeln!(out, "  initial list:       {:.2} s", f.initial_list_seconds)?;
        }
        writeln!(
            out,
            "  throughput:         {:.0} events/s, {:.1} MB/s of watch stream ({:.2} s)",
            c.events_per_second, c.watch_megabytes_per_second, c.seconds
        )?;
        let l = &c.latency_ns;
        if l.samples > 0 {
            writeln!(
                out,
                "  handler latency:    p50 {:?}  p99 {:?}  p999 {:?}  (server change → handler, {} samples)",
                Duration::from_nanos(l.p50),
                Duration::from_nanos(l.p99),
                Duration::from_nanos(l.p999),
                l.samples
            )?;
        }
        if let Some(f) = flood {
            writeln!(
                out,
                "  store lag:          max {} resourceVersions behind the server (sampled per step)",
                f.store_lag_max
            )?;
        }
        writeln!(
            out,
            "  reflector:          {} lists ({} relists), {} watches, {} watch timeouts, {} errors",
            c.lists, c.relists, c.watches, c.watch_timeouts, c.errors
        )?;
        if let Some(faults) = flood.and_then(|f| f.faults.as_ref()) {
            writeln!(
                out,
                "  faults:             {} injected, {} fired, {} of {} kinds, {} pending",
                faults.injected, faults.fired, faults.kinds_fired, faults.kinds, faults.pending
            )?;
        }
        if let Some(rec) = flood.and_then(|f| f.record.as_ref()) {
            let records = rec.records.map_or("null".to_owned(), |n| n.to_string());
            writeln!(
                out,
                "  recorded:           {records} records to {}",
                rec.path
            )?;
        }
        for h in &c.per_handler {
            writeln!(
                out,
                "  {:<18}  {} notifications, max pending {}, panics {}{}",
                format!("{}:", h.name),
                h.notifications,
                h.max_pending,
                h.panics,
                if h.slow { " (slow)" } else { "" }
            )?;
        }
        if let Some(rss) = c.peak_rss_bytes {
            writeln!(
                out,
                "  peak RSS:           {:.1} MiB",
                rss as f64 / (1024.0 * 1024.0)
            )?;
        }
        if let Some(cache) = &c.cache {
            writeln!(out, "  cache:              {}", cache.line())?;
        }
        if c.verified {
            let (objects, rv) = self.expected();
            writeln!(
                out,
                "  verified:           store and all {} handler views equal the expected {objects} objects at resourceVersion {rv}",
                c.handlers
            )
        } else {
            writeln!(out, "  VERIFICATION FAILED:")?;
            for p in &c.problems {
                writeln!(out, "    {p}")?;
            }
            Ok(())
        }
    }
}
