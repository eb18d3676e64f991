//! The distributor: fans notifications out to listeners, replacing client-go's
//! `sharedProcessor`/`processorListener` (`tools/cache/shared_informer.go`; see
//! `../shared/SEMANTICS.md`, section Listeners).
//!
//! client-go gives each listener two unbuffered channels, two goroutines and a ring buffer
//! that grows without bound and never shrinks, all fed under a shared `RWMutex`. Here:
//!
//! - A batch of [`Notification`]s is published once as an `Arc<[Notification]>`; every listener
//!   receives the same allocation through its own crossbeam channel: one message per listener
//!   per batch, whatever the batch size.
//! - Each listener runs its [`EventHandler`] on its own thread, at its own pace, in order, one
//!   call at a time, never under a lock of ours; or, without a thread, is read as an async
//!   [`NotificationStream`] by a task of the caller's runtime (the publisher wakes it). A panicking call is caught (`catch_unwind`),
//!   counted, logged to stderr, and the next notification follows.
//! - Each listener has an [`OverflowPolicy`]: `Unbounded` (client-go's behaviour; the publisher
//!   never waits and [`ListenerStats::pending`] shows the lag), `Block` (a bounded channel:
//!   backpressure to the publisher), or `CoalesceByKey` (at most one pending notification per
//!   key). Channels free their blocks as they drain, and the coalescing queue swaps its maps out,
//!   so a backlog's memory goes back once it is handled.
//! - The publisher reads the listener list lock-free (`arc-swap`); adding or removing a listener
//!   copies the list under a registry mutex publishers never take.
//! - [`Distributor::publish_to`] feeds one listener only and [`Distributor::marker`] tells when
//!   a listener got past a point: the informer replays its cache to a late listener as adds
//!   with `is_in_initial_list = true` between its registration and the next live publish, then
//!   uses a marker for that registration's `has_synced`. As long as publishes come from one
//!   thread, every listener sees every notification meant for it exactly once, in order.
//!
//! # Consistency
//! A listener may lag: when a handler runs, the store may already hold newer states than the
//! notification (as in client-go). Counters are `Relaxed` gauges; use a [`Marker`] (or
//! [`Distributor::flush`]) to wait for a listener to catch up.

mod coalesce;
mod error;
mod handler;
mod listener;
mod marker;
mod metrics;
mod notification;
mod publisher;
mod stream;

pub use error::AddListenerError;
pub use handler::{EventHandler, HandlerFns};
pub use listener::{Listener, ListenerId, OverflowPolicy};
pub use marker::Marker;
pub use metrics::ListenerStats;
pub use notification::Notification;
pub use publisher::Distributor;
pub use stream::NotificationStream;
