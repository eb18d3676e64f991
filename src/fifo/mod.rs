//! DeltaFIFO: the queue between the reflector and the informer (client-go
//! `tools/cache/delta_fifo.go`; `the_real_fifo.go` for [`FifoKind::RealFifo`]).
//!
//! The reflector pushes what it sees ([`DeltaFifo::add`], [`update`](DeltaFifo::update),
//! [`delete`](DeltaFifo::delete), [`replace`](DeltaFifo::replace) after a (re)list,
//! [`resync`](DeltaFifo::resync) on the resync timer); the informer pops [`PopBatch`]es of keys
//! and applies each key's [`Deltas`] to its store. The rules, and where they differ from
//! client-go, are on [`DeltaFifo`].

mod batch;
mod delta;
mod error;
mod filter;
mod in_order;
mod known;
mod queue;
pub(crate) mod room;
mod state;
mod streamed;
mod transform;

pub use batch::{KeyDeltas, PopBatch};
pub use delta::{DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Deltas, IntoIter};
pub use error::{PopError, TryPopError};
pub use known::KnownObjects;
pub use queue::{Builder, DeltaFifo, FifoKind};
pub use transform::{Filter, Transform};
