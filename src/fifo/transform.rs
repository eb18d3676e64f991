//! [`Transform`]: the function every incoming object goes through before it is queued;
//! [`Filter`]: the question whether an object is to be kept at all.

use std::sync::Arc;

use crate::object::Object;

/// A transform applied to every object entering the queue from the producer (`add`, `update`,
/// `delete`, `replace`), before it is queued; for example dropping `managedFields`
/// (client-go `TransformFunc`). Not applied to objects read back from
/// [`KnownObjects`](super::KnownObjects) (they went through it when they were queued).
pub type Transform = Arc<dyn Fn(Arc<Object>) -> Arc<Object> + Send + Sync>;

/// Whether an object is to be kept (`true`) or left out of the cache (`false`): what
/// [`DeltaFifo::delete_unless`](super::DeltaFifo::delete_unless) asks, and what an informer's
/// filter (`Informer::set_filter`) is. It should be cheap and must not block: it runs on the
/// reflector's task for every object received.
pub type Filter = Arc<dyn Fn(&Object) -> bool + Send + Sync>;
