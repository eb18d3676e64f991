//! [`ElectionTiming`] and [`LeaderElectionConfig`]: the durations client-go's
//! `tools/leaderelection` takes and the rules it checks them by (`NewLeaderElector`).

use std::time::Duration;

/// client-go's jitter factor for the acquire loop: a candidate retries every
/// `retry_period × (1 + up to 1.2)`, and the renew deadline must leave room for one such wait.
pub const JITTER_FACTOR: f64 = 1.2;

/// The longest duration the timing takes: `i32::MAX` seconds (about 68 years), the most a
/// Lease's `leaseDurationSeconds` holds.
pub const MAX_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The identity is empty: every candidate needs its own, stable for its lifetime (a Pod
    /// name, a hostname plus a random suffix).
    #[error("the identity must not be empty")]
    EmptyIdentity,
    /// The Lease name is empty.
    #[error("the lease name must not be empty")]
    EmptyName,
    /// A name the API server would refuse: a Lease name must be a DNS subdomain (lower case
    /// letters, digits, '-' and '.', at most 253 characters); a shard group a label value.
    #[error("{what} {value:?} is not valid: {rule}")]
    InvalidName {
        /// Which name.
        what: &'static str,
        /// The name given.
        value: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// The lease duration is under one second (the Lease holds whole seconds), or the retry
    /// period is zero.
    #[error("{0} is too short (lease_duration at least 1 s, retry_period above zero)")]
    TooShort(&'static str),
    /// A duration is over [`MAX_DURATION`]: the Lease's `leaseDurationSeconds` is an int32,
    /// and deadlines that far out overflow the clock.
    #[error("{0} must be at most {max} s", max = MAX_DURATION.as_secs())]
    TooLong(&'static str),
    /// The Lease holds whole seconds: a fraction would be cut off, and others would wait less
    /// than the holder acts.
    #[error("lease_duration ({0:?}) must be a whole number of seconds")]
    NotWholeSeconds(Duration),
    /// `lease_duration` must be longer than `renew_deadline`: the difference is what covers
    /// request latency and clocks that run at different rates.
    #[error("lease_duration ({lease:?}) must be longer than renew_deadline ({renew:?})")]
    LeaseNotLongerThanRenew {
        /// The lease duration given.
        lease: Duration,
        /// The renew deadline given.
        renew: Duration,
    },
    /// `renew_deadline` must exceed `JITTER_FACTOR × retry_period`.
    #[error("renew_deadline ({renew:?}) must be longer than 1.2 × retry_period ({retry:?})")]
    RenewNotLongerThanRetry {
        /// The renew deadline given.
        renew: Duration,
        /// The retry period given.
        retry: Duration,
    },
}

/// The three durations of a Lease holder (client-go `LeaderElectionConfig`'s
/// `LeaseDuration`, `RenewDeadline`, `RetryPeriod`). Defaults are client-go's usual 15 s /
/// 10 s / 2 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionTiming {
    /// How long others wait, from when they last saw the Lease change, before they take it
    /// (written to the Lease as `leaseDurationSeconds`, whole seconds).
    pub lease_duration: Duration,
    /// How long the holder keeps acting without a successful renewal: it stops acting at the
    /// start of its last successful renewal plus this.
    pub renew_deadline: Duration,
    /// How often the holder renews and a candidate retries.
    pub retry_period: Duration,
}

impl Default for ElectionTiming {
    fn default() -> Self {
        ElectionTiming {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionTiming {
    /// Checks client-go's rules: each duration positive and at most [`MAX_DURATION`], the
    /// lease at least 1 s (whole seconds) and longer than the renew deadline, the renew deadline longer than 1.2 × the retry period.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::TooShort("lease_duration"));
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::TooShort("retry_period"));
        }
        for (name, d) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if d > MAX_DURATION {
                return Err(ConfigError::TooLong(name));
            }
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(ConfigError::NotWholeSeconds(self.lease_duration));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenew {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(ConfigError::RenewNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// One leader election: which Lease, who this candidate is, its timing, and whether it gives
/// the Lease up when stopped.
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// The Lease's name (in the namespace of the `Api<Lease>` given to the elector).
    pub lease_name: String,
    /// This candidate's identity (`holderIdentity`). Two live candidates must never share one:
    /// each would take the other's renewals for its own.
    pub identity: String,
    /// Lease duration, renew deadline, retry period.
    pub timing: ElectionTiming,
    /// On a clean stop, write the Lease as released (no holder, a 1 s duration) so another
    /// candidate takes over at once instead of after the lease duration (client-go
    /// `ReleaseOnCancel`; on by default here, off in client-go).
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// An election on `lease_name` for `identity` with the default timing, releasing on stop.
    pub fn new(lease_name: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaderElectionConfig {
            lease_name: lease_name.into(),
            identity: identity.into(),
            timing: ElectionTiming::default(),
            release_on_cancel: true,
        }
    }

    /// Sets the timing.
    #[must_use]
    pub fn timing(mut self, timing: ElectionTiming) -> Self {
        self.timing = timing;
        self
    }

    /// Checks the identity, the name and the timing ([`ElectionTiming::validate`]).
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        if self.lease_name.is_empty() {
            return Err(ConfigError::EmptyName);
        }
        check_lease_name(&self.lease_name)?;
        self.timing.validate()
    }
}

/// Refuses a Lease name the API server would refuse (a DNS subdomain).
pub(crate) fn check_lease_name(name: &str) -> Result<(), ConfigError> {
    if crate::object::is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(ConfigError::InvalidName {
            what: "lease name",
            value: name.to_owned(),
            rule: "a DNS subdomain: lower case letters, digits, '-' and '.', at most 253 characters",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_rules_are_client_gos() {
        let s = Duration::from_secs;
        assert_eq!(ElectionTiming::default().validate(), Ok(()));
        let t = |l, r, p| ElectionTiming {
            lease_duration: s(l),
            renew_deadline: s(r),
            retry_period: s(p),
        };
        assert!(matches!(
            t(10, 10, 2).validate(),
            Err(ConfigError::LeaseNotLongerThanRenew { .. })
        ));
        assert!(matches!(
            t(15, 2, 2).validate(),
            Err(ConfigError::RenewNotLongerThanRetry { .. })
        ));
        assert_eq!(
            t(0, 0, 1).validate(),
            Err(ConfigError::TooShort("lease_duration"))
        );
        assert_eq!(
            ElectionTiming {
                lease_duration: Duration::from_millis(10_900),
                renew_deadline: Duration::from_millis(10_500),
                retry_period: s(2),
            }
            .validate(),
            Err(ConfigError::NotWholeSeconds(Duration::from_millis(10_900)))
        );
        assert_eq!(
            LeaderElectionConfig::new("l", "").validate(),
            Err(ConfigError::EmptyIdentity)
        );
    }
}
