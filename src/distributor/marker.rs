//! [`Marker`]: a point in one listener's stream that tells when the listener got past it, and
//! `ReachOnDrop`, a marker in transit.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// Placed in a listener's stream by [`Distributor::marker`](super::Distributor::marker): it is
/// *reached* once the listener has handled every notification published to it before the
/// marker, or has stopped. The informer uses one after replaying the cache to a late listener
/// to tell when that listener has synced.
#[derive(Clone)]
pub struct Marker(Arc<State>);

struct State {
    reached: AtomicBool,
    lock: Mutex<()>,
    cond: Condvar,
    notify: Notify,
}

impl Marker {
    pub(crate) fn new() -> Self {
        Marker(Arc::new(State {
            reached: AtomicBool::new(false),
            lock: Mutex::new(()),
            cond: Condvar::new(),
            notify: Notify::new(),
        }))
    }

    pub(crate) fn reach(&self) {
        let guard = self.0.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // Release: whoever sees `true` (Acquire) sees the handlers' effects before the marker.
        self.0.reached.store(true, Ordering::Release);
        drop(guard);
        self.0.cond.notify_all();
        self.0.notify.notify_waiters();
    }

    /// `true` once reached. One atomic load.
    pub fn is_reached(&self) -> bool {
        self.0.reached.load(Ordering::Acquire)
    }

    /// Blocks until reached.
    pub fn wait(&self) {
        let mut guard = self.0.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !self.is_reached() {
            guard = self
                .0
                .cond
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Blocks until reached or `timeout` passed; returns [`is_reached`](Self::is_reached).
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let guard = self.0.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (_guard, _) = self
            .0
            .cond
            .wait_timeout_while(guard, timeout, |_| !self.is_reached())
            .unwrap_or_else(PoisonError::into_inner);
        self.is_reached()
    }

    /// Waits asynchronously until reached.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn reached(&self) {
        loop {
            let notified = self.0.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_reached() {
                return;
            }
            notified.await;
        }
    }
}

impl fmt::Debug for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Marker")
            .field("reached", &self.is_reached())
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
