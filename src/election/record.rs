//! [`LeaderElectionRecord`]: what a `coordination.k8s.io/v1` Lease says about its holder
//! (client-go `tools/leaderelection/resourcelock/interface.go`, `LeaderElectionRecord` and
//! its conversions to and from `LeaseSpec`).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The holder fields of a Lease.
///
/// Only `holder_identity` and `lease_duration` decide anything: the times are written for
/// people and tools, and read only to notice that the record changed. Every expiry is timed
/// on the reader's own monotonic clock from the moment it saw the record change, so clocks
/// that disagree across machines do no harm (clocks that run at different *rates* do, by up
/// to `lease_duration − renew_deadline`; client-go documents the same tolerance).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// `holderIdentity`; empty when nobody holds the Lease (released).
    pub holder_identity: String,
    /// `leaseDurationSeconds`: how long others wait, from when they saw the record change,
    /// before they may take the Lease. Whole seconds on the wire.
    pub lease_duration: Duration,
    /// `acquireTime`: when the current holder took the Lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: when the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`: how many times the Lease changed holder.
    pub lease_transitions: i32,
}

impl LeaderElectionRecord {
    /// The record in a Lease's spec (absent fields read as empty or zero; a negative duration
    /// as zero).
    pub fn from_spec(spec: &LeaseSpec) -> Self {
        LeaderElectionRecord {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration: Duration::from_secs(
                spec.lease_duration_seconds.unwrap_or(0).max(0) as u64
            ),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            lease_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes the record into `spec`, leaving the fields it does not know (`strategy`,
    /// `preferredHolder`) as they are. The duration is rounded down to whole seconds (at least
    /// 1) and capped at `i32::MAX` seconds.
    pub fn write_to(&self, spec: &mut LeaseSpec) {
        spec.holder_identity = Some(self.holder_identity.clone());
        spec.lease_duration_seconds =
            Some(self.lease_duration.as_secs().clamp(1, i32::MAX as u64) as i32);
        spec.acquire_time = self.acquire_time.map(MicroTime);
        spec.renew_time = self.renew_time.map(MicroTime);
        spec.lease_transitions = Some(self.lease_transitions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_a_lease_spec() {
        let t: Timestamp = "2026-12-05T10:00:00.123456Z".parse().unwrap();
        let r = LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(t),
            renew_time: Some(t),
            lease_transitions: 3,
        };
        let mut spec = LeaseSpec {
            strategy: Some("OldestEmulationVersion".into()),
            ..LeaseSpec::default()
        };
        r.write_to(&mut spec);
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.strategy.as_deref(), Some("OldestEmulationVersion"));
        assert_eq!(LeaderElectionRecord::from_spec(&spec), r);
        assert_eq!(
            LeaderElectionRecord::from_spec(&LeaseSpec::default()),
            LeaderElectionRecord::default()
        );
    }
}
