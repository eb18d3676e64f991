//! [`InformerMetricsProvider`]: informers' metrics for Prometheus (prometheus-client), under
//! the names of client-go's informer metrics provider (`tools/cache`,
//! `SetInformerMetricsProvider`; the component-base names `informer_queued_items`,
//! `informer_processing_latency_seconds`, `informer_store_resource_version`), plus what
//! client-go does not export: per-handler pending notifications and the reflector's counters.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::{Registry, Unit};

use super::Shared;

/// Upper bounds (seconds) of the processing-latency histogram: 1 µs to 10 s by powers of ten
/// (one batch: apply to the store and hand to every handler). An implicit `+Inf` follows.
const BOUNDS: [f64; 8] = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// A fixed-bucket histogram of durations in atomics (written by the processing thread only,
/// read by scrapes). It is the provider's only hot-path cost: one clock read per processed
/// batch (not per object); gauges and counters are read when scraped.
#[derive(Debug, Default)]
pub(crate) struct LatencyHistogram {
    /// Per-bucket (not cumulative) counts; the last is `+Inf`.
    counts: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    pub(crate) fn observe(&self, d: Duration) {
        let v = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| v <= *b).unwrap_or(BOUNDS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let buckets = BOUNDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(counts.iter().copied())
            .collect();
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        (sum, counts.iter().sum(), buckets)
    }
}

/// The Prometheus metrics of any number of informers, in one [`Registry`]. Register it once
/// ([`register`](Self::register)), then hand it to each informer
/// ([`Informer::report_metrics_to`](super::Informer::report_metrics_to)). Every scrape
/// reports, per informer, labelled `name="<informer name>"`:
///
/// | metric | type | meaning |
/// |---|---|---|
/// | `informer_queued_items` | gauge | keys waiting in the DeltaFIFO |
/// | `informer_processing_latency_seconds` | histogram | per popped batch: applying it to the store and handing its notifications to every handler |
/// | `informer_store_resource_version` | gauge | the store's resourceVersion ([`Informer::last_store_sync_resource_version`](super::Informer::last_store_sync_resource_version)) |
/// | `informer_handler_pending` | gauge | per handler (label `handler`): notifications published to it and not yet handled |
/// | `informer_reflector_lists_total` | counter | lists (all pages of one count once) |
/// | `informer_reflector_watches_total` | counter | watches opened |
/// | `informer_reflector_events_total` | counter | watch events received |
/// | `informer_reflector_errors_total` | counter | list/watch failures |
///
/// A dropped informer stops being reported.
///
/// # Examples
/// ```
/// use informer::{Informer, InformerConfig, InformerMetricsProvider};
/// use prometheus_client::encoding::text::encode;
/// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
/// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
///
/// let (registry, metrics) = InformerMetricsProvider::new_registry();
/// let mut config = InformerConfig::default();
/// config.name = Some("pods".into());
/// let informer = Informer::new(sim, config);
/// informer.report_metrics_to(&metrics);
///
/// let mut text = String::new();
/// encode(&mut text, &registry).unwrap();
/// assert!(text.contains("informer_queued_items{name=\"pods\"} 0\n"));
/// ```
#[derive(Clone, Default)]
pub struct InformerMetricsProvider {
    informers: Arc<Mutex<Vec<Weak<Shared>>>>,
}

impl InformerMetricsProvider {
    /// Adds the informers' collector to `registry` (its prefix and labels apply) and returns
    /// the handle informers report through.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = InformerMetricsProvider::default();
        registry.register_collector(Box::new(metrics.clone()));
        metrics
    }

    /// A fresh registry holding only the informers' collector.
    pub fn new_registry() -> (Registry, Self) {
        let mut registry = Registry::default();
        let metrics = Self::register(&mut registry);
        (registry, metrics)
    }

    pub(super) fn add(&self, shared: Weak<Shared>) {
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        informers.retain(|i| i.strong_count() > 0);
        if !informers.iter().any(|i| i.ptr_eq(&shared)) {
            informers.push(shared);
        }
    }

    fn live(&self) -> Vec<Arc<Shared>> {
        let mut informers = self
            .informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        informers.retain(|i| i.strong_count() > 0);
        informers.iter().filter_map(Weak::upgrade).collect()
    }
}

impl fmt::Debug for InformerMetricsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerMetricsProvider")
            .field("informers", &self.live().len())
            .finish()
    }
}

type NoExemplar<V> = Option<&'static Exemplar<NoLabelSet, V>>;

impl Collector for InformerMetricsProvider {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let informers = self.live();
        if informers.is_empty() {
            return Ok(());
        }
        let gauge = |enc: &mut DescriptorEncoder,
                     name: &str,
                     help: &str,
                     value: &dyn Fn(&Shared) -> u64|
         -> fmt::Result {
            let mut metric = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for s in &informers {
                let labels = [("name", s.name.as_str())];
                metric.encode_family(&labels)?.encode_gauge(&value(s))?;
            }
            Ok(())
        };
        gauge(
            &mut enc,
            "informer_queued_items",
            "Keys waiting in the informer's DeltaFIFO",
            &|s| s.fifo.len() as u64,
        )?;
        gauge(
            &mut enc,
            "informer_store_resource_version",
            "The resourceVersion the informer's store reflects",
            &|s| s.store.resource_version(),
        )?;
        {
            let mut metric = enc.encode_descriptor(
                "informer_processing_latency",
                "Time to apply one popped batch to the store and hand it to every handler",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for s in &informers {
                let (sum, count, buckets) = s.processing.snapshot();
                let labels = [("name", s.name.as_str())];
                metric
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
            }
        }
        {
            let mut metric = enc.encode_descriptor(
                "informer_handler_pending",
                "Notifications published to a handler and not yet handled",
                None,
                MetricType::Gauge,
            )?;
            for s in &informers {
                for l in s.distributor.listeners() {
                    let labels = [("name", s.name.as_str()), ("handler", l.name())];
                    metric
                        .encode_family(&labels)?
                        .encode_gauge(&l.stats().pending)?;
                }
            }
        }
        type Pick = fn(&crate::reflector::ReflectorMetrics) -> &AtomicU64;
        let counters: [(&str, &str, Pick); 4] = [
            (
                "informer_reflector_lists",
                "Lists made by the informer's reflector",
                |m| &m.lists,
            ),
            (
                "informer_reflector_watches",
                "Watches opened by the informer's reflector",
                |m| &m.watches,
            ),
            (
                "informer_reflector_events",
                "Watch events received by the informer's reflector",
                |m| &m.events,
            ),
            (
                "informer_reflector_errors",
                "List and watch failures seen by the informer's reflector",
                |m| &m.errors,
            ),
        ];
        for (name, help, pick) in counters {
            let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for s in &informers {
                let value = s
                    .reflector_metrics
                    .get()
                    .map_or(0, |m| pick(m).load(Ordering::Relaxed));
                let labels = [("name", s.name.as_str())];
                metric
                    .encode_family(&labels)?
                    .encode_counter(&value, None as NoExemplar<u64>)?;
            }
        }
        Ok(())
    }
}
