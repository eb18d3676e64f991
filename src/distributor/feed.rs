//! A listener's feed, between the publisher and the listener's consumer (its thread or its
//! stream): a crossbeam channel of [`Msg`]s or a coalescing queue, as its [`OverflowPolicy`]
//! says. One queue per listener, fed without a lock of the distributor's (client-go: two
//! unbuffered channels, two goroutines and a ring buffer that never shrinks, under a shared
//! `RWMutex`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use crossbeam::channel::{Receiver, Sender, bounded, unbounded};

use super::Notification;
use super::coalesce::CoalesceQueue;
use super::error::AddListenerError;
use super::listener::OverflowPolicy;
use super::marker::ReachOnDrop;

/// What a channel feed carries.
pub(crate) enum Msg {
    Batch(Arc<[Notification]>),
    /// A batch, then a marker reached once the batch is handled (one message, so it fits in a
    /// `Block` channel with room for one).
    BatchThen(Arc<[Notification]>, ReachOnDrop),
    Marker(ReachOnDrop),
    Stop,
}

/// The publisher's end of a feed.
pub(crate) enum Feed {
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

    pub(crate) fn wake(&self) {
        let waker = self.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A feed for `policy`: the publisher's end and the consumer's.
pub(crate) fn new_feed(policy: OverflowPolicy) -> Result<(Feed, Source), AddListenerError> {
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
