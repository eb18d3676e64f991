//! Queue metrics: [`QueueStats`] for code, [`QueueMetrics`] for Prometheus (the metric set of
//! client-go `util/workqueue/metrics.go` under the names Kubernetes components export).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::{Registry, Unit};

/// Upper bounds (seconds) of the latency histograms: 10 ns to 10 s by powers of ten, as
/// client-go's provider (`ExponentialBuckets(10e-9, 10, 10)`). An implicit `+Inf` follows.
const BOUNDS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// A fixed-bucket histogram of durations, kept under the queue's lock.
#[derive(Clone, Debug, Default)]
pub(crate) struct Histogram {
    /// Per-bucket (not cumulative) counts; the last is `+Inf`.
    counts: [u64; BOUNDS.len() + 1],
    sum: f64,
    count: u64,
}

impl Histogram {
    pub(crate) fn observe(&mut self, d: Duration) {
        let v = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| v <= *b).unwrap_or(BOUNDS.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    fn buckets(&self) -> Vec<(f64, u64)> {
        BOUNDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().copied())
            .collect()
    }
}

/// A snapshot of one queue's counters ([`WorkQueue::stats`](super::WorkQueue::stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Items waiting to be handed out: queued, or added again while in flight (client-go's
    /// `workqueue_depth`).
    pub depth: usize,
    /// Items in the ready queue ([`WorkQueue::len`](super::WorkQueue::len)).
    pub len: usize,
    /// Items handed to a worker and not yet `done`.
    pub in_flight: usize,
    /// Items waiting for their delay (`add_after`, `add_rate_limited`).
    pub delayed: usize,
    /// Adds that made an item dirty (adds of an item already dirty are not counted), as
    /// `workqueue_adds_total`.
    pub adds: u64,
    /// Calls of `add_after` and `add_rate_limited` before shutdown (`workqueue_retries_total`).
    pub retries: u64,
    /// Sum of the ages of the items in flight. Zero unless the queue has metrics.
    pub unfinished_work: Duration,
    /// Age of the oldest item in flight. Zero unless the queue has metrics.
    pub longest_running: Duration,
    /// Whether shutdown started.
    pub shutting_down: bool,
}

/// What a queue reports at a scrape.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) name: String,
    pub(crate) stats: QueueStats,
    /// Queue latency and work duration, when the queue keeps timings.
    pub(crate) histograms: Option<(Histogram, Histogram)>,
}

/// A queue as the collector sees it, whatever its item type.
pub(crate) trait StatsSource: Send + Sync {
    fn report(&self) -> Report;
}

/// The Prometheus metrics of any number of work queues, in one
/// [`Registry`](prometheus_client::registry::Registry).
///
/// Register it once ([`QueueMetrics::register`]), then give it to each queue's builder
/// ([`Builder::metrics`](super::Builder::metrics)). Every scrape reports, per queue and labelled
/// `name="<queue name>"` (client-go's label):
///
/// | metric | type | meaning |
/// |---|---|---|
/// | `workqueue_depth` | gauge | items waiting to be handed out ([`QueueStats::depth`]) |
/// | `workqueue_adds_total` | counter | adds that made an item dirty |
/// | `workqueue_queue_duration_seconds` | histogram | from an item becoming dirty (or its delay ending) to a worker getting it |
/// | `workqueue_work_duration_seconds` | histogram | from `get` to `done` |
/// | `workqueue_unfinished_work_seconds` | gauge | summed age of the items in flight |
/// | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest item in flight |
/// | `workqueue_retries_total` | counter | `add_after` / `add_rate_limited` calls |
///
/// Histogram buckets are client-go's: 10 ns to 10 s by powers of ten. A dropped queue stops
/// being reported. Queues with metrics read the clock on every add, get and done.
///
/// Nothing is updated on the hot path beyond plain counters under the queue's lock: gauges are
/// computed when scraped, and the two latency histograms are kept by the queue itself and
/// handed to the encoder at scrape time. client-go instead refreshes its in-flight gauges from
/// a goroutine every 500 ms; here a scrape sees the current value.
///
/// # Examples
///
/// ```
/// use informer::workqueue::{QueueMetrics, WorkQueue};
/// use prometheus_client::encoding::text::encode;
///
/// let (registry, metrics) = QueueMetrics::new_registry();
/// let queue = WorkQueue::builder().name("pods").metrics(&metrics).build();
/// queue.add("default/web-0".to_owned());
///
/// let mut text = String::new();
/// encode(&mut text, &registry).unwrap();
/// assert!(text.contains("workqueue_depth{name=\"pods\"} 1\n"));
/// ```
#[derive(Clone, Default)]
pub struct QueueMetrics {
    queues: Arc<Mutex<Vec<Weak<dyn StatsSource>>>>,
}

impl QueueMetrics {
    /// Adds the work-queue collector to `registry` (its prefix and labels apply) and returns
    /// the handle queues report through.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = QueueMetrics::default();
        registry.register_collector(Box::new(metrics.clone()));
        metrics
    }

    /// A fresh registry holding only the work-queue collector, to serve as it is (encode it with
    /// `prometheus_client::encoding::text::encode`) or to add more metrics to.
    pub fn new_registry() -> (Registry, Self) {
        let mut registry = Registry::default();
        let metrics = Self::register(&mut registry);
        (registry, metrics)
    }

    pub(crate) fn add_queue(&self, queue: Weak<dyn StatsSource>) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.retain(|q| q.strong_count() > 0);
        queues.push(queue);
    }

    fn reports(&self) -> Vec<Report> {
        let live: Vec<Arc<dyn StatsSource>> = {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            queues.retain(|q| q.strong_count() > 0);
            queues.iter().filter_map(Weak::upgrade).collect()
        };
        live.iter().map(|q| q.report()).collect()
    }
}

impl fmt::Debug for QueueMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self
            .queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|q| q.strong_count() > 0)
            .count();
        f.debug_struct("QueueMetrics").field("queues", &n).finish()
    }
}

/// No exemplars are attached to these metrics.
type NoExemplar<V> = Option<&'static Exemplar<NoLabelSet, V>>;

fn family<'a>(
    enc: &'a mut DescriptorEncoder,
    reports: &[Report],
    name: &'a str,
    help: &str,
    unit: Option<&'a Unit>,
    kind: MetricType,
    mut sample: impl FnMut(&mut MetricEncoder, &Report) -> fmt::Result,
) -> fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, unit, kind)?;
    for r in reports {
        let labels = [("name", r.name.as_str())];
        let mut m = metric.encode_family(&labels)?;
        sample(&mut m, r)?;
    }
    Ok(())
}

impl Collector for QueueMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let reports = self.reports();
        if reports.is_empty() {
            return Ok(());
        }
        let seconds = Unit::Seconds;
        let (counter, gauge) = (MetricType::Counter, MetricType::Gauge);
        family(
            &mut enc,
            &reports,
            "workqueue_depth",
            "Items waiting in the work queue to be handed to a worker",
            None,
            gauge,
            |m, r| m.encode_gauge(&(r.stats.depth as u64)),
        )?;
        family(
            &mut enc,
            &reports,
            "workqueue_adds",
            "Adds that made an item of the work queue dirty",
            None,
            counter,
            |m, r| m.encode_counter(&r.stats.adds, None as NoExemplar<u64>),
        )?;
        for (name, help, pick) in [
            (
                "workqueue_queue_duration",
                "Time from an item becoming ready in the work queue to a worker getting it",
                0,
            ),
            (
                "workqueue_work_duration",
                "Time from a worker getting an item to marking it done",
                1,
            ),
        ] {
            family(
                &mut enc,
                &reports,
                name,
                help,
                Some(&seconds),
                MetricType::Histogram,
                |m, r| {
                    let empty = Histogram::default();
                    let h = match &r.histograms {
                        Some((latency, _)) if pick == 0 => latency,
                        Some((_, work)) => work,
                        None => &empty,
                    };
                    m.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets(), None)
                },
            )?;
        }
        family(
            &mut enc,
            &reports,
            "workqueue_unfinished_work",
            "Summed age of the items being worked on and not yet done (grows fast when workers are stuck)",
            Some(&seconds),
            gauge,
            |m, r| m.encode_gauge(&r.stats.unfinished_work.as_secs_f64()),
        )?;
        family(
            &mut enc,
            &reports,
            "workqueue_longest_running_processor",
            "Age of the oldest item being worked on",
            Some(&seconds),
            gauge,
            |m, r| m.encode_gauge(&r.stats.longest_running.as_secs_f64()),
        )?;
        family(
            &mut enc,
            &reports,
            "workqueue_retries",
            "Delayed and rate-limited adds to the work queue",
            None,
            counter,
            |m, r| m.encode_counter(&r.stats.retries, None as NoExemplar<u64>),
        )
    }
}
