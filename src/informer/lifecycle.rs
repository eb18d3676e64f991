//! Starting and stopping an informer: `start` (client-go `Run`), the sync waits
//! (`WaitForCacheSync`) and `shutdown`, which returns only once no task or thread of the
//! informer runs any more.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::gate::{self, Gate};
use super::list_compactor::ListCompactor;
use super::process;
use super::sink::FifoSink;
use super::sync_error::CacheSyncError;
use super::{Informer, Shared};
use crate::reflector::{ListerWatcher, Reflector, ReflectorError};

pub(super) enum Task {
    Async(tokio::task::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
    /// The reflector on its own thread ([`InformerConfig::reflector_thread`]): dropping the
    /// sender ends that thread's runtime, which drops the reflector and its connections.
    ///
    /// [`InformerConfig::reflector_thread`]: super::InformerConfig::reflector_thread
    OwnThread(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    ),
}

impl<L: ListerWatcher> Informer<L> {
    /// Starts the reflector and the resync schedule on `handle` and the processing thread. A
    /// second call, or a call after [`shutdown`](Self::shutdown), does nothing.
    ///
    /// With [`InformerConfig::reflector_thread`] the reflector runs instead on a thread of its own,
    /// `informer-watch`, under a single-threaded tokio runtime. On a multi-threaded runtime, each
    /// watch chunk otherwise wakes the reflector task, and tokio also wakes an idle worker to look
    /// for work (and, for an HTTP watch, hyper's connection task and the reflector can land on
    /// different workers): over loopback HTTP at 100 000+ HEAD Pods a second the reflector's own
    /// thread took 7 % less CPU per event, client and server together (median of 10 alternated
    /// runs' ratios; `BENCHMARKS.md`, *End to end over HTTP*). It does not cut reaction latency at
    /// low rates (a paced in-process flood at 15 000 changes/s: p50 69 against 55 µs, medians of 5
    /// alternated floods). What changes: the reflector's timers (backoff, watch timeouts) run on
    /// that runtime's clock, so paused tokio time in tests does not reach them; and an HTTP
    /// connection the reflector opens lives on that thread (other users of the same
    /// [`kube::Client`] pool may be handed it, and it closes when the informer stops), while one it
    /// takes from the pool stays on the runtime that opened it.
    ///
    /// # Panics
    /// When the processing thread (or the reflector's thread and its runtime) cannot be
    /// spawned.
    ///
    /// [`InformerConfig::reflector_thread`]: super::InformerConfig::reflector_thread
    pub fn start(&self, handle: &tokio::runtime::Handle) {
        // Held until the tasks are recorded: `shutdown` closes the queue under it, so a start
        // either completes before a shutdown (which then stops what it started) or sees it.
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if self.shared.fifo.is_closed() {
            return;
        }
        let (transform, filter) = {
            let mut pending = self
                .transform
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if self.started.swap(true, Ordering::AcqRel) {
                return;
            }
            let filter = self
                .filter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            (pending.take(), filter)
        };
        let has_filter = filter.is_some();
        let sink = Arc::new(FifoSink {
            fifo: self.shared.fifo.clone(),
            seen_rv: self.shared.seen_rv.clone(),
            rv_moved: self.shared.rv_moved.clone(),
            list_compactor: matches!(self.shared.compression, super::Compression::Zstd(_)).then(
                || {
                    ListCompactor::new(
                        self.shared.store.clone(),
                        self.shared.dictionary.clone(),
                        self.shared.tails.clone(),
                        self.shared.list_sampler.clone(),
                    )
                },
            ),
            transform,
            filter,
            filtering: Mutex::new(()),
            relist_keys: Mutex::new(None),
        });
        let user_handler = self
            .watch_error_handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let errors_to = Arc::downgrade(&self.shared);
        let mut reflector =
            Reflector::new(self.lw.clone(), sink.clone(), self.reflector_config.clone())
                .with_error_handler(Arc::new(move |err: &ReflectorError| {
                    if let Some(h) = &user_handler {
                        h(err);
                    }
                    if let Some(shared) = errors_to.upgrade() {
                        shared.report_error(err);
                    }
                }));
        if has_filter {
            let relist = Arc::new(tokio::sync::Notify::new());
            reflector = reflector.with_relist_requests(relist.clone());
            let _ = self.refilter.set((sink, relist));
        }
        let _ = self.shared.reflector_metrics.set(reflector.metrics());
        let reflector_gate = Arc::new(Gate::default());
        let run = reflector_gate.guard(async move {
            let _ = reflector.run().await;
        });
        let reflector_task = if self.reflector_thread {
            own_thread(run)
        } else {
            Task::Async(handle.spawn(run))
        };
        let resync_gate = Arc::new(Gate::default());
        let resync_task = handle
            .spawn(resync_gate.guard(self.shared.resync.clone().run(self.shared.fifo.clone())));
        let shared = self.shared.clone();
        let handle = handle.clone();
        let thread = std::thread::Builder::new()
            .name("informer-process".into())
            .spawn(move || process::process_loop(&shared, &handle))
            .expect("spawn the informer's processing thread");
        let _ = self.gates.set([reflector_gate, resync_gate]);
        tasks.push(reflector_task);
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
    fn begin_shutdown(&self) -> (Vec<Task>, Option<[Arc<Gate>; 2]>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        self.shared.fifo.close();
        (std::mem::take(&mut *tasks), self.gates.get().cloned())
    }
}

/// Runs `reflector` on a new thread, `informer-watch`, under a current-thread runtime, until
/// it ends or the returned task's sender is dropped.
fn own_thread(reflector: impl std::future::Future<Output = ()> + Send + 'static) -> Task {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build the informer's reflector runtime");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("informer-watch".into())
        .spawn(move || {
            runtime.block_on(async move {
                tokio::select! {
                    () = reflector => {}
                    _ = stopped => {}
                }
            });
            // Without waiting for blocking tasks a lister-watcher may have left running: the
            // gate already keeps the reflector from being polled again.
            runtime.shutdown_background();
        })
        .expect("spawn the informer's reflector thread");
    Task::OwnThread(stop, thread)
}

/// The waiting part of a shutdown: stops the gated tasks (waiting for polls in progress),
/// joins the processing thread and lets every handler finish.
fn finish_shutdown(shared: &Shared, tasks: Vec<Task>, gates: Option<[Arc<Gate>; 2]>) {
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
            Task::OwnThread(stop, h) => {
                drop(stop);
                // Called from inside a gated poll (a lister-watcher stopping this informer or
                // another), it does not wait, as for the gates: joining could wait for the
                // thread it runs on, or for an informer that is shutting this one down. The
                // thread ends on its own once its poll returns.
                if !gate::in_gated_poll() {
                    let _ = h.join();
                }
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
