//! [`NotificationStream`]: a listener read as an async `Stream` instead of by a thread.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use crossbeam::channel::TryRecvError;
use futures_core::Stream;

use super::Notification;
use super::feed::{Msg, Source, WakerSlot};
use super::listener::Listener;
use super::marker::ReachOnDrop;

/// The notifications of one listener as a [`futures_core::Stream`], for tokio (or any async)
/// users: no thread of its own; the publisher wakes the task that polls it. Made by
/// [`Distributor::add_stream`](super::Distributor::add_stream) (or the informer's
/// `add_stream`).
///
/// The listener's [`OverflowPolicy`](super::OverflowPolicy) applies as for a thread listener:
/// `Unbounded` buffers, `Block` makes the publisher wait until this stream is polled,
/// `CoalesceByKey` merges per key while the stream lags. Items arrive in order, each once.
///
/// Counters: an item counts as delivered when the stream yields it; the time from one yielded
/// item to the next poll is counted as handler time. A marker placed behind an item (e.g. a
/// registration's sync point) is reached when the stream is polled again after yielding it,
/// i.e. once the reader is done with everything before the marker.
///
/// The stream ends (`None`) after the listener is removed or the distributor shuts down, once
/// everything published before is yielded. Dropping the stream stops delivery to it (later
/// publishes to it are discarded) but leaves the listener registered until it is removed.
///
/// # Cancel safety
/// [`next`](Self::next) is cancel safe: an item is taken out only in the poll that returns it.
pub struct NotificationStream {
    listener: Listener,
    source: Source,
    waker: Arc<WakerSlot>,
    /// The batch being yielded and the index of its next item.
    current: Option<(Arc<[Notification]>, usize)>,
    /// Reached once `current` is yielded and the reader polls again.
    current_marker: Option<ReachOnDrop>,
    /// Items taken from a coalescing queue, still to yield.
    coalesced: std::vec::IntoIter<Notification>,
    /// Markers taken with `coalesced`, reached once those are yielded.
    markers: Vec<ReachOnDrop>,
    /// The coalescing queue said stop: end after `coalesced`.
    stopping: bool,
    last_yield: Option<Instant>,
    done: bool,
}

enum Next {
    Msg(Msg),
    Coalesced,
    Empty,
    Ended,
}

impl NotificationStream {
    pub(crate) fn new(listener: Listener, source: Source, waker: Arc<WakerSlot>) -> Self {
        NotificationStream {
            listener,
            source,
            waker,
            current: None,
            current_marker: None,
            coalesced: Vec::new().into_iter(),
            markers: Vec::new(),
            stopping: false,
            last_yield: None,
            done: false,
        }
    }

    /// The listener behind this stream (id, name, policy, counters).
    pub fn listener(&self) -> &Listener {
        &self.listener
    }

    /// The next notification; `None` once the stream ended.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Notification> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    fn try_source(&mut self) -> Next {
        match &self.source {
            Source::Channel(rx) => match rx.try_recv() {
                Ok(m) => Next::Msg(m),
                Err(TryRecvError::Empty) => Next::Empty,
                Err(TryRecvError::Disconnected) => Next::Ended,
            },
            Source::Coalesce { queue, doorbell } => match doorbell.try_recv() {
                Ok(()) => {
                    let taken = queue.take();
                    self.coalesced = taken.items.into_iter();
                    self.markers = taken.markers;
                    self.stopping = taken.stopped;
                    Next::Coalesced
                }
                Err(TryRecvError::Empty) => Next::Empty,
                Err(TryRecvError::Disconnected) => Next::Ended,
            },
        }
    }

    fn yielded(&mut self, n: Notification) -> Poll<Option<Notification>> {
        self.listener
            .metrics()
            .delivered
            .fetch_add(1, Ordering::Relaxed);
        self.last_yield = Some(Instant::now());
        Poll::Ready(Some(n))
    }
}

impl Stream for NotificationStream {
    type Item = Notification;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notification>> {
        let this = &mut *self;
        if let Some(t) = this.last_yield.take() {
            let nanos = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            this.listener
                .metrics()
                .handler_nanos
                .fetch_add(nanos, Ordering::Relaxed);
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if let Some((batch, i)) = &mut this.current {
                if let Some(n) = batch.get(*i).cloned() {
                    *i += 1;
                    return this.yielded(n);
                }
                this.current = None;
                this.current_marker = None;
            }
            if let Some(n) = this.coalesced.next() {
                return this.yielded(n);
            }
            // Everything taken with these markers was yielded and the reader came back.
            this.markers.clear();
            if this.stopping {
                this.done = true;
                continue;
            }
            let next = match this.try_source() {
                Next::Empty => {
                    // Check again under the waker lock, then register: a publisher queues,
                    // then takes the lock to wake, so it either sees the waker or we see its
                    // message.
                    let waker = this.waker.clone();
                    let mut slot = waker.lock();
                    match this.try_source() {
                        // Removed while its channel was full: everything queued before the
                        // removal has been yielded.
                        Next::Empty if this.listener.stop_requested() => Next::Ended,
                        Next::Empty => {
                            *slot = Some(cx.waker().clone());
                            return Poll::Pending;
                        }
                        other => other,
                    }
                }
                other => other,
            };
            match next {
                Next::Msg(Msg::Batch(b)) => this.current = Some((b, 0)),
                Next::Msg(Msg::BatchThen(b, m)) => {
                    this.current = Some((b, 0));
                    this.current_marker = Some(m);
                }
                Next::Msg(Msg::Marker(m)) => drop(m),
                Next::Msg(Msg::Stop) | Next::Ended => this.done = true,
                Next::Coalesced | Next::Empty => {}
            }
        }
    }
}

impl Drop for NotificationStream {
    fn drop(&mut self) {
        // What was published to this stream and will never be yielded: taken back from the
        // lag gauge (later publishes find the feed gone and are not counted).
        let mut gone = self.coalesced.len();
        if let Some((batch, i)) = &self.current {
            gone += batch.len().saturating_sub(*i);
        }
        match &self.source {
            // A coalescing queue would keep merging for nobody: stop it (a channel disconnects
            // on its own when the receiver goes).
            Source::Coalesce { queue, .. } => {
                queue.stop();
                // Releases the markers it held.
                gone += queue.take().items.len();
            }
            Source::Channel(rx) => {
                while let Ok(msg) = rx.try_recv() {
                    if let Msg::Batch(b) | Msg::BatchThen(b, _) = msg {
                        gone += b.len();
                    }
                }
            }
        }
        self.listener.metrics().unpublished(gone as u64);
    }
}

impl fmt::Debug for NotificationStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationStream")
            .field("listener", &self.listener)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
