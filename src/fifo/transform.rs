//! [`Transform`]: the function every incoming object goes through before it is queued.

use std::sync::Arc;

use crate::object::Object;

/// A transform applied to every object entering the queue from the producer (`add`, `update`,
/// `delete`, `replace`), before it is queued; for example dropping `managedFields`
/// (client-go `TransformFunc`). Not applied to objects read back from
/// [`KnownObjects`](super::KnownObjects) (they went through it when they were queued).
pub type Transform = Arc<dyn Fn(Arc<Object>) -> Arc<Object> + Send + Sync>;
