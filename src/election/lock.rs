//! [`LeaseLock`]: one identity's hold on one Lease: acquire, renew, release, with the observed
//! record and the local time it was observed (client-go `tryAcquireOrRenew` and `release`,
//! `tools/leaderelection/leaderelection.go`, over `resourcelock/leaselock.go`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::ObjectMeta;
use tokio::time::Instant;

use super::leases::{LeaseError, Leases};
use super::record::LeaderElectionRecord;

/// One identity's hold on one Lease.
///
/// It keeps the Lease as last read or written (the next write sends its resourceVersion, so a
/// lost race is a conflict, never an overwrite), the record seen in it, and when that record
/// was first seen on this machine's monotonic clock: a Lease held by someone else counts as
/// expired only once it has stayed unchanged for its `leaseDurationSeconds` from then.
#[derive(Debug)]
pub struct LeaseLock<C> {
    leases: C,
    name: String,
    identity: String,
    lease_duration: Duration,
    labels: BTreeMap<String, String>,
    /// Whether the last successful acquire or renew found the Lease this lock held deleted or
    /// rewritten by someone else since its own last write.
    overwritten: bool,
    cached: Option<Lease>,
    observed: LeaderElectionRecord,
    observed_at: Option<Instant>,
    /// Whether `observed` is a record this lock wrote (its answer received, or read back).
    ours: bool,
    /// The records of the writes sent since the last answered one (the last few): read back,
    /// such a record is this lock's own (a write that took effect but whose answer was lost,
    /// e.g. timed out), not someone else's.
    attempted: VecDeque<LeaderElectionRecord>,
    /// The Lease was found missing while `observed` (another's) was held; the wait for it to
    /// expire was restarted then.
    vanished: bool,
    wall: fn() -> Timestamp,
}

impl<C: Leases> LeaseLock<C> {
    /// A lock on the Lease `name` for `identity`, which writes `lease_duration` into it.
    pub fn new(leases: C, name: &str, identity: &str, lease_duration: Duration) -> Self {
        LeaseLock {
            leases,
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration,
            labels: BTreeMap::new(),
            overwritten: false,
            cached: None,
            observed: LeaderElectionRecord::default(),
            observed_at: None,
            ours: false,
            attempted: VecDeque::new(),
            vanished: false,
            wall: Timestamp::now,
        }
    }

    /// Labels set on the Lease when this lock creates it (shard membership finds its group's
    /// Leases by label).
    #[must_use]
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// Replaces the wall clock the Lease's times are written from (tests: a skewed clock).
    #[cfg(test)]
    pub(crate) fn with_wall_clock(mut self, wall: fn() -> Timestamp) -> Self {
        self.wall = wall;
        self
    }

    /// The Lease client (tests: write around the lock).
    #[cfg(test)]
    pub(crate) fn leases_for_test(&self) -> &C {
        &self.leases
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This lock's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The record last seen (read or written).
    pub fn observed(&self) -> &LeaderElectionRecord {
        &self.observed
    }

    /// The Lease as last read or written.
    pub fn lease(&self) -> Option<&Lease> {
        self.cached.as_ref()
    }

    /// Whether this lock holds the Lease: the record last seen is one it wrote, naming this
    /// identity (client-go `IsLeader`). A record naming this identity that this lock did not
    /// write (a hand edit, or an earlier process with the same identity) does not count: it
    /// is waited out like any other holder's, since whoever wrote it may be acting on it.
    pub fn holds(&self) -> bool {
        self.ours && !self.identity.is_empty() && self.observed.holder_identity == self.identity
    }

    /// Whether the record last seen has not expired at `now`: it was first seen less than its
    /// own lease duration ago (client-go `isLeaseValid`).
    pub fn observed_valid(&self, now: Instant) -> bool {
        self.observed_at
            .is_some_and(|at| at + self.observed.lease_duration > now)
    }

    /// Notes a Lease read from the server: the observed time moves only when the record
    /// changed.
    fn observe(&mut self, lease: Lease) {
        let record = LeaderElectionRecord::from_spec(&lease.spec.clone().unwrap_or_default());
        if self.observed_at.is_none() || record != self.observed {
            self.ours = self.attempted.contains(&record);
            self.observed = record;
            self.observed_at = Some(Instant::now());
        }
        self.vanished = false;
        self.cached = Some(lease);
    }

    /// Notes a write about to be sent.
    fn attempt(&mut self, record: &LeaderElectionRecord) {
        const KEPT: usize = 4;
        if self.attempted.len() == KEPT {
            self.attempted.pop_front();
        }
        self.attempted.push_back(record.clone());
    }

    /// Notes a Lease this lock wrote.
    fn written(&mut self, lease: Lease) {
        self.observed = LeaderElectionRecord::from_spec(&lease.spec.clone().unwrap_or_default());
        self.observed_at = Some(Instant::now());
        self.ours = true;
        self.attempted.clear();
        self.vanished = false;
        self.cached = Some(lease);
    }

    /// Whether the last successful [`try_acquire_or_renew`](Self::try_acquire_or_renew)
    /// found that the Lease this lock held had been deleted, or its record rewritten (holder,
    /// times, duration), by someone else since this lock last wrote it: a hand edit, or a
    /// release and re-take it never saw. Others may have acted on the strength of that change,
    /// so a shard member that sees it comes back as a newcomer.
    pub fn overwritten(&self) -> bool {
        self.overwritten
    }

    /// The record this identity writes when it holds the Lease now.
    fn own_record(&self) -> LeaderElectionRecord {
        // Whole microseconds, as a Lease's MicroTime keeps them: read back, the record is
        // equal to the one written.
        let now = (self.wall)();
        let now = Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now);
        LeaderElectionRecord {
            holder_identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: 0,
        }
    }

    /// Takes the Lease if it is free, expired or already ours, or renews it; `Ok(false)` when
    /// someone else holds it and it has not expired (client-go `tryAcquireOrRenew`):
    /// 1. holding a Lease that has not expired: update it from the cached copy (one request);
    ///    on any failure fall through;
    /// 2. read it; absent: create it, unless it was last seen held by another identity (then
    ///    wait a lease duration from the first read that found it gone: its holder may still
    ///    act);
    /// 3. held by another and not expired: `Ok(false)` (a record naming this identity that
    ///    this lock did not write counts as another's);
    /// 4. write ourselves as holder (keeping `acquireTime` and `leaseTransitions` when it was
    ///    ours, else counting one more transition).
    ///
    /// # Errors
    /// A failed read or write, a conflict included: the caller retries after its period.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let mut record = self.own_record();
        if self.holds()
            && self.observed_valid(Instant::now())
            && let Some(mut lease) = self.cached.clone()
        {
            record.acquire_time = self.observed.acquire_time;
            record.lease_transitions = self.observed.lease_transitions;
            record.write_to(lease.spec.get_or_insert_with(LeaseSpec::default));
            self.attempt(&record);
            match self.leases.replace(&lease).await {
                Ok(l) => {
                    self.written(l);
                    self.overwritten = false;
                    return Ok(true);
                }
                Err(e) => {
                    tracing::debug!(lease = %self.name, error = %e, "optimistic renew failed; reading the lease");
                }
            }
        }
        // What this lock last wrote, if it held the Lease: anything else read now was written
        // by someone else.
        let held = self.holds().then(|| self.observed.clone());
        let Some(lease) = self.leases.get(&self.name).await? else {
            if held.is_none() && !self.observed.holder_identity.is_empty() {
                // Its holder may have renewed after this lock's last read, and the delete hid
                // that renewal: a record still live is timed again from the first read that
                // finds it gone, which comes after any renewal (an expired one stays expired).
                if !self.vanished {
                    self.vanished = true;
                    if self.observed_valid(Instant::now()) {
                        self.observed_at = Some(Instant::now());
                    }
                }
                if self.observed_valid(Instant::now()) {
                    return Ok(false);
                }
            }
            let mut spec = LeaseSpec::default();
            record.write_to(&mut spec);
            let new = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                    ..Default::default()
                },
                spec: Some(spec),
            };
            self.attempt(&record);
            let created = self.leases.create(&new).await?;
            self.written(created);
            self.overwritten = held.is_some();
            return Ok(true);
        };
        self.observe(lease.clone());
        // Changed since this lock's last write, and not by a write of its own.
        let overwritten = held.is_some() && !self.ours;
        if !self.observed.holder_identity.is_empty()
            && self.observed_valid(Instant::now())
            && !self.holds()
        {
            return Ok(false);
        }
        if self.holds() {
            record.acquire_time = self.observed.acquire_time;
            record.lease_transitions = self.observed.lease_transitions;
        } else {
            record.lease_transitions = self.observed.lease_transitions.saturating_add(1);
        }
        let mut lease = lease;
        record.write_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        self.attempt(&record);
        // Labels removed by hand would hide a shard member from its group: put them back.
        if !self.labels.is_empty() {
            lease
                .metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(self.labels.clone());
        }
        let updated = self.leases.replace(&lease).await?;
        self.written(updated);
        self.overwritten = overwritten;
        Ok(true)
    }

    /// Gives the Lease up if this identity holds it: no holder, a 1 s duration, the transition
    /// count kept (client-go `release`), so a candidate takes it at its next try.
    ///
    /// # Errors
    /// A failed write (the Lease then expires after its duration as if never released).
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.holds() {
            return Ok(());
        }
        let Some(mut lease) = self.cached.clone() else {
            return Ok(());
        };
        let now = (self.wall)();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration: Duration::from_secs(1),
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: self.observed.lease_transitions,
        };
        record.write_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        let updated = self.leases.replace(&lease).await?;
        self.written(updated);
        Ok(())
    }

    /// Deletes the Lease if this identity holds it, or it was last seen released, and nobody
    /// wrote it since (a shard member leaving its group).
    ///
    /// # Errors
    /// A failed delete; [`LeaseError::Conflict`] when someone wrote it since.
    pub async fn delete(&mut self) -> Result<(), LeaseError> {
        // Held by this identity, or released (by it, before leaving).
        if !self.holds() && !self.observed.holder_identity.is_empty() {
            return Ok(());
        }
        let Some(rv) = self
            .cached
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone())
        else {
            return Ok(());
        };
        match self.leases.delete(&self.name, &rv).await {
            Ok(()) | Err(LeaseError::NotFound(_)) => {
                self.cached = None;
                self.observed = LeaderElectionRecord::default();
                self.observed_at = None;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
