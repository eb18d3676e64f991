//! DeltaFIFO: the queue between the reflector and the informer, following client-go
//! `tools/cache/delta_fifo.go` (see `../shared/SEMANTICS.md`, section DeltaFIFO).
//!
//! The reflector pushes what it sees ([`DeltaFifo::add`], [`update`](DeltaFifo::update),
//! [`delete`](DeltaFifo::delete), [`replace`](DeltaFifo::replace) after a (re)list,
//! [`resync`](DeltaFifo::resync) on the resync timer); the informer pops [`Batch`]es of keys
//! and applies each key's [`Deltas`] to its store.
//!
//! # Rules (as upstream)
//! - Per key, deltas are kept oldest first; keys pop in the order they were first queued; a key
//!   is queued at most once (new deltas for a queued key join its list).
//! - Only two consecutive [`DeltaType::Deleted`] are collapsed, keeping the one that is not a
//!   tombstone ([`Deltas`]).
//! - `delete` of a key neither queued nor known (see [`KnownObjects`]) is ignored.
//! - `replace` queues [`DeltaType::Replaced`] for every listed object and a
//!   [`DeltaType::Deleted`] carrying a [`DeletedFinalStateUnknown`] tombstone for every key that
//!   is queued or known but not listed; the tombstone holds the newest queued object of that
//!   key, else the known object.
//! - `resync` queues [`DeltaType::Sync`] for every known key with nothing queued.
//! - [`has_synced`](DeltaFifo::has_synced): the first `replace` happened and everything it left
//!   queued has been popped (and its batch completed).
//! - After [`close`](DeltaFifo::close), pops hand out what is left, then fail with
//!   [`PopError::Closed`].
//! - A [`Transform`] runs on every incoming object before it is queued.
//!
//! # Where it differs (better)
//! - **No lock while the consumer works.** Upstream `Pop` runs the consumer's `process` under
//!   the queue lock, so producers wait for handlers and `HasSynced` cannot be called from one.
//!   Here a pop takes up to `max` keys out under a short lock and returns them as a [`Batch`];
//!   producers go on while the consumer applies it.
//! - **In-flight overlay.** Upstream's lock also guaranteed that `replace`/`delete`/`resync`
//!   never saw a store half-way through applying a popped key. To keep that without the lock,
//!   the queue remembers, per key of an uncompleted batch, the state the consumer is applying
//!   (the newest delta's object, or "deleted"), and reads [`KnownObjects`] through that
//!   overlay. Example this prevents: a batch holding `Added(x)` is being applied when a relist
//!   that no longer lists `x` arrives; the store does not have `x` yet, but the overlay does, so
//!   `replace` still queues the tombstone and `x` does not stay in the store as a ghost.
//!   A batch is completed when it is dropped: drop it only after applying it.
//! - **`has_synced` is one atomic load** (`Acquire`, paired with the `Release` of the batch
//!   completion), callable from inside the consumer.
//! - Only `replace` marks the queue populated (upstream also counts a lone `add`/`delete`);
//!   an informer's first `replace` always comes first anyway.
//!
//! # Waking consumers
//! Blocked [`pop_batch`](DeltaFifo::pop_batch) calls sleep on a `Condvar`, async
//! [`pop_batch_async`](DeltaFifo::pop_batch_async) calls on a `tokio::sync::Notify`. Consumers
//! only sleep on an empty queue, so producers signal only when the queue goes from empty to
//! non-empty (and the `Condvar` only when a thread waits): a busy queue costs producers one
//! short lock per push and no wake-up.

mod delta;
mod error;
mod in_order;
mod known;
mod queue;

pub use delta::{DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Deltas, IntoIter};
pub use error::{PopError, TryPopError};
pub use known::KnownObjects;
pub use queue::{Batch, Builder, DeltaFifo, FifoKind, KeyDeltas, Transform};
