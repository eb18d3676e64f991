//! [`RatioWatch`]: tells when a compression dictionary has gone stale.

/// Objects per window of the ratio's measure.
pub(super) const WINDOW: usize = 1024;

/// A window compressing this many times worse than the dictionary's first one asks for a new
/// dictionary (the cluster's objects have drifted from those it was trained on: new images,
/// new labels, a new workload mix).
pub(super) const DEGRADED: f64 = 1.5;

/// Compressed ÷ received bytes of a dictionary's output, window by window: the first
/// [`WINDOW`] objects compacted with it are its baseline; a later window over [`DEGRADED`] ×
/// that says to train again.
#[derive(Debug, Default)]
pub(super) struct RatioWatch {
    raw: u64,
    packed: u64,
    n: usize,
    baseline: Option<f64>,
}

impl RatioWatch {
    /// Records one compacted object; `true` when a window just closed degraded.
    pub(super) fn record(&mut self, raw: usize, packed: usize) -> bool {
        self.raw += raw as u64;
        self.packed += packed as u64;
        self.n += 1;
        if self.n < WINDOW {
            return false;
        }
        let ratio = self.packed as f64 / self.raw.max(1) as f64;
        (self.raw, self.packed, self.n) = (0, 0, 0);
        match self.baseline {
            None => {
                self.baseline = Some(ratio);
                false
            }
            Some(b) => ratio > b * DEGRADED,
        }
    }

    /// The first window's ratio, once measured.
    pub(super) fn baseline(&self) -> Option<f64> {
        self.baseline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(w: &mut RatioWatch, raw: usize, packed: usize) -> Vec<bool> {
        (0..WINDOW).map(|_| w.record(raw, packed)).collect()
    }

    #[test]
    fn only_a_closed_window_worse_than_the_first_degrades() {
        let mut w = RatioWatch::default();
        assert!(
            window(&mut w, 1000, 100).iter().all(|d| !d),
            "the first window is the baseline"
        );
        assert_eq!(w.baseline(), Some(0.1));
        assert!(
            !window(&mut w, 1000, 140).iter().any(|d| *d),
            "1.4× is within bounds"
        );
        let d = window(&mut w, 1000, 160);
        assert_eq!(
            d.iter().filter(|d| **d).count(),
            1,
            "one verdict per window"
        );
        assert!(d[WINDOW - 1], "given when the window closes");
        assert_eq!(
            w.baseline(),
            Some(0.1),
            "the baseline stays with the dictionary"
        );
    }
}
