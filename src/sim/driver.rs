//! The flood driver: changes at a steady rate ([`SimServer::drive`]), paused, resumed and
//! re-rated while it runs ([`SimServer::set_rate`], [`SimServer::pause`],
//! [`SimServer::resume`]), e.g. from `informer serve`'s control endpoint.

use std::time::Duration;

use tokio::time::Instant;

use super::SimError;
use super::drive_state::DriveState;
use super::server::SimServer;

/// How often the driver makes the changes that fell due.
const TICK: Duration = Duration::from_millis(10);

impl SimServer {
    /// The flood driver's rate and pause state.
    pub fn drive_state(&self) -> DriveState {
        *self.shared.drive.borrow()
    }

    /// Sets the driver's rate in changes per second (0 stops it; not a number or negative is
    /// taken as 0). A running [`SimServer::drive`] follows from its next tick, with no burst
    /// for the time before.
    pub fn set_rate(&self, rate: f64) {
        let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
        self.shared.drive.send_modify(|d| d.rate = rate);
    }

    /// Pauses the driver: no change is made until [`SimServer::resume`].
    pub fn pause(&self) {
        self.shared.drive.send_modify(|d| d.paused = true);
    }

    /// Resumes a paused driver at its rate (changes due while paused are not made).
    pub fn resume(&self) {
        self.shared.drive.send_modify(|d| d.paused = false);
    }

    /// Makes changes at the driver's rate ([`SimServer::set_rate`]) until cancelled: every
    /// 10 ms, the changes due since the last tick are made with [`SimServer::flood`] (which
    /// waits for slow watchers when flow control is on, so the rate is then an upper bound).
    /// While paused or at rate 0 it waits for a change of state.
    ///
    /// # Errors
    /// The simulator's [`SimError`].
    ///
    /// # Cancel safety
    /// Cancel safe: changes are made in whole batches.
    pub async fn drive(&self) -> Result<(), SimError> {
        let mut state = self.shared.drive.subscribe();
        loop {
            // Idle until running.
            let running = |d: &DriveState| !d.paused && d.rate > 0.0;
            if state.wait_for(running).await.is_err() {
                return std::future::pending().await;
            }
            let mut last = Instant::now();
            let mut due = 0.0f64;
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let d = *state.borrow_and_update();
                if !running(&d) {
                    break;
                }
                let now = Instant::now();
                due += d.rate * now.duration_since(last).as_secs_f64();
                last = now;
                let n = due as u64;
                if n > 0 {
                    self.flood(n).await?;
                    due -= n as f64;
                }
            }
        }
    }
}
