//! [`Distributor`]: fans batches out to listeners (client-go `sharedProcessor`); the registry
//! of listeners and the publish side.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;
use crossbeam::channel::{Receiver, Sender, bounded};
use smallvec::SmallVec;

use super::Notification;
use super::entry::Entry;
use super::error::AddListenerError;
use super::handler::EventHandler;
use super::listener::{Listener, ListenerId, OverflowPolicy};
use super::marker::Marker;
use super::metrics::ListenerStats;
use super::stream::NotificationStream;

/// Fans batches of [`Notification`]s out to listeners, each on its own thread (client-go
/// `sharedProcessor`); see the [module docs](super).
///
/// Publish from one thread at a time (the informer): each listener then receives every batch
/// meant for it exactly once, in the order of the `publish`/`publish_to` calls that returned.
pub struct Distributor {
    /// The current listeners, read lock-free by publishers.
    listeners: ArcSwap<Vec<Arc<Entry>>>,
    /// Serializes changes to `listeners` (copy the list, change it, store it); publishers
    /// never take it.
    registry: Mutex<Registry>,
    /// Disconnects when the distributor shuts down: waits for room in a full `Block` channel
    /// select on it, so a shutdown never waits for a stream nobody polls.
    abort: Receiver<()>,
}

struct Registry {
    next_id: u64,
    shut_down: bool,
    /// Dropped by `shutdown`, which disconnects `Distributor::abort`.
    abort: Option<Sender<()>>,
}

/// A listener whose `Block` channel was full, and the batch still to hand it.
type Pending<'a, 'b> = (&'a Arc<Entry>, &'b Arc<[Notification]>);

impl Default for Distributor {
    fn default() -> Self {
        Distributor::new()
    }
}

impl Distributor {
    /// A distributor without listeners.
    pub fn new() -> Self {
        let (abort_tx, abort) = bounded(0);
        Distributor {
            listeners: ArcSwap::from_pointee(Vec::new()),
            registry: Mutex::new(Registry {
                next_id: 0,
                shut_down: false,
                abort: Some(abort_tx),
            }),
            abort,
        }
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a listener that runs `handler` on a new thread named `informer-<name>`. It receives
    /// every batch published after this call returns (use [`publish_to`](Self::publish_to) to
    /// give it the current state first).
    ///
    /// # Errors
    /// [`AddListenerError::ShutDown`] after [`shutdown`](Self::shutdown);
    /// [`AddListenerError::ZeroCapacity`] for `Block { capacity: 0 }`;
    /// [`AddListenerError::Spawn`] when the thread cannot be started.
    pub fn add_listener<H: EventHandler>(
        &self,
        name: &str,
        policy: OverflowPolicy,
        handler: H,
    ) -> Result<Listener, AddListenerError> {
        let mut reg = self.registry();
        if reg.shut_down {
            return Err(AddListenerError::ShutDown);
        }
        let id = ListenerId(reg.next_id);
        let entry = Arc::new(Entry::spawn(id, name.to_owned(), policy, handler)?);
        reg.next_id += 1;
        let listener = entry.listener.clone();
        let mut list = Vec::clone(&self.listeners.load());
        list.push(entry);
        self.listeners.store(Arc::new(list));
        Ok(listener)
    }

    /// Adds a listener without a thread: its notifications are read from the returned
    /// [`NotificationStream`] (by a tokio task, say). Otherwise as
    /// [`add_listener`](Self::add_listener); a [`OverflowPolicy::Block`] stream makes
    /// publishers wait until it is polled, so never publish from the task that reads it.
    ///
    /// # Errors
    /// [`AddListenerError::ShutDown`] after [`shutdown`](Self::shutdown);
    /// [`AddListenerError::ZeroCapacity`] for `Block { capacity: 0 }`.
    pub fn add_stream(
        &self,
        name: &str,
        policy: OverflowPolicy,
    ) -> Result<(Listener, NotificationStream), AddListenerError> {
        let mut reg = self.registry();
        if reg.shut_down {
            return Err(AddListenerError::ShutDown);
        }
        let id = ListenerId(reg.next_id);
        let (entry, stream) = Entry::stream(id, name.to_owned(), policy)?;
        reg.next_id += 1;
        let listener = entry.listener.clone();
        let mut list = Vec::clone(&self.listeners.load());
        list.push(Arc::new(entry));
        self.listeners.store(Arc::new(list));
        Ok((listener, stream))
    }

    /// Removes a listener: it handles what was published to it before, then its thread ends;
    /// this call waits for that (unless called from that listener's own handler). It never
    /// waits for room in the listener's channel, so a full [`OverflowPolicy::Block`] listener
    /// can remove itself from its handler, and the task that reads a stream can remove it
    /// without polling it first (the stream ends after what was queued). Returns its final
    /// counters, `None` for an unknown id.
    pub fn remove_listener(&self, id: ListenerId) -> Option<ListenerStats> {
        let entry = {
            let _reg = self.registry();
            let mut list = Vec::clone(&self.listeners.load());
            let pos = list.iter().position(|e| e.listener.id() == id)?;
            let entry = list.remove(pos);
            self.listeners.store(Arc::new(list));
            entry
        };
        entry.stop();
        entry.join();
        Some(entry.listener.stats())
    }

    /// Publishes `batch` to every listener: one shared allocation, one channel message per
    /// listener. Never waits for an [`OverflowPolicy::Unbounded`] or
    /// [`OverflowPolicy::CoalesceByKey`] listener; waits for room at a full
    /// [`OverflowPolicy::Block`] listener, after every other listener got the batch.
    pub fn publish(&self, batch: impl Into<Arc<[Notification]>>) {
        self.publish_releasing(batch, ());
    }

    /// As [`publish`](Self::publish), dropping `guard` once every listener that had room got
    /// the batch and before waiting for room at full [`OverflowPolicy::Block`] listeners.
    ///
    /// The informer passes its store-writer lock: batches are ordered with late registrations
    /// while they are handed out, but a handler blocked on a full channel can still take that
    /// lock (e.g. to register another handler) while the publisher waits for it.
    pub fn publish_releasing<G>(&self, batch: impl Into<Arc<[Notification]>>, guard: G) {
        let batch = batch.into();
        if batch.is_empty() {
            drop(guard);
            return;
        }
        self.publish_picking(|_| &batch, guard);
    }

    /// Publishes `with_syncs` to the listeners in `due` and `without_syncs` to every other one,
    /// then drops `guard` as [`publish_releasing`](Self::publish_releasing) does. The informer
    /// uses it for resyncs (client-go `sharedProcessor.distribute` with `sync = true`): *sync*
    /// updates (equal resourceVersions) go only to the listeners due for resync, real changes
    /// to all, each listener still getting one message, in order. Empty batches are skipped.
    pub fn publish_split<G>(
        &self,
        with_syncs: Arc<[Notification]>,
        without_syncs: Arc<[Notification]>,
        due: &[ListenerId],
        guard: G,
    ) {
        self.publish_picking(
            |id| {
                if due.contains(&id) {
                    &with_syncs
                } else {
                    &without_syncs
                }
            },
            guard,
        );
    }

    fn publish_picking<'b, G>(
        &self,
        pick: impl Fn(ListenerId) -> &'b Arc<[Notification]>,
        guard: G,
    ) {
        // `load_full`, not a guard: a blocking send may hold it for long.
        let listeners = self.listeners.load_full();
        let mut full: SmallVec<[Pending<'_, 'b>; 4]> = SmallVec::new();
        for entry in listeners.iter() {
            let batch = pick(entry.listener.id());
            if !batch.is_empty() && !entry.offer(batch) {
                full.push((entry, batch));
            }
        }
        drop(guard);
        for (entry, batch) in full {
            entry.send_blocking(batch, &self.abort);
        }
    }

    /// Publishes `batch` to one listener only, e.g. the current state as adds with
    /// `is_in_initial_list = true` for a listener added late. Waits for room at a full
    /// [`OverflowPolicy::Block`] listener (until [`shutdown`](Self::shutdown)). Returns
    /// `false` for an unknown id.
    pub fn publish_to(&self, id: ListenerId, batch: impl Into<Arc<[Notification]>>) -> bool {
        let Some(entry) = self.entry(id) else {
            return false;
        };
        let batch = batch.into();
        if !batch.is_empty() && !entry.offer(&batch) {
            entry.send_blocking(&batch, &self.abort);
        }
        true
    }

    /// As [`publish_to`](Self::publish_to), followed by a [`Marker`] reached once the listener
    /// handled `batch` (and everything before it). The batch and its marker travel as one
    /// message: with room for one batch, a [`OverflowPolicy::Block`] listener takes both without
    /// the caller waiting. `None` for an unknown id.
    pub fn publish_to_marked(
        &self,
        id: ListenerId,
        batch: impl Into<Arc<[Notification]>>,
    ) -> Option<Marker> {
        Some(self.entry(id)?.send_marked(batch.into(), &self.abort))
    }

    /// Places a [`Marker`] in one listener's stream: it is reached once the listener has
    /// handled everything published to it before this call. Waits for room at a full
    /// [`OverflowPolicy::Block`] listener (a shutdown meanwhile reaches the marker at once).
    /// `None` for an unknown id.
    pub fn marker(&self, id: ListenerId) -> Option<Marker> {
        Some(self.entry(id)?.marker(&self.abort))
    }

    /// Waits until every listener has handled everything published before this call.
    /// Must not be called from a handler (it would wait for itself).
    pub fn flush(&self) {
        let listeners = self.listeners.load_full();
        let markers: Vec<Marker> = listeners.iter().map(|e| e.marker(&self.abort)).collect();
        for m in markers {
            m.wait();
        }
    }

    /// As [`flush`](Self::flush) for one listener; `false` for an unknown id.
    pub fn flush_listener(&self, id: ListenerId) -> bool {
        match self.marker(id) {
            Some(m) => {
                m.wait();
                true
            }
            None => false,
        }
    }

    /// The current listeners.
    pub fn listeners(&self) -> Vec<Listener> {
        self.listeners
            .load()
            .iter()
            .map(|e| e.listener.clone())
            .collect()
    }

    /// One listener by id.
    pub fn listener(&self, id: ListenerId) -> Option<Listener> {
        self.entry(id).map(|e| e.listener.clone())
    }

    /// Stops every listener after it has handled what was queued for it, and waits for
    /// their threads. Later `add_listener` calls fail; later publishes go nowhere. A publish
    /// (or marker) waiting for room at a full [`OverflowPolicy::Block`] listener gives up and
    /// drops its batch, so a stream nobody polls cannot hold the shutdown.
    pub fn shutdown(&self) {
        let entries = {
            let mut reg = self.registry();
            reg.shut_down = true;
            drop(reg.abort.take()); // as `abort_waits`
            self.listeners.swap(Arc::new(Vec::new()))
        };
        for e in entries.iter() {
            e.stop();
        }
        for e in entries.iter() {
            e.join();
        }
    }

    /// Makes every wait for room at a full [`OverflowPolicy::Block`] listener give up (its
    /// batch or marker is dropped), now and later: the first step of
    /// [`shutdown`](Self::shutdown), taken early by an owner that must stop its publishing
    /// thread first.
    pub(crate) fn abort_waits(&self) {
        drop(self.registry().abort.take());
    }

    fn entry(&self, id: ListenerId) -> Option<Arc<Entry>> {
        self.listeners
            .load()
            .iter()
            .find(|e| e.listener.id() == id)
            .cloned()
    }
}

impl Drop for Distributor {
    /// Same as [`Distributor::shutdown`].
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl fmt::Debug for Distributor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Distributor")
            .field("listeners", &self.listeners())
            .finish()
    }
}
