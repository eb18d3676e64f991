//! The flood's progress bar on stderr: events made of `--events`, or seconds of `--duration`.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar drawn only once the flood has run for a second (short runs stay quiet), and
/// never with `--no-progress` or `--json`.
#[derive(Debug)]
pub(super) struct Progress {
    bar: ProgressBar,
    /// Whether it may be drawn.
    show: bool,
    /// Whether it counts seconds (a `--duration` run) rather than events.
    timed: bool,
}

impl Progress {
    /// A bar up to `limit` events, or `duration` seconds when `limit` is `u64::MAX` (a flood
    /// without an event count); drawn when `show`.
    pub(super) fn new(limit: u64, duration: Option<Duration>, show: bool) -> Self {
        let timed = limit == u64::MAX;
        let len = if timed {
            duration.map_or(0, |d| d.as_secs())
        } else {
            limit
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = if timed {
            "{spinner} flood [{elapsed_precise}] {bar:40} {pos}/{len} s {msg}"
        } else {
            "{spinner} flood [{elapsed_precise}] {bar:40} {pos}/{len} events ({per_sec})"
        };
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress { bar, show, timed }
    }

    /// Shows `made` events after `elapsed` of flooding.
    pub(super) fn update(&self, made: u64, elapsed: Duration) {
        if self.show && self.bar.is_hidden() && elapsed > Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        if self.timed {
            self.bar.set_position(elapsed.as_secs());
            self.bar.set_message(format!("{made} events"));
        } else {
            self.bar.set_position(made);
        }
    }

    /// Removes the bar.
    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
