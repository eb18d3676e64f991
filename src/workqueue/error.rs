//! [`ShutDown`]: what `get` returns once the queue has nothing more to hand out.

/// Returned by [`WorkQueue::get`](super::WorkQueue::get) and
/// [`WorkQueue::get_async`](super::WorkQueue::get_async) once the queue is shutting down
/// and has nothing left to hand out: the worker should return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("work queue is shutting down")]
pub struct ShutDown;
