//! Errors of [`Distributor`](super::Distributor) operations.

/// Why [`Distributor::add_listener`](super::Distributor::add_listener) failed.
#[derive(Debug, thiserror::Error)]
pub enum AddListenerError {
    /// The distributor was shut down.
    #[error("distributor is shut down")]
    ShutDown,
    /// The listener's thread could not be started.
    #[error("cannot spawn the listener thread")]
    Spawn(#[source] std::io::Error),
    /// A [`OverflowPolicy::Block`](super::OverflowPolicy::Block) capacity of zero.
    #[error("a blocking listener needs a capacity of at least one batch")]
    ZeroCapacity,
}
