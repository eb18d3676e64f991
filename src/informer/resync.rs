//! Per-handler resync (client-go `sharedProcessor.shouldResync`, `processorListener.
//! determineNextResync` and the reflector's resync timer in `tools/cache/shared_informer.go`,
//! `reflector.go`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::distributor::ListenerId;
use crate::fifo::DeltaFifo;

struct Entry {
    id: ListenerId,
    period: Duration,
    /// `None` until the resync task schedules it (on its own clock) after start.
    next: Option<Instant>,
}

/// The resync schedule of one informer.
///
/// Each handler has a period (zero = never) and a next due time. One task on the informer's
/// runtime sleeps until the earliest due time (tokio's clock, so paused time drives it); then
/// it records which handlers are due (the *syncing* set), moves each one's next due time one
/// period on, and queues a Sync delta for every cached key in the DeltaFIFO. The processing
/// thread publishes the resulting *sync* updates (and the updates of a relist that found an
/// object unchanged) to the syncing set only; real changes go to every handler.
///
/// Unlike client-go, there is no fixed check period: a handler added after start keeps its own
/// period even when it is shorter than every other (client-go raises it to the informer's
/// check period).
pub(super) struct Resync {
    entries: Mutex<Vec<Entry>>,
    /// Handlers due at the last resync: where sync updates go. The set stays until the next
    /// resync: an update that a relist found unchanged in between also goes to it (client-go
    /// keeps its set for one check period, with the same effect). Handlers with period zero
    /// are never in it.
    syncing: ArcSwap<Vec<ListenerId>>,
    changed: Notify,
}

impl Resync {
    pub(super) fn new() -> Self {
        Resync {
            entries: Mutex::new(Vec::new()),
            syncing: ArcSwap::from_pointee(Vec::new()),
            changed: Notify::new(),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Schedules a handler; `period` is already normalised (zero = never).
    pub(super) fn add(&self, id: ListenerId, period: Duration) {
        if period.is_zero() {
            return;
        }
        self.entries().push(Entry {
            id,
            period,
            next: None,
        });
        self.changed.notify_one();
    }

    pub(super) fn remove(&self, id: ListenerId) {
        self.entries().retain(|e| e.id != id);
        self.changed.notify_one();
    }

    /// Handlers that sync updates go to now.
    pub(super) fn syncing(&self) -> Arc<Vec<ListenerId>> {
        self.syncing.load_full()
    }

    /// The resync task, started with the informer: runs until the DeltaFIFO closes (or the
    /// task is aborted).
    pub(super) async fn run(self: Arc<Self>, fifo: DeltaFifo) {
        loop {
            if fifo.is_closed() {
                return;
            }
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            // Handlers not scheduled yet (registered before start, or just now) start their
            // period from here, on this task's clock (tokio's: paused time drives it).
            let earliest = {
                let now = Instant::now();
                let mut entries = self.entries();
                for e in entries.iter_mut() {
                    e.next.get_or_insert(now + e.period);
                }
                entries.iter().filter_map(|e| e.next).min()
            };
            match earliest {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = &mut changed => continue,
                    }
                }
                None => {
                    changed.await;
                    continue;
                }
            }
            if self.due(Instant::now()) {
                fifo.resync();
            }
        }
    }

    /// Records the handlers due at `now` as the syncing set and moves their schedules on;
    /// `true` when there is any.
    fn due(&self, now: Instant) -> bool {
        let mut due = Vec::new();
        for e in self.entries().iter_mut() {
            if let Some(next) = e.next
                && next <= now
            {
                due.push(e.id);
                e.next = Some(now + e.period);
            }
        }
        let any = !due.is_empty();
        self.syncing.store(Arc::new(due));
        any
    }
}
