//! Errors of [`DeltaFifo`](super::DeltaFifo) pops (client-go `ErrFIFOClosed`).

/// Why a blocking or async pop returned no batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PopError {
    /// The queue was closed and everything queued before has been handed out.
    #[error("DeltaFIFO: manipulating with closed queue")]
    Closed,
}

/// Why [`DeltaFifo::try_pop_batch`](super::DeltaFifo::try_pop_batch) returned no batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TryPopError {
    /// Nothing is queued right now.
    #[error("DeltaFIFO: queue is empty")]
    Empty,
    /// The queue was closed and everything queued before has been handed out.
    #[error("DeltaFIFO: manipulating with closed queue")]
    Closed,
}

impl From<PopError> for TryPopError {
    fn from(e: PopError) -> Self {
        match e {
            PopError::Closed => TryPopError::Closed,
        }
    }
}
