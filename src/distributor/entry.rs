//! [`Entry`]: the distributor's side of a listener (the sending end of its feed, and its
//! thread or its stream's waker).

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle, ThreadId};

use crossbeam::channel::{Receiver, Sender, TrySendError, select};

use super::Notification;
use super::error::AddListenerError;
use super::feed::{Feed, Msg, WakerSlot, new_feed};
use super::handler::EventHandler;
use super::listener::{Listener, ListenerId, OverflowPolicy};
use super::marker::{Marker, ReachOnDrop};
use super::stream::NotificationStream;
use super::wakeup::Wakeup;
use super::worker;

/// The distributor's side of a listener.
pub(crate) struct Entry {
    pub(crate) listener: Listener,
    feed: Feed,
    /// The listener thread (`None` for a stream listener).
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: Option<ThreadId>,
    /// A stream listener's waker (`None` for a thread listener).
    waker: Option<Arc<WakerSlot>>,
    /// A thread listener's parking spot (`None` for a stream listener).
    wakeup: Option<Arc<Wakeup>>,
}

impl Drop for Entry {
    /// Nothing can publish to this listener any more: a thread still waiting on its feed ends
    /// once it has handled what is queued.
    fn drop(&mut self) {
        if let Some(w) = &self.wakeup {
            w.close();
        }
    }
}

impl Entry {
    /// A listener that runs `handler` on a new thread named `informer-<name>`.
    pub(crate) fn spawn<H: EventHandler>(
        id: ListenerId,
        name: String,
        policy: OverflowPolicy,
        handler: H,
    ) -> Result<Entry, AddListenerError> {
        let listener = Listener::new(id, name, policy);
        let (feed, source) = new_feed(policy)?;
        let builder = thread::Builder::new().name(format!("informer-{}", listener.name()));
        let consumer = listener.clone();
        let wakeup = Arc::new(Wakeup::default());
        let parked = wakeup.clone();
        let handle = builder
            .spawn(move || worker::run(handler, &consumer, source, &parked))
            .map_err(AddListenerError::Spawn)?;
        Ok(Entry {
            listener,
            feed,
            thread_id: Some(handle.thread().id()),
            thread: Mutex::new(Some(handle)),
            waker: None,
            wakeup: Some(wakeup),
        })
    }

    /// A listener without a thread: its notifications are read from the returned stream.
    pub(crate) fn stream(
        id: ListenerId,
        name: String,
        policy: OverflowPolicy,
    ) -> Result<(Entry, NotificationStream), AddListenerError> {
        let listener = Listener::new(id, name, policy);
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
                wakeup: None,
            },
            stream,
        ))
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake();
        }
        if let Some(w) = &self.wakeup {
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
                    self.listener.request_stop();
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
