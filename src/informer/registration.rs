//! Registering handlers: [`Registration`] (client-go `ResourceEventHandlerRegistration`) and
//! the informer's `add_event_handler`, `add_stream`, `events`, `flush` and
//! `remove_event_handler`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::Duration;

use super::Informer;
use super::options::{CENTURY, HandlerOptions, normalize_resync};
use crate::distributor::{
    AddListenerError, Distributor, EventHandler, Listener, Marker, Notification,
    NotificationStream, OverflowPolicy,
};
use crate::reflector::ListerWatcher;

/// Where a registration's sync marker is set: at registration when the informer had synced,
/// else by the processing thread when it syncs.
pub(super) type SyncSlot = Arc<OnceLock<Marker>>;

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
    /// [`CacheSyncError`](super::CacheSyncError) naming what did not sync.)
    ///
    /// # Paused time
    /// As for [`Informer::wait_for_cache_sync`]: under paused tokio time, use
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
        let deadline = now.checked_add(timeout).unwrap_or(now + CENTURY);
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

impl<L: ListerWatcher> Informer<L> {
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
        add: impl FnOnce(&Distributor, &str, OverflowPolicy) -> Result<(Listener, T), AddListenerError>,
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
}
