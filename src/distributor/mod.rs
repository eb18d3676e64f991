//! The distributor: fans notifications out to listeners (client-go `sharedProcessor` and
//! `processorListener`, `tools/cache/shared_informer.go`).
//!
//! A [`Distributor`] publishes each batch of [`Notification`]s once, as one shared
//! `Arc<[Notification]>`, to every listener. A listener runs its [`EventHandler`] on its own
//! thread, or is read as an async [`NotificationStream`]; its [`OverflowPolicy`] says what
//! happens when it falls behind. A [`Marker`] tells when a listener got past a point.
//!
//! # Consistency
//! A listener may lag: when a handler runs, the store may already hold newer states than the
//! notification (as in client-go). Counters are `Relaxed` gauges; use a [`Marker`] (or
//! [`Distributor::flush`]) to wait for a listener to catch up.

mod coalesce;
mod entry;
mod error;
mod fanout;
mod feed;
mod handler;
mod listener;
mod marker;
mod metrics;
mod notification;
mod stream;
mod wakeup;
mod worker;

pub use error::AddListenerError;
pub use fanout::Distributor;
pub use handler::{EventHandler, HandlerFns};
pub use listener::{Listener, ListenerId, OverflowPolicy};
pub use marker::Marker;
pub use metrics::ListenerStats;
pub use notification::Notification;
pub use stream::NotificationStream;
