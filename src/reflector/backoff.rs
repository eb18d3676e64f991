//! Exponential backoff with jitter and reset after a healthy period, as client-go's reflector
//! uses it (`wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0, clock)` in
//! `tools/cache/reflector.go`).

use std::time::Duration;

use tokio::time::Instant;

/// Backoff parameters. Defaults are client-go's reflector defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffConfig {
    /// First delay: 800 ms.
    pub initial: Duration,
    /// Cap on the (pre-jitter) delay: 30 s.
    pub max: Duration,
    /// Growth factor per consecutive failure: 2.0.
    pub factor: f64,
    /// Jitter: each delay is `d + random(0..d * jitter)`; 1.0.
    pub jitter: f64,
    /// After this long without a failure the delay starts again from `initial`: 2 min.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Backoff state: the delay to wait before the next attempt. Uses tokio's clock, so paused-time
/// tests control it.
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    /// Pre-jitter delay of the next failure.
    next: Duration,
    last_failure: Option<Instant>,
    rng: fastrand::Rng,
}

impl Backoff {
    /// Fresh backoff state.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff {
            next: config.initial,
            config,
            last_failure: None,
            rng: fastrand::Rng::new(),
        }
    }

    /// Fresh backoff state with a seeded jitter source (deterministic tests).
    pub fn with_seed(config: BackoffConfig, seed: u64) -> Self {
        Backoff {
            rng: fastrand::Rng::with_seed(seed),
            ..Backoff::new(config)
        }
    }

    /// Records a failure now and returns how long to wait before retrying:
    /// `d + random(0..d * jitter)` where `d` doubles per consecutive failure up to `max`, and
    /// restarts from `initial` when the previous failure is older than `reset_after`.
    pub fn failure(&mut self) -> Duration {
        let now = Instant::now();
        if self
            .last_failure
            .is_some_and(|t| now.duration_since(t) >= self.config.reset_after)
        {
            self.next = self.config.initial;
        }
        self.last_failure = Some(now);
        let base = self.next;
        let grown = base.as_secs_f64() * self.config.factor;
        self.next = Duration::from_secs_f64(grown.min(self.config.max.as_secs_f64()));
        let jitter = base.as_secs_f64() * self.config.jitter * self.rng.f64();
        base + Duration::from_secs_f64(jitter)
    }

    /// Pre-jitter delay the next failure would start from (for metrics).
    pub fn current(&self) -> Duration {
        self.next
    }

    /// Forgets all failures.
    pub fn reset(&mut self) {
        self.next = self.config.initial;
        self.last_failure = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn doubles_to_the_cap_and_resets_after_health() {
        let cfg = BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        };
        let mut b = Backoff::new(cfg);
        let got: Vec<u64> = (0..8).map(|_| b.failure().as_millis() as u64).collect();
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(b.failure(), Duration::from_millis(800));
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_stays_within_one_delay() {
        let mut b = Backoff::with_seed(BackoffConfig::default(), 7);
        for expected in [800u128, 1600, 3200] {
            let d = b.failure().as_millis();
            assert!(d >= expected && d < 2 * expected, "{d} for base {expected}");
        }
    }
}
