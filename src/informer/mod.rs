//! The shared index informer: a [`Reflector`] fills a [`DeltaFifo`]; one processing thread pops
//! batches of keys, applies their deltas to the [`Store`] and publishes the matching
//! notifications through the [`Distributor`]. Upstream: `client-go/tools/cache/shared_informer.go`
//! (`sharedIndexInformer`, `HandleDeltas`) and `controller.go` (`processDeltas`).
//!
//! # Consistency
//! Notifications are published after the store holds the change, so a handler reading the
//! store may see a newer state than its notification (as in client-go). The store's
//! resourceVersion only advances to what the reflector has seen when every delta up to it has
//! been applied: [`Store::wait_for`] after a controller's own write is sound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::distributor::{
    AddListenerError, Distributor, EventHandler, Listener, Marker, Notification, OverflowPolicy,
};
use crate::fifo::{DeltaFifo, DeltaType, KnownObjects, PopError, Transform, TryPopError};
use crate::object::{Object, ObjectKey, parse_resource_version};
use crate::reflector::{
    ListerWatcher, Reflector, ReflectorConfig, ReflectorMetrics, ReflectorStore, StoreClosed,
    WatchChange,
};
use crate::store::{Batch, Op, Store, StoreConfig, Writer, store};

/// Informer settings.
#[derive(Clone, Default)]
pub struct InformerConfig {
    /// The store's shards and indexers.
    pub store: StoreConfig,
    /// List/watch behaviour.
    pub reflector: ReflectorConfig,
    /// Most keys popped from the DeltaFIFO and applied as one store version: 0 = 1024.
    pub batch_size: usize,
    /// Applied to every object before it is queued (e.g. [`Object::without_managed_fields`]).
    pub transform: Option<Transform>,
}

impl std::fmt::Debug for InformerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerConfig")
            .field("store", &self.store)
            .field("reflector", &self.reflector)
            .field("batch_size", &self.batch_size)
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

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

/// The store as the DeltaFIFO's known objects (client-go passes the indexer as
/// `knownObjects`).
struct KnownStore(Store);

impl KnownObjects for KnownStore {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.keys()
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.0.get(key.as_str())
    }
}

/// What the reflector writes into: the DeltaFIFO, plus the newest resourceVersion the reflector
/// has handed over (used to advance the store's resourceVersion once everything before it is
/// applied).
struct FifoSink {
    fifo: DeltaFifo,
    seen_rv: Arc<AtomicU64>,
    /// Wakes the processing thread when `seen_rv` moved (it may advance the store's
    /// resourceVersion even when no delta follows, e.g. after a bookmark).
    rv_moved: Arc<tokio::sync::Notify>,
}

impl FifoSink {
    fn saw(&self, rv: &str) {
        if let Some(rv) = parse_resource_version(rv) {
            self.seen_rv.fetch_max(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
    }
}

impl ReflectorStore for FifoSink {
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed> {
        if self.fifo.is_closed() {
            return Err(StoreClosed);
        }
        self.fifo.replace(items, resource_version);
        // A relist is the truth at its version, even below a bookmark seen before.
        if let Some(rv) = parse_resource_version(resource_version) {
            self.seen_rv.store(rv, Ordering::SeqCst);
            self.rv_moved.notify_one();
        }
        Ok(())
    }

    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed> {
        if self.fifo.is_closed() {
            return Err(StoreClosed);
        }
        // The newest change's version, read before the changes are queued and recorded after.
        let newest = changes.last().map(|c| match c {
            WatchChange::Added(o) | WatchChange::Modified(o) | WatchChange::Deleted(o) => {
                o.resource_version().to_owned()
            }
        });
        for c in changes {
            match c {
                WatchChange::Added(o) => self.fifo.add(o),
                WatchChange::Modified(o) => self.fifo.update(o),
                WatchChange::Deleted(o) => self.fifo.delete(o),
            }
        }
        if let Some(rv) = newest {
            self.saw(&rv);
        }
        Ok(())
    }

    fn bookmark(&self, resource_version: &str) {
        self.saw(resource_version);
    }
}

/// A registered handler: its listener (counters, id) and when it has synced.
#[derive(Clone, Debug)]
pub struct Registration {
    listener: Listener,
    /// Reached once the listener handled the cached objects replayed to it.
    replayed: Marker,
    fifo: DeltaFifo,
}

impl Registration {
    /// The listener behind this registration (id, name, policy, counters).
    pub fn listener(&self) -> &Listener {
        &self.listener
    }

    /// `true` once the informer has synced and this handler has processed every object that
    /// was in the cache when it was registered (client-go `ResourceEventHandlerRegistration.
    /// HasSynced`). A handler registered before start syncs with the informer's first list.
    pub fn has_synced(&self) -> bool {
        self.fifo.has_synced() && self.replayed.is_reached()
    }
}

/// State shared by the informer handle, its processing thread and registrations.
struct Shared {
    fifo: DeltaFifo,
    store: Store,
    distributor: Distributor,
    /// The store writer plus the lock that orders publishes with late registrations: the
    /// processing thread holds it while applying one batch and handing it to every listener
    /// with room (it is released before waiting on a full `Block` listener); a registration
    /// holds it while it snapshots the store and replays it to the new listener. Handlers
    /// never run under it.
    writer: Mutex<Writer>,
    /// Held by the processing thread for a whole batch, publishing included (also the waits
    /// on full listeners): [`Informer::flush`] takes it to know every applied batch has been
    /// handed to every listener.
    publishing: Mutex<()>,
    seen_rv: Arc<AtomicU64>,
    rv_moved: Arc<tokio::sync::Notify>,
    metrics: InformerMetrics,
    batch_size: usize,
}

/// One informer: list+watch of one resource into a store, with handlers. Create with
/// [`Informer::new`], register handlers, then [`Informer::start`].
pub struct Informer<L: ListerWatcher> {
    shared: Arc<Shared>,
    lw: Arc<L>,
    reflector_config: ReflectorConfig,
    reflector_metrics: Mutex<Option<Arc<ReflectorMetrics>>>,
    started: AtomicBool,
    tasks: Mutex<Vec<Task>>,
}

enum Task {
    Async(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

impl<L: ListerWatcher> std::fmt::Debug for Informer<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("started", &self.started.load(Ordering::Relaxed))
            .field("has_synced", &self.has_synced())
            .field("objects", &self.shared.store.len())
            .finish_non_exhaustive()
    }
}

impl<L: ListerWatcher> Informer<L> {
    /// An informer over `lw`. Nothing runs until [`Informer::start`].
    pub fn new(lw: L, config: InformerConfig) -> Self {
        let (reader, writer) = store(config.store);
        let mut builder = DeltaFifo::builder().known_objects(Arc::new(KnownStore(reader.clone())));
        if let Some(t) = config.transform {
            builder = builder.transform(move |o| t(o));
        }
        let fifo = builder.build();
        Informer {
            shared: Arc::new(Shared {
                fifo,
                store: reader,
                distributor: Distributor::new(),
                writer: Mutex::new(writer),
                publishing: Mutex::new(()),
                seen_rv: Arc::new(AtomicU64::new(0)),
                rv_moved: Arc::new(tokio::sync::Notify::new()),
                metrics: InformerMetrics::default(),
                batch_size: if config.batch_size == 0 {
                    1024
                } else {
                    config.batch_size
                },
            }),
            lw: Arc::new(lw),
            reflector_config: config.reflector,
            reflector_metrics: Mutex::new(None),
            started: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The lock-free read handle of the informer's store (client-go `GetIndexer`/`Lister`).
    pub fn store(&self) -> Store {
        self.shared.store.clone()
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
        self.reflector_metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `true` once the first list has been applied to the store (client-go `HasSynced`).
    /// One atomic read; callable from a handler.
    pub fn has_synced(&self) -> bool {
        self.shared.fifo.has_synced()
    }

    /// Registers a handler, before or after start. Registered after start, it first receives
    /// every cached object as an add with `is_in_initial_list = true`, then live events: none
    /// missed, none doubled.
    ///
    /// # Errors
    /// From [`Distributor::add_listener`] (after shutdown, zero `Block` capacity, thread spawn).
    pub fn add_event_handler<H: EventHandler>(
        &self,
        name: &str,
        policy: OverflowPolicy,
        handler: H,
    ) -> Result<Registration, AddListenerError> {
        let shared = &self.shared;
        // Holding the writer lock: no batch is applied or published while we snapshot the
        // store and replay it, so the listener's stream is exactly snapshot + later batches.
        let writer = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let listener = shared.distributor.add_listener(name, policy, handler)?;
        let snapshot = writer.snapshot();
        if !snapshot.is_empty() {
            let adds: Vec<Notification> = snapshot
                .iter()
                .map(|(_, obj)| Notification::Add {
                    obj: obj.clone(),
                    is_in_initial_list: true,
                })
                .collect();
            shared.distributor.publish_to(listener.id(), adds);
        }
        // `None` only when a concurrent shutdown removed the listener again.
        let replayed = shared
            .distributor
            .marker(listener.id())
            .ok_or(AddListenerError::ShutDown)?;
        drop(writer);
        Ok(Registration {
            listener,
            replayed,
            fifo: shared.fifo.clone(),
        })
    }

    /// Waits until every handler has handled the notifications of every change the store
    /// already holds: after `store().wait_for(rv)`, a flush makes every handler's view reflect
    /// `rv` too. Must not be called from a handler (it would wait for itself).
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

    /// Removes a handler: it finishes what was published to it, then stops.
    pub fn remove_event_handler(&self, registration: &Registration) {
        self.shared
            .distributor
            .remove_listener(registration.listener.id());
    }

    /// Starts the reflector on `handle` and the processing thread. A second call does nothing.
    ///
    /// # Panics
    /// When the processing thread cannot be spawned.
    pub fn start(&self, handle: &tokio::runtime::Handle) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let sink = Arc::new(FifoSink {
            fifo: self.shared.fifo.clone(),
            seen_rv: self.shared.seen_rv.clone(),
            rv_moved: self.shared.rv_moved.clone(),
        });
        let reflector = Reflector::new(self.lw.clone(), sink, self.reflector_config.clone());
        *self
            .reflector_metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reflector.metrics());
        let reflector_task = handle.spawn(async move {
            let _ = reflector.run().await;
        });
        let shared = self.shared.clone();
        let handle = handle.clone();
        let thread = std::thread::Builder::new()
            .name("informer-process".into())
            .spawn(move || process_loop(&shared, &handle))
            .expect("spawn the informer's processing thread");
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.push(Task::Async(reflector_task));
        tasks.push(Task::Thread(thread));
    }

    /// Waits until the informer has synced, up to `timeout` (client-go `WaitForCacheSync`).
    /// Returns whether it synced. Uses tokio's clock.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut delay = Duration::from_millis(1);
        loop {
            if self.has_synced() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(100));
        }
    }

    /// Stops the reflector and the processing thread, lets every handler finish what was
    /// published to it, and waits for all of them.
    pub fn shutdown(&self) {
        self.shared.fifo.close();
        let tasks: Vec<Task> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for t in tasks {
            match t {
                Task::Async(h) => h.abort(),
                Task::Thread(h) => {
                    let _ = h.join();
                }
            }
        }
        self.shared.distributor.shutdown();
    }
}

impl<L: ListerWatcher> Drop for Informer<L> {
    /// Same as [`Informer::shutdown`]: no thread or task outlives the informer.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The processing thread: pop, apply, publish, until the DeltaFIFO closes. When the queue is
/// empty it sleeps until a delta arrives or the reflector's resourceVersion moves.
fn process_loop(shared: &Shared, handle: &tokio::runtime::Handle) {
    loop {
        let batch = match shared.fifo.try_pop_batch(shared.batch_size) {
            Ok(b) => Some(b),
            Err(TryPopError::Closed) => return,
            Err(TryPopError::Empty) => {
                // Nothing queued: everything the reflector handed over is applied, so the
                // store may reflect the newest resourceVersion it saw (a bookmark, a list).
                advance_resource_version(shared);
                let woke = handle.block_on(async {
                    tokio::select! {
                        biased;
                        b = shared.fifo.pop_batch_async(shared.batch_size) => b.map(Some),
                        () = shared.rv_moved.notified() => Ok(None),
                    }
                });
                match woke {
                    Ok(b) => b,
                    Err(PopError::Closed) => return,
                }
            }
        };
        if let Some(batch) = batch {
            process_batch(shared, &batch);
            // Dropping the batch completes it: the DeltaFIFO stops overlaying it on the store
            // and counts it towards has_synced, now that the store holds it.
            drop(batch);
        }
    }
}

/// Moves the store's resourceVersion to the newest one the reflector handed over, when no
/// delta is queued (so every delta up to it has been applied by this thread).
fn advance_resource_version(shared: &Shared) {
    // Read the version first, then check the queue: deltas pushed before the version was
    // recorded are then either visible in the queue or already applied.
    let seen = shared.seen_rv.load(Ordering::SeqCst);
    if seen == 0 || !shared.fifo.is_empty() {
        return;
    }
    let mut writer = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
    if seen > writer.resource_version() {
        writer.bookmark(seen);
    }
}

/// Applies one popped batch to the store and publishes its notifications
/// (client-go `processDeltas`).
fn process_batch(shared: &Shared, batch: &crate::fifo::Batch) {
    let _publishing = shared
        .publishing
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut writer = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
    let mut ops = Vec::with_capacity(batch.len());
    let mut notes = Vec::with_capacity(batch.len());
    let mut deltas = 0u64;
    // Per key: the ops and notifications of its deltas, oldest first, from the stored state.
    let mut per_key: Vec<(usize, usize)> = Vec::with_capacity(batch.len());
    let before = writer.snapshot();
    for item in batch.iter() {
        let (op_start, note_start) = (ops.len(), notes.len());
        let mut current = before.get(item.key.as_str()).cloned();
        for delta in item.deltas.iter() {
            deltas += 1;
            match delta.kind {
                DeltaType::Deleted => {
                    ops.push(Op::Delete(item.key.clone()));
                    current = None;
                    notes.push(Notification::Delete {
                        obj: delta.object.clone(),
                    });
                }
                DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                    let new = delta.object.object().clone();
                    ops.push(Op::Upsert(new.clone()));
                    match current.replace(new.clone()) {
                        Some(old) => {
                            let is_sync = delta.kind == DeltaType::Sync
                                || (delta.kind == DeltaType::Replaced
                                    && old.resource_version() == new.resource_version());
                            // A sync goes only to listeners due for resync; none ask for one
                            // yet, so syncs are applied to the store and not published.
                            if !is_sync {
                                notes.push(Notification::Update { old, new });
                            }
                        }
                        None => notes.push(Notification::Add {
                            obj: new,
                            is_in_initial_list: item.is_in_initial_list,
                        }),
                    }
                }
            }
        }
        per_key.push((op_start, note_start));
    }
    // The store's resourceVersion may only advance to what the reflector handed over once
    // nothing older is still queued: read it first, then check the queue.
    let seen = shared.seen_rv.load(Ordering::SeqCst);
    let rv = if shared.fifo.is_empty() {
        seen.max(writer.resource_version())
    } else {
        writer.resource_version()
    };
    let mut store_batch = Batch::with_capacity(ops.len());
    for op in &ops {
        store_batch.push(op.clone());
    }
    store_batch.set_resource_version(rv);
    let notes = match writer.apply(store_batch) {
        Ok(_) => notes,
        Err(_) => apply_key_by_key(shared, &mut writer, ops, notes, &per_key, rv),
    };
    shared.metrics.batches.fetch_add(1, Ordering::Relaxed);
    shared.metrics.deltas.fetch_add(deltas, Ordering::Relaxed);
    shared
        .metrics
        .notifications
        .fetch_add(notes.len() as u64, Ordering::Relaxed);
    // Listeners with room get the batch under the writer lock (ordered with registrations);
    // the lock is released before waiting on a full Block listener.
    shared.distributor.publish_releasing(notes, writer);
}

/// An index function rejected the batch: apply it key by key so that only the keys whose
/// objects fail are left at their old state (and not notified).
fn apply_key_by_key(
    shared: &Shared,
    writer: &mut Writer,
    ops: Vec<Op>,
    notes: Vec<Notification>,
    per_key: &[(usize, usize)],
    rv: u64,
) -> Vec<Notification> {
    let mut kept = Vec::with_capacity(notes.len());
    for (i, &(op_start, note_start)) in per_key.iter().enumerate() {
        let (op_end, note_end) = per_key
            .get(i + 1)
            .copied()
            .unwrap_or((ops.len(), notes.len()));
        let mut b = Batch::with_capacity(op_end - op_start);
        for op in &ops[op_start..op_end] {
            b.push(op.clone());
        }
        b.set_resource_version(writer.resource_version());
        match writer.apply(b) {
            Ok(_) => kept.extend_from_slice(&notes[note_start..note_end]),
            Err(_) => {
                shared.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    writer.bookmark(rv);
    kept
}
