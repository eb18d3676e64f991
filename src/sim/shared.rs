//! [`Shared`]: the state a [`super::SimServer`] handle and its watch bodies share.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::codec::Codec;
use super::config::SimConfig;
use super::drive_state::DriveState;
use super::state::State;
use crate::object::{Encoding, GroupVersionKind, WatchFormat};

/// State shared by the server handle and its watch bodies.
///
/// One mutex guards [`State`]: generators take it once per batch of changes, watches once per
/// chunk (cloning `Bytes` handles only), and watches are woken once per batch through
/// `rv_tx`.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: SimConfig,
    pub(crate) codec: Arc<Codec>,
    pub(crate) list_gvk: GroupVersionKind,
    pub(crate) state: Mutex<State>,
    /// The current resourceVersion, published after each batch of changes: watchers wait on
    /// it.
    pub(crate) rv_tx: watch::Sender<u64>,
    /// Woken when a watcher advances or closes, while a flood driver waits for it.
    pub(crate) progress: Notify,
    /// Flood drivers waiting on `progress`.
    pub(crate) producers_waiting: AtomicUsize,
    /// Total time flood drivers spent waiting for watchers, microseconds.
    pub(crate) flood_wait_us: AtomicU64,
    /// Time origin of `continue` tokens.
    pub(crate) epoch: Instant,
    /// Counter for per-watch random seeds (chunk cuts).
    pub(crate) watches_opened: AtomicU64,
    /// Stream faults waiting in `State::faults`: lets watches skip the lock when there are
    /// none. Incremented before the wake-up that [`super::SimServer::inject`] sends through
    /// `rv_tx`, so a watch woken by it sees the increment (the channel orders them); a watch
    /// that reads 0 just misses the fault until its next look.
    pub(crate) stream_faults: AtomicUsize,
    /// The flood driver's rate and pause state ([`super::SimServer::drive`]).
    pub(crate) drive: watch::Sender<DriveState>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes flood drivers waiting for watchers (cheap when none waits).
    pub(crate) fn watcher_progressed(&self) {
        if self.producers_waiting.load(Ordering::SeqCst) > 0 {
            self.progress.notify_waiters();
        }
    }

    pub(crate) fn watch_format(&self) -> WatchFormat {
        match self.cfg.templates.encoding() {
            Encoding::Protobuf => WatchFormat::Protobuf,
            Encoding::Json => WatchFormat::Json,
        }
    }
}
