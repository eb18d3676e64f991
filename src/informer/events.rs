//! [`EventStream`]: an informer's changes as a `Stream` of typed [`Event`]s with errors, in
//! the shape of kube-runtime's `watcher` (`Stream<Item = Result<Event<K>, Error>>`) on top of
//! the informer's cache. The variants differ from `watcher::Event` (see [`Event`]), so
//! kube-runtime's stream adapters (`WatchStreamExt`) do not apply to it.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_util::task::AtomicWaker;

use super::options::HandlerOptions;
use super::typed::TypedLister;
use super::{Informer, Registration};
use crate::distributor::AddListenerError;
use crate::distributor::{Notification, NotificationStream};
use crate::object::{DecodeError, ObjectKey};
use crate::reflector::{ListerWatcher, ReflectorError};

/// One change seen by an [`EventStream`], its objects typed.
///
/// Unlike kube-runtime's `watcher::Event`, a relist does not restart the stream with
/// `Init`/`InitApply`/`InitDone`: the informer compares the new list with its cache and the
/// stream carries only the differences (adds, updates, deletes), as client-go's handlers get
/// them.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    /// An object appeared. `initial` is `true` for the objects of the initial state (the
    /// first list, or the cache replayed to a stream made after the informer synced).
    Added {
        /// The object.
        object: Arc<K>,
        /// Part of the initial state.
        initial: bool,
    },
    /// An object changed. Equal resourceVersions mean a resync (or a relist that found it
    /// unchanged).
    Updated {
        /// The state the cache held before.
        old: Arc<K>,
        /// The state it holds now.
        new: Arc<K>,
    },
    /// An object was deleted. `final_state_unknown` when the deletion was only seen by a
    /// relist (client-go `DeletedFinalStateUnknown`): `object` is then the last state cached.
    Deleted {
        /// The deleted object (its last known state).
        object: Arc<K>,
        /// Seen by a relist, not by a watch event.
        final_state_unknown: bool,
    },
    /// Every object of the initial state has been yielded (once per stream, after the
    /// initial adds; kube-runtime's `InitDone`).
    Synced,
}

/// Why an [`EventStream`] item is an error. The stream goes on after every one: the informer
/// retries lists and watches by itself, and an object that does not decode is skipped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// A list or watch failed; the reflector backs off and retries (client-go's watch error
    /// handler sees the same errors). The message carries the whole cause chain (e.g. the
    /// server's status), so `{e}` says why.
    #[error("list/watch: {}", with_causes(.0.as_ref()))]
    ListWatch(Arc<ReflectorError>),
    /// An object of a notification does not decode as the stream's kind.
    #[error("object {key}: {source}")]
    Decode {
        /// The object's key.
        key: ObjectKey,
        /// Why it does not decode.
        #[source]
        source: DecodeError,
    },
    /// The stream was not read for so long that list/watch errors were dropped (it keeps the
    /// last [`ERROR_BACKLOG`]); the events themselves are never dropped.
    #[error("{0} list/watch errors dropped while the stream was not read")]
    ErrorsDropped(u64),
}

/// `err: cause: cause...`.
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// List/watch errors kept for a stream that is not being read.
pub const ERROR_BACKLOG: usize = 64;

/// A stream's share of the informer's list/watch errors.
#[derive(Default)]
pub(crate) struct ErrorFeed {
    queue: Mutex<(VecDeque<Arc<ReflectorError>>, u64)>,
    waker: AtomicWaker,
}

impl ErrorFeed {
    pub(crate) fn push(&self, err: Arc<ReflectorError>) {
        {
            let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if q.0.len() == ERROR_BACKLOG {
                q.0.pop_front();
                q.1 += 1;
            }
            q.0.push_back(err);
        }
        self.waker.wake();
    }

    fn pop(&self) -> Option<EventError> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.1 > 0 {
            return Some(EventError::ErrorsDropped(std::mem::take(&mut q.1)));
        }
        q.0.pop_front().map(EventError::ListWatch)
    }
}

/// The informer's changes as typed [`Event`]s with errors: a kube-runtime `watcher`-style
/// stream over the informer's cache (made by [`Informer::events`](super::Informer::events)).
/// It is one of the informer's handlers, with that handler's guarantees: every change in
/// order, none missed, initial adds first (also when made after the informer synced).
///
/// Dropping it removes its handler. Errors never end it: it ends when the informer shuts
/// down. A [`Block`](crate::distributor::OverflowPolicy::Block) stream that is not read holds
/// the informer back; the default policy queues without bound.
///
/// # Examples
/// ```no_run
/// # async fn demo(informer: informer::Informer<informer::HttpListerWatcher>) {
/// use futures_util::StreamExt;
/// use informer::{Event, HandlerOptions, TypedLister};
/// use k8s_openapi::api::core::v1::Pod;
///
/// let pods: TypedLister<Pod> = TypedLister::serde(informer.lister());
/// let mut events = informer.events(pods, HandlerOptions::default()).unwrap();
/// while let Some(item) = events.next().await {
///     match item {
///         Ok(Event::Added { object, .. }) => println!("added {:?}", object.metadata.name),
///         Ok(Event::Synced) => println!("synced"),
///         Ok(_) => {}
///         Err(e) => eprintln!("{e}"),
///     }
/// }
/// # }
/// ```
pub struct EventStream<K> {
    notifications: NotificationStream,
    lister: TypedLister<K>,
    registration: Registration,
    errors: Arc<ErrorFeed>,
    synced_sent: bool,
    /// A live event polled before `Synced` was yielded: sent right after it.
    held: Option<Notification>,
}

impl<K> fmt::Debug for EventStream<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("kind", &std::any::type_name::<K>())
            .field("listener", self.notifications.listener())
            .field("synced_sent", &self.synced_sent)
            .finish_non_exhaustive()
    }
}

impl<K: Send + Sync + 'static> EventStream<K> {
    pub(crate) fn new(
        notifications: NotificationStream,
        lister: TypedLister<K>,
        registration: Registration,
        errors: Arc<ErrorFeed>,
    ) -> Self {
        EventStream {
            notifications,
            lister,
            registration,
            errors,
            synced_sent: false,
            held: None,
        }
    }

    /// The registration of the stream's handler (its listener, `has_synced`).
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    fn typed(&self, n: Notification) -> Result<Event<K>, EventError> {
        let key = n.key();
        let typed = |o| {
            self.lister.typed(o).map_err(|source| EventError::Decode {
                key: key.clone(),
                source,
            })
        };
        Ok(match &n {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => Event::Added {
                object: typed(obj)?,
                initial: *is_in_initial_list,
            },
            Notification::Update { old, new } => Event::Updated {
                old: typed(old)?,
                new: typed(new)?,
            },
            Notification::Delete { obj } => Event::Deleted {
                object: typed(obj.object())?,
                final_state_unknown: obj.is_tombstone(),
            },
        })
    }
}

impl<K: Send + Sync + 'static> Stream for EventStream<K> {
    type Item = Result<Event<K>, EventError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(n) = this.held.take() {
            return Poll::Ready(Some(this.typed(n)));
        }
        this.errors.waker.register(cx.waker());
        if let Some(e) = this.errors.pop() {
            return Poll::Ready(Some(Err(e)));
        }
        let next = Pin::new(&mut this.notifications).poll_next(cx);
        // The sync marker follows the initial adds in the handler's feed: it is reached when
        // the stream is polled past them, whatever comes next.
        if !this.synced_sent && this.registration.has_synced() {
            this.synced_sent = true;
            match next {
                Poll::Ready(Some(n)) => this.held = Some(n),
                Poll::Ready(None) | Poll::Pending => {}
            }
            return Poll::Ready(Some(Ok(Event::Synced)));
        }
        match next {
            Poll::Ready(Some(n)) => Poll::Ready(Some(this.typed(n))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<L: ListerWatcher> Informer<L> {
    /// The informer's changes as a stream of typed [`Event`]s with list/watch errors, the
    /// shape of kube-runtime's `watcher` (see [`EventStream`]). A handler like any other
    /// ([`add_stream`](Self::add_stream)), its objects read through `lister` (decoded once
    /// per object version, shared with every other reader of that lister).
    ///
    /// # Errors
    /// As [`add_stream`](Self::add_stream).
    ///
    /// # Examples
    /// See [`EventStream`]; for a typed informer, [`TypedInformer::events`] passes its own
    /// lister.
    ///
    /// [`TypedInformer::events`]: crate::TypedInformer::events
    pub fn events<K: Send + Sync + 'static>(
        &self,
        lister: TypedLister<K>,
        options: HandlerOptions,
    ) -> Result<EventStream<K>, AddListenerError> {
        let feed = Arc::new(ErrorFeed::default());
        self.shared
            .error_feeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&feed));
        let (registration, notifications) = self.add_stream(options)?;
        Ok(EventStream::new(notifications, lister, registration, feed))
    }
}
