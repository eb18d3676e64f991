//! A listener's public face: its [`OverflowPolicy`], its [`ListenerId`] and the [`Listener`]
//! handle (identity and counters).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::metrics::{ListenerStats, Metrics};

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
    /// channel operations around it (see `Entry::stop`).
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

    pub(crate) fn new(id: ListenerId, name: String, policy: OverflowPolicy) -> Listener {
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

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// A stop was requested while the listener's channel was full: stop once it is empty.
    pub(crate) fn stop_requested(&self) -> bool {
        self.shared.stop_requested.load(Ordering::SeqCst)
    }

    /// Sets [`Listener::stop_requested`].
    pub(crate) fn request_stop(&self) {
        self.shared.stop_requested.store(true, Ordering::SeqCst);
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
