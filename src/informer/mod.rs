//! The shared index informer, [`Informer`] (client-go `tools/cache/shared_informer.go`), and
//! its parts: handler registration (`registration.rs`), start and shutdown (`lifecycle.rs`),
//! the processing thread (`process.rs`), per-handler resync (`resync.rs`), listers, event
//! streams and metrics. Every public item is re-exported at the crate root.

mod compaction;
mod compression;
mod events;
mod gate;
mod lifecycle;
mod list_compactor;
mod list_sampler;
mod lister;
mod options;
mod process;
mod prometheus;
mod ratio_watch;
mod registration;
mod resync;
mod sink;
mod sync_error;
mod training;
mod transform;
mod typed;

pub use crate::object::{LabelSelector, MAX_SELECTOR_LEN, SelectorError};
pub use compression::{CacheStats, Compression, ZstdOptions};
pub use events::{ERROR_BACKLOG, Event, EventError, EventStream};
pub use lister::{Lister, NamespaceLister};
pub use options::{HandlerOptions, InformerConfig, MIN_RESYNC_PERIOD};
pub use prometheus::InformerMetricsProvider;
pub use registration::Registration;
pub use sync_error::CacheSyncError;
pub use transform::strip_managed_fields;
pub use typed::{TypedIndexError, TypedLister, TypedNamespaceLister};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use crate::distributor::{Distributor, ListenerId, Marker};
use crate::fifo::{DeltaFifo, Filter, Transform};
use crate::object::Object;
use crate::reflector::{
    ListerWatcher, ReflectorConfig, ReflectorError, ReflectorMetrics, WatchErrorHandler,
};
use crate::store::{IndexFunc, Store, StoreError, Writer, store};

use events::ErrorFeed;
use lifecycle::Task;
pub(crate) use options::CENTURY;
use options::normalize_resync;
use registration::SyncSlot;
use resync::Resync;
use sink::{FifoSink, KnownStore};

/// Counters of the processing side.
#[derive(Debug, Default)]
pub struct InformerMetrics {
    /// DeltaFIFO batches applied.
    pub batches: AtomicU64,
    /// Deltas applied.
    pub deltas: AtomicU64,
    /// Notifications published (each counted once, whatever the number of listeners).
    pub notifications: AtomicU64,
    /// Objects rejected because an index function failed on them (the store kept the old state).
    pub rejected: AtomicU64,
}

/// [`Informer::set_transform`] (or [`set_filter`](Informer::set_filter),
/// [`set_watch_error_handler`](Informer::set_watch_error_handler)) after [`Informer::start`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the informer has already started: a transform, filter or watch error handler can only be set before start"
)]
pub struct AlreadyStarted;

/// The writer side, under one lock with what orders registrations against publishes.
struct WriterState {
    writer: Writer,
    /// The processing thread has seen the DeltaFIFO synced (set under this lock).
    synced: bool,
    /// Registrations made before that, waiting for their sync marker.
    awaiting_sync: Vec<(ListenerId, SyncSlot)>,
}

/// State shared by the informer handle, its processing thread and its resync task.
struct Shared {
    fifo: DeltaFifo,
    store: Store,
    distributor: Distributor,
    /// The store writer plus the lock that orders publishes with late registrations: the
    /// processing thread holds it while applying one batch and handing it to every listener
    /// with room (it is released before waiting on a full `Block` listener); a registration
    /// holds it while it snapshots the store and replays it to the new listener. Handlers
    /// never run under it.
    writer: Mutex<WriterState>,
    /// Held by the processing thread for a whole batch, publishing included (also the waits
    /// on full listeners): [`Informer::flush`] takes it to know every applied batch has been
    /// handed to every listener.
    publishing: Mutex<()>,
    seen_rv: Arc<AtomicU64>,
    rv_moved: Arc<tokio::sync::Notify>,
    metrics: InformerMetrics,
    batch_size: usize,
    resync: Arc<Resync>,
    /// Mirrors `WriterState::synced` for lock-free reads (Release after the markers are set).
    synced: AtomicBool,
    /// Reached when the informer synced or shut down: what sync waiters sleep on.
    synced_or_stopped: Marker,
    /// The informer's name (logs, sync errors).
    name: String,
    /// The event streams' shares of the reflector's errors.
    error_feeds: Mutex<Vec<Weak<ErrorFeed>>>,
    /// Time per processed batch (for [`InformerMetricsProvider`]).
    processing: prometheus::LatencyHistogram,
    /// How cached objects are held (see [`compaction`]).
    compression: Compression,
    /// The dictionary objects are compressed with, once trained (or given).
    dictionary: Arc<arc_swap::ArcSwapOption<crate::object::Dictionary>>,
    /// The metadata tails compact objects share (both compactors': the processing thread's
    /// and the reflector's for listed pages).
    tails: crate::object::MetaTails,
    /// Trains the first dictionary from the first list's first objects (compression without a
    /// given dictionary only).
    list_sampler: Option<Arc<list_sampler::ListSampler>>,
    /// The reflector's counters, set by `start`.
    reflector_metrics: OnceLock<Arc<ReflectorMetrics>>,
}

impl Shared {
    fn report_error(&self, err: &ReflectorError) {
        let mut feeds = self
            .error_feeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        feeds.retain(|f| f.strong_count() > 0);
        if feeds.is_empty() {
            return;
        }
        let err = Arc::new(err.clone());
        for feed in feeds.iter().filter_map(Weak::upgrade) {
            feed.push(err.clone());
        }
    }
}

/// One informer (client-go `sharedIndexInformer`, `tools/cache/shared_informer.go`): a
/// [`Reflector`](crate::reflector::Reflector) lists and watches one resource into a [`DeltaFifo`]; one processing thread
/// pops batches of keys, applies their deltas to the [`Store`] and publishes the matching
/// notifications through the [`Distributor`] to every registered handler. Create with
/// [`Informer::new`], register handlers, then [`Informer::start`].
///
/// - Handlers are [`EventHandler`](crate::EventHandler)s (a trait, or closures through
///   [`HandlerFns`](crate::HandlerFns)) each on its own thread, or
///   [`NotificationStream`](crate::distributor::NotificationStream)s
///   read by a task ([`add_stream`](Self::add_stream)), each with its own
///   [`OverflowPolicy`](crate::OverflowPolicy) and resync period ([`HandlerOptions`]),
///   registered before or after start ([`add_event_handler`](Self::add_event_handler) says
///   what a late handler receives).
/// - [`Registration::has_synced`] turns true once the informer has synced *and* that handler
///   has handled its initial adds (client-go `ResourceEventHandlerRegistration.HasSynced`).
/// - Resync: each handler's period (≥ 1 s, 0 = never); sync updates go only to the handlers
///   due, real changes to all, so a resync never adds work for the others.
/// - [`Lister`] and [`TypedLister`] read the store (lock-free snapshots).
/// - A filter ([`set_filter`](Self::set_filter)) keeps the objects it rejects out of the
///   cache; [`refilter`](Self::refilter) applies it again once its answer changed (a sharded
///   controller whose shard assignment moved).
///
/// # Consistency
/// Notifications are published after the store holds the change, so a handler reading the
/// store may see a newer state than its notification (as in client-go). The store's
/// resourceVersion only advances to what the reflector has seen when every delta up to it has
/// been applied: [`Store::wait_for`] after a controller's own write is sound.
pub struct Informer<L: ListerWatcher> {
    shared: Arc<Shared>,
    lw: Arc<L>,
    reflector_config: ReflectorConfig,
    /// [`InformerConfig::reflector_thread`].
    reflector_thread: bool,
    /// Set by `start`; `set_transform` and `set_filter` check it under the `transform` lock.
    started: AtomicBool,
    /// A transform set before start, handed to the reflector's sink by `start`.
    transform: Mutex<Option<Transform>>,
    /// A filter set before start (written under the `transform` lock), handed to the sink by
    /// `start`.
    filter: Mutex<Option<Filter>>,
    /// With a filter, set by `start`: the sink that judges objects and the reflector's relist
    /// requests (what `refilter` uses).
    refilter: OnceLock<(Arc<FifoSink>, Arc<tokio::sync::Notify>)>,
    /// The user's watch error handler, handed to the reflector by `start`.
    watch_error_handler: Mutex<Option<WatchErrorHandler>>,
    default_resync: Duration,
    next_handler: AtomicU64,
    tasks: Mutex<Vec<Task>>,
    /// The stop gates of the async tasks (see `gate.rs`), set once by `start`: every
    /// `shutdown` stops them all.
    gates: OnceLock<[Arc<gate::Gate>; 2]>,
}

impl<L: ListerWatcher> std::fmt::Debug for Informer<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("name", &self.shared.name)
            .field("started", &self.started.load(Ordering::Relaxed))
            .field("has_synced", &self.has_synced())
            .field("objects", &self.shared.store.len())
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher> Informer<L> {
    /// An informer over `lw` (client-go `NewSharedIndexInformer`). Nothing runs until
    /// [`Informer::start`].
    pub fn new(lw: L, config: InformerConfig) -> Self {
        let name = config.name.unwrap_or_else(|| lw.describe());
        let (reader, writer) = store(config.store);
        // No transform in the queue: the reflector's sink transforms, then filters, before
        // anything is queued (see `FifoSink`).
        let fifo = DeltaFifo::builder()
            .kind(config.fifo)
            .known_objects(Arc::new(KnownStore(reader.clone())))
            .build();
        let rv_moved = Arc::new(tokio::sync::Notify::new());
        let dictionary = Arc::new(arc_swap::ArcSwapOption::from(match &config.compression {
            Compression::Zstd(o) => o.dictionary.clone(),
            Compression::None => None,
        }));
        Informer {
            shared: Arc::new(Shared {
                fifo,
                store: reader,
                distributor: Distributor::new(),
                writer: Mutex::new(WriterState {
                    writer,
                    synced: false,
                    awaiting_sync: Vec::new(),
                }),
                publishing: Mutex::new(()),
                seen_rv: Arc::new(AtomicU64::new(0)),
                rv_moved: rv_moved.clone(),
                metrics: InformerMetrics::default(),
                batch_size: if config.batch_size == 0 {
                    1024
                } else {
                    config.batch_size
                },
                resync: Arc::new(Resync::new()),
                synced: AtomicBool::new(false),
                synced_or_stopped: Marker::new(),
                name,
                error_feeds: Mutex::new(Vec::new()),
                processing: prometheus::LatencyHistogram::default(),
                reflector_metrics: OnceLock::new(),
                list_sampler: match &config.compression {
                    Compression::Zstd(o) if o.dictionary.is_none() => Some(Arc::new(
                        list_sampler::ListSampler::new(o, dictionary.clone(), rv_moved.clone()),
                    )),
                    _ => None,
                },
                dictionary,
                tails: crate::object::MetaTails::new(),
                compression: config.compression,
            }),
            lw: Arc::new(lw),
            reflector_config: config.reflector,
            reflector_thread: config.reflector_thread,
            started: AtomicBool::new(false),
            transform: Mutex::new(config.transform),
            filter: Mutex::new(config.filter),
            refilter: OnceLock::new(),
            watch_error_handler: Mutex::new(None),
            default_resync: normalize_resync(config.default_resync),
            next_handler: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
            gates: OnceLock::new(),
        }
    }

    /// The informer's name: [`InformerConfig::name`], or the lister-watcher's description
    /// (client-go `InformerName`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The resourceVersion of the last change applied to the store: every delta up to it has
    /// been applied, a relist's whole list included (client-go's store
    /// `LastStoreSyncResourceVersion`; the reflector's own, which runs ahead of the store, is
    /// `LastSyncResourceVersion`). 0 before the first list. Also [`Store::resource_version`].
    pub fn last_store_sync_resource_version(&self) -> u64 {
        self.shared.store.resource_version()
    }

    /// The lock-free read handle of the informer's store (client-go `GetIndexer`).
    pub fn store(&self) -> Store {
        self.shared.store.clone()
    }

    /// A [`Lister`] over the store (client-go `GetStore` + generated listers).
    pub fn lister(&self) -> Lister {
        Lister::new(self.shared.store.clone())
    }

    /// The distributor feeding the handlers (listener counters, flush).
    pub fn distributor(&self) -> &Distributor {
        &self.shared.distributor
    }

    /// What the cached objects' bytes cost now, counted over one snapshot of the store (O(n)
    /// in the objects; for reports, not for hot paths). See [`Compression`].
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats::of(&self.shared.store.snapshot())
    }

    /// The dictionary cached objects are compressed with: the given one, or the one trained
    /// (`None` before that, and without [`Compression::Zstd`]).
    pub fn dictionary(&self) -> Option<Arc<crate::object::Dictionary>> {
        self.shared.dictionary.load_full()
    }

    /// Processing counters.
    pub fn metrics(&self) -> &InformerMetrics {
        &self.shared.metrics
    }

    /// The reflector's counters, once started.
    pub fn reflector_metrics(&self) -> Option<Arc<ReflectorMetrics>> {
        self.shared.reflector_metrics.get().cloned()
    }

    /// Reports this informer's metrics through `metrics` (see [`InformerMetricsProvider`])
    /// until it is dropped; a second call with the same provider does nothing.
    pub fn report_metrics_to(&self, metrics: &InformerMetricsProvider) {
        metrics.add(Arc::downgrade(&self.shared));
    }

    /// `true` once started.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// `true` once the first list has been applied to the store and its notifications handed
    /// to every handler (client-go `HasSynced`; per handler, see
    /// [`Registration::has_synced`]). One atomic read; callable from a handler.
    pub fn has_synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Adds indexes to the informer's store and indexes every cached object with them, in one
    /// store version (client-go `AddIndexers`, which upstream allows only before start; here
    /// any time). Reads through [`store`](Self::store), [`lister`](Self::lister) and typed
    /// listers see the new indexes complete or not at all.
    ///
    /// # Errors
    /// [`StoreError::IndexExists`] when a name is taken or given twice;
    /// [`StoreError::IndexFunc`] when a function fails on a cached object. The store is then
    /// unchanged.
    pub fn add_indexers<I>(&self, indexers: I) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = (String, IndexFunc)>,
    {
        let mut state = self
            .shared
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.writer.add_indexers(indexers)
    }

    /// Sets the transform applied to every object before it is queued and stored (client-go
    /// `SetTransform`), e.g. dropping `managedFields`. Replaces one set earlier or in
    /// [`InformerConfig::transform`].
    ///
    /// # Errors
    /// [`AlreadyStarted`] after [`start`](Self::start): objects already cached went through
    /// the old one.
    pub fn set_transform(
        &self,
        transform: impl Fn(Arc<Object>) -> Arc<Object> + Send + Sync + 'static,
    ) -> Result<(), AlreadyStarted> {
        let mut slot = self
            .transform
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.started.load(Ordering::Acquire) {
            return Err(AlreadyStarted);
        }
        *slot = Some(Arc::new(transform));
        Ok(())
    }

    /// Sets the filter every object must pass to be cached: objects it rejects (`false`)
    /// never reach the DeltaFIFO nor the store, and handlers never hear of them (as if a
    /// server-side selector had left them out, but decided here, on any content, e.g. the hash
    /// of `namespace/name` for sharded controllers). Replaces one set earlier or in
    /// [`InformerConfig::filter`].
    ///
    /// It runs after the transform, on the transformed object, on the reflector's task: keep
    /// it cheap, and never let it block or wait for a handler.
    /// - In a (re)list, rejected objects are left out: a cached key the filter no longer
    ///   accepts is deleted as any key the list does not hold (a tombstone).
    /// - On the watch, an added or modified object it rejects becomes a deletion (carrying
    ///   that rejected state) when its key is cached or queued (and not already being
    ///   deleted), and is dropped otherwise; deletions pass as without a filter.
    ///
    /// Its answer may change (it may read state the caller swaps): call
    /// [`refilter`](Self::refilter) after each change.
    ///
    /// # Errors
    /// [`AlreadyStarted`] after [`start`](Self::start).
    ///
    /// # Examples
    /// ```
    /// use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use informer::{Informer, InformerConfig};
    /// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
    /// let informer = Informer::new(sim, InformerConfig::default());
    /// // This replica's shard out of 4, swapped when replicas join or leave.
    /// let shard = Arc::new(AtomicU64::new(0));
    /// let mine = shard.clone();
    /// informer
    ///     .set_filter(move |o| {
    ///         let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(o.key());
    ///         hash % 4 == mine.load(Ordering::Acquire)
    ///     })
    ///     .unwrap();
    /// informer.start(&tokio::runtime::Handle::current());
    /// // Later, the assignment moved:
    /// shard.store(2, Ordering::Release);
    /// informer.refilter();
    /// # informer.shutdown_async().await;
    /// # });
    /// ```
    pub fn set_filter(
        &self,
        filter: impl Fn(&Object) -> bool + Send + Sync + 'static,
    ) -> Result<(), AlreadyStarted> {
        let _transform = self
            .transform
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.started.load(Ordering::Acquire) {
            return Err(AlreadyStarted);
        }
        *self.filter.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(filter));
        Ok(())
    }

    /// Applies the filter ([`set_filter`](Self::set_filter)) again after its answer changed,
    /// without waiting for the server:
    /// 1. at once, queues a deletion of every cached (or queued) key whose newest state the
    ///    filter now rejects: handlers get a Delete carrying that state (not a tombstone);
    /// 2. then makes the reflector drop its watch and relist at once (no backoff), so that
    ///    the objects the filter now accepts arrive as Adds. Objects kept all along come back
    ///    unchanged from that relist: only handlers due for a resync get a sync update for
    ///    them, as after any relist.
    ///
    /// Changes the reflector judges concurrently are ordered with the deletions: one judged
    /// under the old answer is queued before them, never after. A call during a list (the
    /// first one included) or a backoff makes the reflector relist once more before it
    /// watches, since part of that list may have been judged under the old answer. Calls in
    /// a row may share one relist.
    ///
    /// Does nothing without a filter, before [`start`](Self::start) (the first list asks
    /// the filter anyway) and after shutdown. It runs the filter on the calling thread, once
    /// per cached object, and waits only while the reflector queues a batch or a list (the
    /// lock they share); it never waits for the server nor for a handler.
    pub fn refilter(&self) {
        let Some((sink, relist)) = self.refilter.get() else {
            return;
        };
        if self.is_stopped() {
            return;
        }
        let deleted = sink.refilter();
        tracing::debug!(informer = %self.shared.name, deleted, "refilter: relist requested");
        relist.notify_one();
    }

    /// Sets the function told of every list and watch failure (client-go
    /// `SetWatchErrorHandler`), besides the `tracing` log and the event streams. It runs on
    /// the reflector's task: keep it short.
    ///
    /// # Errors
    /// [`AlreadyStarted`] after [`start`](Self::start).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use informer::{Informer, InformerConfig};
    /// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
    /// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
    /// let informer = Informer::new(sim, InformerConfig::default());
    /// let failures = Arc::new(AtomicU64::new(0));
    /// let f = failures.clone();
    /// informer
    ///     .set_watch_error_handler(move |e| {
    ///         f.fetch_add(1, Ordering::Relaxed);
    ///         eprintln!("{e}");
    ///     })
    ///     .unwrap();
    /// ```
    pub fn set_watch_error_handler(
        &self,
        handler: impl Fn(&ReflectorError) + Send + Sync + 'static,
    ) -> Result<(), AlreadyStarted> {
        let _transform = self
            .transform
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.started.load(Ordering::Acquire) {
            return Err(AlreadyStarted);
        }
        *self
            .watch_error_handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(handler));
        Ok(())
    }
}
