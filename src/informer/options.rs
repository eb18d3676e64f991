//! [`InformerConfig`] and [`HandlerOptions`].

use std::time::Duration;

use super::compression::Compression;
use crate::distributor::OverflowPolicy;
use crate::fifo::{FifoKind, Filter, Transform};
use crate::reflector::ReflectorConfig;
use crate::store::StoreConfig;

/// Shortest per-handler resync period: shorter non-zero periods are raised to it (client-go
/// `minimumResyncPeriod`, `tools/cache/shared_informer.go`).
pub const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Informer settings.
#[derive(Clone, Default)]
pub struct InformerConfig {
    /// The informer's name in logs, metrics and sync errors (client-go
    /// `SharedIndexInformerOptions.InformerName`); `None` = the lister-watcher's description
    /// (e.g. `v1/pods in default`).
    pub name: Option<String>,
    /// The store's shards and indexers.
    pub store: StoreConfig,
    /// List/watch behaviour.
    pub reflector: ReflectorConfig,
    /// Most keys popped from the DeltaFIFO and applied as one store version: 0 = 1024
    /// (client-go's `PopBatch` takes up to 1 000).
    pub batch_size: usize,
    /// The queue between the reflector and the store: per-key deltas
    /// ([`FifoKind::DeltaFifo`], the default) or every change in order with atomic relists
    /// ([`FifoKind::RealFifo`], client-go's default since 1.33).
    pub fifo: FifoKind,
    /// Applied to every object before it is queued (e.g. [`Object::without_managed_fields`]);
    /// see also [`Informer::set_transform`](super::Informer::set_transform).
    ///
    /// [`Object::without_managed_fields`]: crate::object::Object::without_managed_fields
    pub transform: Option<Transform>,
    /// Objects it rejects are never cached; see
    /// [`Informer::set_filter`](super::Informer::set_filter) and
    /// [`Informer::refilter`](super::Informer::refilter).
    pub filter: Option<Filter>,
    /// Resync period of handlers registered without one (client-go
    /// `defaultEventHandlerResyncPeriod`): zero (the default) = never.
    pub default_resync: Duration,
    /// How cached objects' bytes are held: as received (the default) or zstd-compressed once
    /// the informer is idle.
    pub compression: Compression,
    /// Runs the reflector (list, watch, decoding) on a thread of its own, `informer-watch`,
    /// with a single-threaded tokio runtime, instead of as a task on the runtime passed to
    /// [`Informer::start`](super::Informer::start) (the default, `false`). See
    /// [`Informer::start`](super::Informer::start) for when it pays and what it changes.
    pub reflector_thread: bool,
}

impl std::fmt::Debug for InformerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerConfig")
            .field("name", &self.name)
            .field("store", &self.store)
            .field("reflector", &self.reflector)
            .field("batch_size", &self.batch_size)
            .field("fifo", &self.fifo)
            .field("transform", &self.transform.is_some())
            .field("filter", &self.filter.is_some())
            .field("default_resync", &self.default_resync)
            .field("compression", &self.compression)
            .field("reflector_thread", &self.reflector_thread)
            .finish()
    }
}

/// How to register a handler (client-go `HandlerOptions`): its name, overflow policy and
/// resync period.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use informer::distributor::OverflowPolicy;
/// use informer::HandlerOptions;
///
/// let opts = HandlerOptions::new()
///     .name("pods-controller")
///     .policy(OverflowPolicy::CoalesceByKey)
///     .resync(Duration::from_secs(30));
/// # drop(opts);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct HandlerOptions {
    pub(crate) name: Option<String>,
    pub(crate) policy: OverflowPolicy,
    pub(crate) resync: Option<Duration>,
}

impl HandlerOptions {
    /// Defaults: a generated name (`handler-N`), [`OverflowPolicy::Unbounded`], the informer's
    /// [`InformerConfig::default_resync`].
    pub fn new() -> Self {
        HandlerOptions::default()
    }

    /// The listener's name (also its thread's name, `informer-<name>`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// What happens when the handler falls behind.
    pub fn policy(mut self, policy: OverflowPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How often the handler is told about every cached object again, as *sync* updates
    /// (`old` and `new` with equal resourceVersions): zero = never; shorter than
    /// [`MIN_RESYNC_PERIOD`] = that.
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }
}

/// A resync period as used: zero stays zero (never), anything else at least
/// [`MIN_RESYNC_PERIOD`].
pub(crate) fn normalize_resync(period: Duration) -> Duration {
    // Capped so that `now + period` fits in an `Instant` (`Duration::MAX` would panic the
    // resync task).
    if period.is_zero() {
        period
    } else {
        period.clamp(MIN_RESYNC_PERIOD, CENTURY)
    }
}

/// A century: stands for "never" where a duration is added to an `Instant` (`Duration::MAX`
/// does not fit in one).
pub(crate) const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
