//! One listener: its [`OverflowPolicy`], its feed (a crossbeam channel or a coalescing queue)
//! and its consumer: the thread that runs its handler, or a
//! [`NotificationStream`](super::NotificationStream).

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender, TrySendError, bounded, select, unbounded};

use super::Notification;
use super::coalesce::CoalesceQueue;
use super::error::AddListenerError;
use super::handler::EventHandler;
use super::marker::Marker;
use super::metrics::{ListenerStats, Metrics};
use super::stream::NotificationStream;

/// What a listener does when its handler falls behind the publisher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// Buffer without limit (client-go's behaviour): the publisher never waits; the backlog
    /// shows in [`ListenerStats::pending`] and its memory is freed as it drains.
    #[default]
    Unbounded,
    /// Buffer at most `capacity` published batches, then make the publisher wait: backpressure
    /// to the informer (and so to every other listener). Nothing is lost.
    Block {
        /// Batches (not notifications) buffered before the publisher waits; at least 1.
        capacity: usize,
    },
    /// Keep at most one pending notification per key, merged (add + update = add of the new
    /// state, update + update = update from the oldest to the newest, add + delete = nothing,
    /// delete + add = update): a lagging level-triggered controller sees every key's final
    /// state without an unbounded backlog. A merged update's `old` is always the state the
    /// listener last saw (also across a delete and re-creation). Per key, order is kept;
    /// across keys, notifications are delivered in the order of each key's first pending
    /// notification. Memory is bounded by the number of keys pending, also when keys come
    /// and go while the listener is behind.
    CoalesceByKey,
}

/// Identifies a listener within its [`Distributor`](super::Distributor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(pub(crate) u64);

impl fmt::Display for ListenerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "listener-{}", self.0)
    }
}

/// A handle to a listener: its identity and counters. Cheap to clone; stays readable after the
/// listener is removed.
#[derive(Clone)]
pub struct Listener {
    shared: Arc<Shared>,
}

struct Shared {
    id: ListenerId,
    name: String,
    policy: OverflowPolicy,
    metrics: Metrics,
    /// Set by a stop that found a `Block` channel full (it never waits for room: the caller
    /// may be the listener's own handler, or the task that should poll its stream). The
    /// consumer stops once it finds the channel empty with this set. `SeqCst` with the
    /// channel operations around it (see [`Entry::stop`]).
    stop_requested: AtomicBool,
}

impl Listener {
    /// Its id.
    pub fn id(&self) -> ListenerId {
        self.shared.id
    }

    /// The name it was added with (also its thread's name).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Its overflow policy.
    pub fn policy(&self) -> OverflowPolicy {
        self.shared.policy
    }

    /// A snapshot of its counters.
    pub fn stats(&self) -> ListenerStats {
        self.shared.metrics.snapshot()
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// A stop was requested while the listener's channel was full: stop once it is empty.
    pub(crate) fn stop_requested(&self) -> bool {
        self.shared.stop_requested.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("id", &self.shared.id)
            .field("name", &self.shared.name)
            .field("policy", &self.shared.policy)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A marker in transit: reached when dropped, so a marker lost with a stopped listener's
/// channel still releases its waiters.
pub(crate) struct ReachOnDrop(pub(crate) Marker);

impl Drop for ReachOnDrop {
    fn drop(&mut self) {
        self.0.reach();
    }
}

pub(crate) enum Msg {
    Batch(Arc<[Notification]>),
    /// A batch, then a marker reached once the batch is handled (one message, so it fits in a
    /// `Block` channel with room for one).
    BatchThen(Arc<[Notification]>, ReachOnDrop),
    Marker(ReachOnDrop),
    Stop,
}

enum Feed {
    Channel(Sender<Msg>),
    Coalesce(Arc<CoalesceQueue>),
}

/// The consumer's end of a feed: what a listener thread or a
/// [`NotificationStream`](super::NotificationStream) reads.
pub(crate) enum Source {
    Channel(Receiver<Msg>),
    Coalesce {
        queue: Arc<CoalesceQueue>,
        doorbell: Receiver<()>,
    },
}

/// The waker of a stream listener's task. Publishers wake it after queueing; the stream
/// checks its feed and registers under the same mutex, so no wake-up is lost (a message
/// queued before the publisher takes the lock is seen by a stream that takes it later).
#[derive(Default)]
pub(crate) struct WakerSlot(Mutex<Option<Waker>>);

impl WakerSlot {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Waker>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        let waker = self.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The distributor's side of a listener.
pub(crate) struct Entry {
    pub(crate) listener: Listener,
    feed: Feed,
    /// The listener thread (`None` for a stream listener).
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: Option<ThreadId>,
    /// A stream listener's waker (`None` for a thread listener).
    waker: Option<Arc<WakerSlot>>,
}

fn new_listener(id: ListenerId, name: String, policy: OverflowPolicy) -> Listener {
    Listener {
        shared: Arc::new(Shared {
            id,
            name,
            policy,
            metrics: Metrics::default(),
            stop_requested: AtomicBool::new(false),
        }),
    }
}

fn new_feed(policy: OverflowPolicy) -> Result<(Feed, Source), AddListenerError> {
    Ok(match policy {
        OverflowPolicy::Block { capacity: 0 } => return Err(AddListenerError::ZeroCapacity),
        OverflowPolicy::Block { capacity } => {
            let (tx, rx) = bounded(capacity);
            (Feed::Channel(tx), Source::Channel(rx))
        }
        OverflowPolicy::Unbounded => {
            let (tx, rx) = unbounded();
            (Feed::Channel(tx), Source::Channel(rx))
        }
        OverflowPolicy::CoalesceByKey => {
            let (queue, doorbell) = CoalesceQueue::new();
            let queue = Arc::new(queue);
            (
                Feed::Coalesce(queue.clone()),
                Source::Coalesce { queue, doorbell },
            )
        }
    })
}

impl Entry {
    pub(crate) fn spawn<H: EventHandler>(
        id: ListenerId,
        name: String,
        policy: OverflowPolicy,
        handler: H,
    ) -> Result<Entry, AddListenerError> {
        let listener = new_listener(id, name, policy);
        let (feed, source) = new_feed(policy)?;
        let builder = thread::Builder::new().name(format!("informer-{}", listener.name()));
        let worker = listener.clone();
        let handle = builder
            .spawn(move || match source {
                Source::Channel(rx) => run_channel(handler, &worker, &rx),
                Source::Coalesce { queue, doorbell } => {
                    run_coalesce(handler, &worker, &queue, &doorbell);
                }
            })
            .map_err(AddListenerError::Spawn)?;
        Ok(Entry {
            listener,
            feed,
            thread_id: Some(handle.thread().id()),
            thread: Mutex::new(Some(handle)),
            waker: None,
        })
    }

    /// A listener without a thread: its notifications are read from the returned stream.
    pub(crate) fn stream(
        id: ListenerId,
        name: String,
        policy: OverflowPolicy,
    ) -> Result<(Entry, NotificationStream), AddListenerError> {
        let listener = new_listener(id, name, policy);
        let (feed, source) = new_feed(policy)?;
        let waker = Arc::new(WakerSlot::default());
        let stream = NotificationStream::new(listener.clone(), source, waker.clone());
        Ok((
            Entry {
                listener,
                feed,
                thread: Mutex::new(None),
                thread_id: None,
                waker: Some(waker),
            },
            stream,
        ))
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Counts `batch` and queues it without waiting; `false` when a
    /// [`OverflowPolicy::Block`] channel is full (then call [`Entry::send_blocking`]).
    pub(crate) fn offer(&self, batch: &Arc<[Notification]>) -> bool {
        let metrics = self.listener.metrics();
        let n = batch.len() as u64;
        metrics.published(n);
        // (queued or gone, accepted by a live consumer)
        let (done, accepted) = match &self.feed {
            Feed::Channel(tx) => match tx.try_send(Msg::Batch(batch.clone())) {
                Ok(()) => (true, true),
                Err(TrySendError::Disconnected(_)) => (true, false),
                Err(TrySendError::Full(_)) => (false, true),
            },
            Feed::Coalesce(q) => (true, q.push(batch, metrics)),
        };
        if !accepted {
            // Its consumer is gone (a stopped listener, a dropped stream): do not let the lag
            // gauge count what nobody will ever take.
            metrics.unpublished(n);
        }
        if done {
            self.wake();
        }
        done
    }

    /// Queues `batch` (already counted by [`Entry::offer`]), waiting for room, or until
    /// `abort` disconnects (the distributor shuts down: the batch is dropped).
    pub(crate) fn send_blocking(&self, batch: &Arc<[Notification]>, abort: &Receiver<()>) {
        match &self.feed {
            // A disconnected channel means the listener stopped: nothing to deliver to.
            Feed::Channel(tx) => send_or_abort(tx, Msg::Batch(batch.clone()), abort),
            Feed::Coalesce(q) => {
                q.push(batch, self.listener.metrics());
            }
        }
        self.wake();
    }

    /// Counts and queues `batch` followed by a marker reached once it is handled; waits for
    /// room only when a `Block` channel is full.
    pub(crate) fn send_marked(&self, batch: Arc<[Notification]>, abort: &Receiver<()>) -> Marker {
        if batch.is_empty() {
            return self.marker(abort);
        }
        self.listener.metrics().published(batch.len() as u64);
        let marker = Marker::new();
        let msg = ReachOnDrop(marker.clone());
        match &self.feed {
            Feed::Channel(tx) => match tx.try_send(Msg::BatchThen(batch, msg)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(m)) => send_or_abort(tx, m, abort),
            },
            Feed::Coalesce(q) => {
                q.push(&batch, self.listener.metrics());
                q.push_marker(msg);
            }
        }
        self.wake();
        marker
    }

    /// A marker behind everything queued so far; waits for room in a full `Block` channel
    /// unless `abort` disconnects (then, as on a stopped listener, it is reached at once).
    pub(crate) fn marker(&self, abort: &Receiver<()>) -> Marker {
        let marker = Marker::new();
        let msg = ReachOnDrop(marker.clone());
        match &self.feed {
            // On failure the message is dropped, which reaches the marker.
            Feed::Channel(tx) => send_or_abort(tx, Msg::Marker(msg), abort),
            Feed::Coalesce(q) => q.push_marker(msg),
        }
        self.wake();
        marker
    }

    /// Asks the consumer to stop once it has handled everything queued before. Never waits:
    /// the caller may be this listener's own handler, or the task that polls its stream.
    pub(crate) fn stop(&self) {
        match &self.feed {
            Feed::Channel(tx) => {
                // A full `Block` channel: flag first, then try again. If the retry fails too,
                // the channel was still full after the flag was set, so the consumer has
                // messages to take and sees the flag when it finds the channel empty; if the
                // consumer emptied it in between, the retry gets the stop in.
                if let Err(TrySendError::Full(_)) = tx.try_send(Msg::Stop) {
                    self.listener
                        .shared
                        .stop_requested
                        .store(true, Ordering::SeqCst);
                    let _ = tx.try_send(Msg::Stop);
                }
            }
            Feed::Coalesce(q) => q.stop(),
        }
        self.wake();
    }

    /// Waits for the thread to end (never for the calling thread itself; stream listeners have
    /// no thread: their stream ends when its reader gets past the stop).
    pub(crate) fn join(&self) {
        if self.thread_id == Some(thread::current().id()) {
            return;
        }
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // Handler panics are caught inside the thread; an Err here cannot carry one.
            let _ = handle.join();
        }
    }
}

/// Sends `msg`, waiting for room unless `abort` disconnects first; a message that cannot be
/// sent is dropped (which reaches a marker it carries).
fn send_or_abort(tx: &Sender<Msg>, msg: Msg, abort: &Receiver<()>) {
    select! {
        send(tx, msg) -> _ => {}
        recv(abort) -> _ => {}
    }
}

fn run_channel<H: EventHandler>(mut handler: H, listener: &Listener, rx: &Receiver<Msg>) {
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Batch(batch) => handle(&mut handler, listener, &batch),
            Msg::BatchThen(batch, marker) => {
                handle(&mut handler, listener, &batch);
                drop(marker);
            }
            Msg::Marker(marker) => drop(marker),
            Msg::Stop => break,
        }
        if listener.stop_requested() && rx.is_empty() {
            break;
        }
    }
    // Release markers queued behind the stop; later ones fail to send and release themselves.
    while let Ok(msg) = rx.try_recv() {
        drop(msg);
    }
}

fn run_coalesce<H: EventHandler>(
    mut handler: H,
    listener: &Listener,
    queue: &CoalesceQueue,
    doorbell: &Receiver<()>,
) {
    while doorbell.recv().is_ok() {
        let taken = queue.take();
        handle(&mut handler, listener, &taken.items);
        drop(taken.markers);
        if taken.stopped {
            break;
        }
    }
}

/// Hands `batch` to the handler, one notification at a time, catching panics.
fn handle<H: EventHandler>(handler: &mut H, listener: &Listener, batch: &[Notification]) {
    if batch.is_empty() {
        return;
    }
    let metrics = listener.metrics();
    let start = Instant::now();
    for n in batch {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| handler.on_notification(n))) {
            report_panic(listener, n, payload.as_ref());
        }
    }
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    metrics.handler_nanos.fetch_add(nanos, Ordering::Relaxed);
    metrics
        .delivered
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
}

fn report_panic(listener: &Listener, n: &Notification, payload: &(dyn Any + Send)) {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    };
    let metrics = listener.metrics();
    metrics.panics.fetch_add(1, Ordering::Relaxed);
    tracing::error!(
        listener = listener.name(),
        id = %listener.id(),
        key = ?n.key(),
        panic = %msg,
        "event handler panicked; the listener goes on with the next notification"
    );
    *metrics
        .last_panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(msg);
}
