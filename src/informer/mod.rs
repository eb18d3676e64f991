//! The shared index informer: a [`Reflector`] fills a [`DeltaFifo`]; one processing thread pops
//! batches of keys, applies their deltas to the [`Store`] and publishes the matching
//! notifications through the [`Distributor`] to every registered handler. Upstream:
//! `client-go/tools/cache/shared_informer.go` (`sharedIndexInformer`, `HandleDeltas`,
//! `sharedProcessor`) and `controller.go` (`processDeltas`).
//!
//! - Handlers are [`EventHandler`]s (a trait, or closures through
//!   [`HandlerFns`](crate::distributor::HandlerFns)) each on its own thread, or
//!   [`NotificationStream`]s read by a task ([`Informer::add_stream`]), each with its own
//!   [`OverflowPolicy`](crate::distributor::OverflowPolicy) and resync period
//!   ([`HandlerOptions`]), registered before or after start. A handler registered after
//!   start first receives every cached object as an add with `is_in_initial_list = true`,
//!   then live events, none missed or doubled.
//! - [`Registration::has_synced`] turns true once the informer has synced *and* that handler
//!   has handled its initial adds (client-go `ResourceEventHandlerRegistration.HasSynced`).
//! - Resync (see `resync.rs`): each handler's period (≥ 1 s, 0 = never); sync updates go only
//!   to the handlers due, real changes to all, so a resync never adds work for the others.
//! - [`Lister`] and [`TypedLister`] read the store (lock-free snapshots).
//!
//! # Consistency
//! Notifications are published after the store holds the change, so a handler reading the
//! store may see a newer state than its notification (as in client-go). The store's
//! resourceVersion only advances to what the reflector has seen when every delta up to it has
//! been applied: [`Store::wait_for`] after a controller's own write is sound.

mod events;
mod gate;
mod lister;
mod options;
mod process;
mod prometheus;
mod resync;
mod selector;
mod sink;
mod sync_error;
mod transform;
mod typed;

pub use events::{ERROR_BACKLOG, Event, EventError, EventStream};
pub use lister::{Lister, NamespaceLister};
pub use options::{HandlerOptions, InformerConfig, MIN_RESYNC_PERIOD};
pub use prometheus::InformerMetricsProvider;
pub use selector::{LabelSelector, MAX_SELECTOR_LEN, SelectorError};
pub use sync_error::CacheSyncError;
pub use transform::strip_managed_fields;
pub use typed::{TypedIndexError, TypedLister, TypedNamespaceLister};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use crate::distributor::{
    AddListenerError, Distributor, EventHandler, Listener, ListenerId, Marker, Notification,
    NotificationStream,
};
use crate::fifo::{DeltaFifo, Transform};
use crate::object::Object;
use crate::reflector::{
    ListerWatcher, Reflector, ReflectorConfig, ReflectorError, ReflectorMetrics, WatchErrorHandler,
};
use crate::store::{IndexFunc, Store, StoreError, Writer, store};

use events::ErrorFeed;
use options::normalize_resync;
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

/// [`Informer::set_transform`] after [`Informer::start`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the informer has already started: a transform can only be set before start")]
pub struct AlreadyStarted;

/// Where a registration's sync marker is set: at registration when the informer had synced,
/// else by the processing thread when it syncs.
type SyncSlot = Arc<OnceLock<Marker>>;

/// A registered handler (client-go `ResourceEventHandlerRegistration`): its listener and when
/// it has synced.
#[derive(Clone, Debug)]
pub struct Registration {
    listener: Listener,
    /// Reached once the listener handled every notification of the informer's initial state
    /// (the first list, or the cache replayed to a late handler).
    synced: SyncSlot,
    /// Reached when the informer synced or stopped.
    informer: Marker,
}

impl Registration {
    /// The listener behind this registration (id, name, policy, counters).
    pub fn listener(&self) -> &Listener {
        &self.listener
    }

    /// `true` once the informer has synced and this handler has processed every add of the
    /// initial state: the first list for a handler registered before that, the cache replayed
    /// to it for one registered later (client-go `HasSynced` of a registration). Two atomic
    /// loads; callable from a handler.
    pub fn has_synced(&self) -> bool {
        self.synced.get().is_some_and(Marker::is_reached)
    }

    /// Waits until [`has_synced`](Self::has_synced), up to `timeout` (tokio's clock); `false`
    /// on timeout or when the informer stopped first. No polling: wakes on the sync itself.
    /// (A `bool`, as client-go's per-handler `HasSynced`; the informer-wide waits return a
    /// [`CacheSyncError`] naming what did not sync.)
    ///
    /// # Paused time
    /// As [`Informer::wait_for_cache_sync`]: handlers and the processing thread are not tokio
    /// tasks, so under paused time this may time out early in virtual time; use
    /// [`wait_for_sync_blocking`](Self::wait_for_sync_blocking) inside `spawn_blocking`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let wait = async {
            self.informer.reached().await;
            if let Some(m) = self.synced.get() {
                m.reached().await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.has_synced()
    }

    /// [`wait_for_sync`](Self::wait_for_sync) for threads outside async code (std clock). Must
    /// not be called from this registration's own handler.
    pub fn wait_for_sync_blocking(&self, timeout: Duration) -> bool {
        let now = std::time::Instant::now();
        // `Duration::MAX` does not fit in an `Instant`: a century stands for "no deadline".
        let deadline = now
            .checked_add(timeout)
            .unwrap_or(now + Duration::from_secs(100 * 365 * 24 * 3600));
        if !self.informer.wait_timeout(timeout) {
            return false;
        }
        match self.synced.get() {
            Some(m) => {
                m.wait_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            }
            None => false,
        }
    }
}

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

/// One informer: list+watch of one resource into a store, with handlers. Create with
/// [`Informer::new`], register handlers, then [`Informer::start`].
pub struct Informer<L: ListerWatcher> {
    shared: Arc<Shared>,
    lw: Arc<L>,
    reflector_config: ReflectorConfig,
    /// Set by `start`; `set_transform` checks it under the `transform` lock.
    started: AtomicBool,
    /// A transform set before start, moved into `active_transform` by `start`.
    transform: Mutex<Option<Transform>>,
    /// The user's watch error handler, handed to the reflector by `start`.
    watch_error_handler: Mutex<Option<WatchErrorHandler>>,
    active_transform: Arc<OnceLock<Transform>>,
    default_resync: Duration,
    next_handler: AtomicU64,
    tasks: Mutex<Vec<Task>>,
    /// The stop gates of the async tasks (see `gate.rs`), set once by `start`: every
    /// `shutdown` stops them all.
    gates: OnceLock<[Arc<gate::Gate>; 2]>,
}

enum Task {
    Async(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
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
        // The transform is looked up per object so that `set_transform` can still choose it
        // until start; afterwards the slot never changes.
        let active_transform: Arc<OnceLock<Transform>> = Arc::new(OnceLock::new());
        let slot = active_transform.clone();
        let fifo = DeltaFifo::builder()
            .kind(config.fifo)
            .known_objects(Arc::new(KnownStore(reader.clone())))
            .transform(move |o: Arc<Object>| match slot.get() {
                Some(t) => t(o),
                None => o,
            })
            .build();
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
                rv_moved: Arc::new(tokio::sync::Notify::new()),
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
            }),
            lw: Arc::new(lw),
            reflector_config: config.reflector,
            started: AtomicBool::new(false),
            transform: Mutex::new(config.transform),
            watch_error_handler: Mutex::new(None),
            active_transform,
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

    /// Registers a handler, before or after start, on its own thread (client-go
    /// `AddEventHandler`, `AddEventHandlerWithResyncPeriod` and `AddEventHandlerWithOptions`
    /// in one: name, overflow policy and resync period come from `options`). Registered after
    /// start, it first receives every cached object as an add with `is_in_initial_list =
    /// true`, then live events: none missed, none doubled.
    ///
    /// # Errors
    /// From [`Distributor::add_listener`] (after shutdown, zero `Block` capacity, thread spawn).
    ///
    /// # Examples
    /// ```
    /// use informer::{HandlerFns, HandlerOptions, Informer, InformerConfig};
    /// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
    /// # let templates = Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap();
    /// # let sim = SimServer::new(SimConfig::new(templates)).unwrap();
    /// let informer = Informer::new(sim, InformerConfig::default());
    /// let registration = informer
    ///     .add_event_handler(
    ///         HandlerFns::new().with_add(|obj, _initial| println!("add {}", obj.key())),
    ///         HandlerOptions::new().name("printer"),
    ///     )
    ///     .unwrap();
    /// assert_eq!(registration.listener().name(), "printer");
    /// ```
    pub fn add_event_handler<H: EventHandler>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration, AddListenerError> {
        self.register(options, |d, name, policy| {
            d.add_listener(name, policy, handler).map(|l| (l, ()))
        })
        .map(|(r, ())| r)
    }

    /// The informer's changes as a stream of typed [`Event`]s with list/watch errors, the
    /// shape of kube-runtime's `watcher` (see [`EventStream`]). A handler like any other
    /// ([`add_stream`](Self::add_stream)), its objects read through `lister` (decoded once
    /// per object version, shared with every other reader of that lister).
    ///
    /// # Errors
    /// As [`add_stream`](Self::add_stream).
    ///
    /// # Examples
    /// See [`EventStream`]; for a typed informer, [`TypedInformer::events`] passes its own
    /// lister.
    ///
    /// [`TypedInformer::events`]: crate::TypedInformer::events
    pub fn events<K: Send + Sync + 'static>(
        &self,
        lister: TypedLister<K>,
        options: HandlerOptions,
    ) -> Result<EventStream<K>, AddListenerError> {
        let feed = Arc::new(ErrorFeed::default());
        self.shared
            .error_feeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&feed));
        let (registration, notifications) = self.add_stream(options)?;
        Ok(EventStream::new(notifications, lister, registration, feed))
    }

    /// Registers a handler read as an async [`NotificationStream`] (no thread: the task that
    /// polls it does the work). Same guarantees as a handler: initial adds for a late
    /// registration, then live events in order, the overflow policy and resync of `options`;
    /// the registration syncs once the stream has yielded its initial adds and been polled
    /// again. A `Block` stream makes the informer wait for its reader.
    ///
    /// # Errors
    /// From [`Distributor::add_stream`].
    pub fn add_stream(
        &self,
        options: HandlerOptions,
    ) -> Result<(Registration, NotificationStream), AddListenerError> {
        self.register(options, |d, name, policy| d.add_stream(name, policy))
    }

    fn register<T>(
        &self,
        options: HandlerOptions,
        add: impl FnOnce(
            &Distributor,
            &str,
            crate::distributor::OverflowPolicy,
        ) -> Result<(Listener, T), AddListenerError>,
    ) -> Result<(Registration, T), AddListenerError> {
        let shared = &self.shared;
        let name = options.name.unwrap_or_else(|| {
            format!(
                "handler-{}",
                self.next_handler.fetch_add(1, Ordering::Relaxed)
            )
        });
        let resync = options.resync.map_or(self.default_resync, normalize_resync);
        let slot: SyncSlot = Arc::new(OnceLock::new());
        // Holding the writer lock: no batch is applied or published while we snapshot the
        // store and replay it, so the listener's stream is exactly snapshot + later batches.
        let mut state = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (listener, extra) = add(&shared.distributor, &name, options.policy)?;
        let snapshot = state.writer.snapshot();
        let adds: Vec<Notification> = snapshot
            .iter()
            .map(|(_, obj)| Notification::Add {
                obj: obj.clone(),
                is_in_initial_list: true,
            })
            .collect();
        if state.synced {
            // The replay and its marker travel as one message: this never waits, even for a
            // `Block { capacity: 1 }` stream nobody polls yet.
            let marker = shared
                .distributor
                .publish_to_marked(listener.id(), adds)
                .ok_or(AddListenerError::ShutDown)?;
            let _ = slot.set(marker);
        } else {
            if !adds.is_empty() {
                shared.distributor.publish_to(listener.id(), adds);
            }
            state.awaiting_sync.push((listener.id(), slot.clone()));
        }
        shared.resync.add(listener.id(), resync);
        drop(state);
        Ok((
            Registration {
                listener,
                synced: slot,
                informer: shared.synced_or_stopped.clone(),
            },
            extra,
        ))
    }

    /// Waits until every handler has handled the notifications of every change the store
    /// already holds: after `store().wait_for(rv)`, a flush makes every handler's view reflect
    /// `rv` too. Must not be called from a handler (it would wait for itself), nor with a
    /// stream nobody polls.
    pub fn flush(&self) {
        // The processing thread applies and publishes each batch (waits on full listeners
        // included) under this lock: once we hold it, every applied batch has been handed to
        // every listener, and the markers below queue behind them.
        let publishing = self
            .shared
            .publishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.shared.distributor.flush();
        drop(publishing);
    }

    /// Removes a handler and waits until it has drained (client-go v0.37
    /// `ShutDownEventHandler`; client-go's `RemoveEventHandler` returns while queued calls
    /// still run): it finishes what was published to it, then stops (a stream ends). Waits
    /// for a thread handler to finish, unless called from that handler (then it returns
    /// without waiting). Never waits for room in the handler's channel: a full `Block`
    /// handler may remove itself, and a stream's reader may remove it without polling it.
    pub fn remove_event_handler(&self, registration: &Registration) {
        let id = registration.listener.id();
        self.shared.resync.remove(id);
        self.shared.distributor.remove_listener(id);
    }

    /// Starts the reflector and the resync schedule on `handle` and the processing thread. A
    /// second call, or a call after [`shutdown`](Self::shutdown), does nothing.
    ///
    /// # Panics
    /// When the processing thread cannot be spawned.
    pub fn start(&self, handle: &tokio::runtime::Handle) {
        // Held until the tasks are recorded: `shutdown` closes the queue under it, so a start
        // either completes before a shutdown (which then stops what it started) or sees it.
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if self.shared.fifo.is_closed() {
            return;
        }
        {
            let mut pending = self
                .transform
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if self.started.swap(true, Ordering::AcqRel) {
                return;
            }
            if let Some(t) = pending.take() {
                let _ = self.active_transform.set(t);
            }
        }
        let sink = Arc::new(FifoSink {
            fifo: self.shared.fifo.clone(),
            seen_rv: self.shared.seen_rv.clone(),
            rv_moved: self.shared.rv_moved.clone(),
        });
        let user_handler = self
            .watch_error_handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let errors_to = Arc::downgrade(&self.shared);
        let reflector = Reflector::new(self.lw.clone(), sink, self.reflector_config.clone())
            .with_error_handler(Arc::new(move |err: &ReflectorError| {
                if let Some(h) = &user_handler {
                    h(err);
                }
                if let Some(shared) = errors_to.upgrade() {
                    shared.report_error(err);
                }
            }));
        let _ = self.shared.reflector_metrics.set(reflector.metrics());
        let reflector_gate = Arc::new(gate::Gate::default());
        let reflector_task = handle.spawn(reflector_gate.guard(async move {
            let _ = reflector.run().await;
        }));
        let resync_gate = Arc::new(gate::Gate::default());
        let resync_task = handle
            .spawn(resync_gate.guard(self.shared.resync.clone().run(self.shared.fifo.clone())));
        let shared = self.shared.clone();
        let handle = handle.clone();
        let thread = std::thread::Builder::new()
            .name("informer-process".into())
            .spawn(move || process::process_loop(&shared, &handle))
            .expect("spawn the informer's processing thread");
        let _ = self.gates.set([reflector_gate, resync_gate]);
        tasks.push(Task::Async(reflector_task));
        tasks.push(Task::Async(resync_task));
        tasks.push(Task::Thread(thread));
    }

    /// Waits until the informer has synced, up to `timeout` (client-go `WaitForCacheSync`),
    /// on tokio's clock. No polling: the processing thread wakes it when the first list has
    /// been published.
    ///
    /// # Errors
    /// [`CacheSyncError`] naming this informer on timeout or shutdown.
    ///
    /// # Paused time
    /// The processing thread is not a tokio task: under paused tokio time (tests), a runtime
    /// with nothing else to do auto-advances to the timeout while that thread is still
    /// applying the list, and this returns `Err` early. There, wait with
    /// [`wait_for_cache_sync_blocking`](Self::wait_for_cache_sync_blocking) inside
    /// `spawn_blocking` (tokio does not auto-advance while a blocking task runs), or poll
    /// [`has_synced`](Self::has_synced) between `yield_now`s.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let _ = tokio::time::timeout(timeout, self.shared.synced_or_stopped.reached()).await;
        self.sync_result()
    }

    /// [`wait_for_cache_sync`](Self::wait_for_cache_sync) for threads outside async code:
    /// parks the thread (std clock). Do not call it on an async runtime's worker thread.
    ///
    /// # Errors
    /// As [`wait_for_cache_sync`](Self::wait_for_cache_sync).
    pub fn wait_for_cache_sync_blocking(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        self.shared.synced_or_stopped.wait_timeout(timeout);
        self.sync_result()
    }

    fn sync_result(&self) -> Result<(), CacheSyncError> {
        if self.has_synced() {
            Ok(())
        } else {
            Err(CacheSyncError::new(
                vec![self.shared.name.clone()],
                self.is_stopped(),
            ))
        }
    }

    /// Whether [`shutdown`](Self::shutdown) has begun (or the informer was dropped): `false`
    /// before, whether started or not. client-go's `IsStopped` turns true only once the
    /// informer's run has returned; this one turns true when the shutdown starts, and stays
    /// true.
    pub fn is_stopped(&self) -> bool {
        self.shared.fifo.is_closed()
    }

    /// Stops the reflector, the resync task and the processing thread, lets every handler
    /// finish what was queued for it, and waits for the threads (streams end once read to
    /// the end). A batch still waiting for room at a full [`OverflowPolicy::Block`] listener
    /// is dropped: a stream nobody polls any more cannot hold the shutdown. Sync waiters
    /// return `false` if the informer had not synced.
    ///
    /// Once it returns, the reflector makes no further request: a poll of the reflector or
    /// resync task in progress on another thread is waited for, and neither task is polled
    /// again (their futures are dropped by their runtime). This holds for every caller, a
    /// second or concurrent one included, except a call made from inside one of the
    /// informers' own task polls (from a lister-watcher, a tweak hook, a transform): that
    /// one does not wait for the poll it runs in, nor for any other, so two informers
    /// shutting each other down from their polls cannot wait for each other.
    ///
    /// # Blocking
    /// It blocks while a handler finishes its queue or a lister-watcher call blocks inside a
    /// poll (as client-go's factory `Shutdown` waits for its goroutines): do not call it, nor
    /// drop the informer, while holding a lock that a handler, the transform, the
    /// lister-watcher or the tweak hook may wait for.
    ///
    /// [`OverflowPolicy::Block`]: crate::distributor::OverflowPolicy::Block
    pub fn shutdown(&self) {
        let (tasks, gates) = self.begin_shutdown();
        finish_shutdown(&self.shared, tasks, gates);
    }

    /// [`shutdown`](Self::shutdown) for async code: the same stop, with its waits (threads
    /// joined, polls in progress, handlers finishing their queues) on tokio's blocking pool,
    /// so no runtime worker is blocked; works on a current-thread runtime. Once it has
    /// returned, dropping the informer does not block. Called from inside one of the
    /// informer's own task polls (a lister-watcher, a transform), it does what `shutdown`
    /// does there: it does not wait for the polls.
    ///
    /// # Cancel safety
    /// The stop is started at the first poll and completes even if the future is dropped
    /// (the blocking part then runs on without anyone waiting for it).
    ///
    /// # Examples
    /// ```
    /// # use informer::sim::{SimConfig, SimServer, Templates, default_fixtures_dir};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let sim = SimServer::new(SimConfig::new(Templates::etcd_pod(&default_fixtures_dir().unwrap()).unwrap())).unwrap();
    /// let informer = informer::Informer::new(sim, informer::InformerConfig::default());
    /// informer.start(&tokio::runtime::Handle::current());
    /// informer.shutdown_async().await;
    /// assert!(informer.is_stopped());
    /// # });
    /// ```
    pub async fn shutdown_async(&self) {
        if gate::in_gated_poll() {
            self.shutdown();
            return;
        }
        let (tasks, gates) = self.begin_shutdown();
        let shared = self.shared.clone();
        let _ = tokio::task::spawn_blocking(move || finish_shutdown(&shared, tasks, gates)).await;
    }

    /// Closes the queue and takes the tasks (and the gates every caller stops).
    fn begin_shutdown(&self) -> (Vec<Task>, Option<[Arc<gate::Gate>; 2]>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        self.shared.fifo.close();
        (std::mem::take(&mut *tasks), self.gates.get().cloned())
    }
}

/// The waiting part of a shutdown: stops the gated tasks (waiting for polls in progress),
/// joins the processing thread and lets every handler finish.
fn finish_shutdown(shared: &Shared, tasks: Vec<Task>, gates: Option<[Arc<gate::Gate>; 2]>) {
    // Every caller waits for the polls in progress, not only the one that takes the tasks.
    for gate in gates.iter().flatten() {
        gate.stop();
    }
    // Before joining the processing thread: it may be waiting for room at a Block stream
    // that the caller itself would have to poll.
    shared.distributor.abort_waits();
    for t in tasks {
        match t {
            Task::Async(h) => h.abort(),
            Task::Thread(h) => {
                let _ = h.join();
            }
        }
    }
    shared.distributor.shutdown();
    shared.synced_or_stopped.reach();
}

impl<L: ListerWatcher> Drop for Informer<L> {
    /// Same as [`Informer::shutdown`]: no thread or task outlives the informer.
    fn drop(&mut self) {
        self.shutdown();
    }
}
