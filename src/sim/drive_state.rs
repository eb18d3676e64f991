//! [`DriveState`]: what a simulator's flood driver ([`super::SimServer::drive`]) is told to do.

/// What a simulator's flood driver does: its rate and whether it is paused.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DriveState {
    /// Changes per second; 0 = none.
    pub rate: f64,
    /// While `true`, the driver makes no change (the rate is kept for [`super::SimServer::resume`]).
    pub paused: bool,
}
