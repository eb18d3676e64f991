//! [`ShardMember`]: the membership loop of one member of a shard group: it holds its own
//! Lease, lists the group's Leases, and publishes the live members and how long it may act
//! to its [`Shard`].

use std::collections::HashMap;
use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

use super::config::ShardConfig;
use super::ring::ShardRing;
use super::shard::{Shard, View};
use crate::election::{ConfigError, LeaderElectionRecord, LeaseError, LeaseLock, Leases};

/// One member of a shard group over `coordination.k8s.io/v1` Leases (one Lease per member,
/// `<group>-<identity>`, labelled [`GROUP_LABEL`](super::GROUP_LABEL)`=<group>`).
///
/// Every `retry_period` it renews its Lease (client-go leader election's acquire-or-renew, on
/// a Lease nobody else competes for) and lists the group's Leases. A Lease counts as a live
/// member (the identity in its name) while its holder is set and it changed less than its
/// `leaseDurationSeconds` ago, as this member's monotonic clock measured from when it saw the
/// change; a Lease unchanged for twice that is deleted (with a resourceVersion precondition)
/// so dead members do not pile up.
/// What it may act on follows the handover rule described on [`Shard`].
///
/// # Examples
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use informer::sharding::{ShardConfig, ShardMember};
/// use k8s_openapi::api::coordination::v1::Lease;
///
/// let client = informer::ClientOptions::default().client().await?;
/// let leases = kube::Api::<Lease>::namespaced(client, "my-controller");
/// let member = Arc::new(ShardMember::new(leases, ShardConfig::new("my-controller", "pod-a"))?);
/// let shard = member.shard();
/// let m = member.clone();
/// tokio::spawn(async move { m.run(async { tokio::signal::ctrl_c().await.ok(); }).await });
/// // ... an informer with `shard.filter()`; workers take `shard.claim(key)` before acting.
/// # drop(shard);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ShardMember<C = kube::Api<Lease>> {
    config: ShardConfig,
    leases: C,
    shard: Shard,
    running: tokio::sync::Mutex<()>,
}

impl ShardMember<kube::Api<Lease>> {
    /// A member of `config.group` whose Leases live in `leases`' namespace.
    ///
    /// # Errors
    /// [`ConfigError`] for an empty identity or group, or timing that breaks client-go's rules.
    pub fn new(leases: kube::Api<Lease>, config: ShardConfig) -> Result<Self, ConfigError> {
        Self::with_leases(leases, config)
    }
}

/// What the loop knows between two rounds.
#[derive(Debug, Default)]
struct Round {
    /// Since when this member holds its Lease (reset when a renewal deadline passes).
    joined_at: Option<Instant>,
    /// When it may start acting (decided at the first list after joining).
    may_act_from: Option<Instant>,
    /// Start of the last successful renewal and of the last successful list.
    renewed_at: Option<Instant>,
    listed_at: Option<Instant>,
    ring: ShardRing,
    /// Other members' Leases by name.
    seen: HashMap<String, Seen>,
}

/// Another member's Lease as this member last listed it.
#[derive(Debug)]
struct Seen {
    record: LeaderElectionRecord,
    /// When the record was first seen as it is (or, while live, found missing).
    since: Instant,
    /// Missing from the last list.
    missing: bool,
}

impl<C: Leases> ShardMember<C> {
    /// A member over any [`Leases`] implementation.
    ///
    /// # Errors
    /// As [`ShardMember::new`].
    pub fn with_leases(leases: C, config: ShardConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let shard = Shard::new(&config.identity);
        Ok(ShardMember {
            config,
            leases,
            shard,
            running: tokio::sync::Mutex::new(()),
        })
    }

    /// The member's view: what it may cache and act on.
    pub fn shard(&self) -> Shard {
        self.shard.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &ShardConfig {
        &self.config
    }

    /// Joins the group and keeps the membership until `shutdown` completes; then stops
    /// granting claims, waits for the claims held to end (at most until their deadline),
    /// deletes its Lease and publishes an empty group (a filtered informer then drops its
    /// objects). Failed requests are logged and retried every `retry_period`. Only one `run`
    /// proceeds at a time.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let _running = self.running.lock().await;
        tokio::pin!(shutdown);
        let timing = self.config.timing;
        let mut lock = LeaseLock::new(
            self.leases.clone(),
            &self.config.lease_name(),
            &self.config.identity,
            timing.lease_duration,
        )
        .with_labels(self.config.labels());
        let mut r = Round::default();
        loop {
            self.round(&mut lock, &mut r).await;
            tokio::select! {
                () = tokio::time::sleep(timing.retry_period) => {}
                () = &mut shutdown => break,
            }
        }
        // Leave: stop acting, let the claims end, then give the Lease up.
        let last_deadline = self.shard.view().acting_until.unwrap_or_else(Instant::now);
        self.shard.publish(View {
            ring: r.ring.clone(),
            acting_until: None,
        });
        self.shard.claims_ended(last_deadline).await;
        // Release first and leave the released Lease up for one retry period, so that every
        // member lists it released and takes the keys over at once; a Lease that vanishes
        // while held is waited out for its whole duration.
        match tokio::time::timeout(timing.renew_deadline, lock.release()).await {
            Ok(Ok(())) => tokio::time::sleep(timing.retry_period).await,
            Ok(Err(e)) => {
                tracing::warn!(lease = %lock.name(), error = %e, "releasing the membership lease failed; it expires")
            }
            Err(_) => {
                tracing::warn!(lease = %lock.name(), "releasing the membership lease timed out; it expires")
            }
        }
        match tokio::time::timeout(timing.renew_deadline, lock.delete()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(lease = %lock.name(), error = %e, "deleting the membership lease failed; it expires")
            }
            Err(_) => {
                tracing::warn!(lease = %lock.name(), "deleting the membership lease timed out; it expires")
            }
        }
        self.shard.publish(View::default());
    }

    /// One renewal and one list, then the published view.
    async fn round(&self, lock: &mut LeaseLock<C>, r: &mut Round) {
        let timing = self.config.timing;
        let start = Instant::now();
        match tokio::time::timeout(timing.renew_deadline, lock.try_acquire_or_renew()).await {
            Ok(Ok(true)) => {
                // A renewal after the deadline of the previous one (a stalled process, a slow
                // round) comes back as a newcomer: others may have taken its keys meanwhile.
                if r.renewed_at
                    .is_some_and(|at| Instant::now() >= at + timing.renew_deadline)
                {
                    r.joined_at = None;
                }
                // Its Lease had vanished or been rewritten by someone else (a hand edit that
                // cleared its holder reads as a clean leave to the others): they may be acting
                // on its keys.
                if lock.overwritten() {
                    r.joined_at = None;
                }
                r.renewed_at = Some(start);
                if r.joined_at.is_none() {
                    r.joined_at = Some(Instant::now());
                    r.may_act_from = None;
                }
            }
            Ok(Ok(false)) => {
                tracing::warn!(lease = %lock.name(), holder = %lock.observed().holder_identity,
                    "the membership lease is held by another identity; not a member");
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = %lock.name(), error = %e, "renewing the membership lease failed")
            }
            Err(_) => {
                tracing::warn!(lease = %lock.name(), "renewing the membership lease timed out")
            }
        }
        if r.renewed_at
            .is_none_or(|at| Instant::now() >= at + timing.renew_deadline)
        {
            // Not renewed in time: out of the group until the Lease is held again, and then
            // a newcomer again.
            r.joined_at = None;
            r.may_act_from = None;
            r.renewed_at = None;
        }
        let list_start = Instant::now();
        match tokio::time::timeout(
            timing.renew_deadline,
            self.leases.list(&self.config.selector()),
        )
        .await
        {
            Ok(Ok(leases)) => {
                r.listed_at = Some(list_start);
                self.read_members(lock.name(), leases, r).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(group = %self.config.group, error = %e, "listing the group's leases failed")
            }
            Err(_) => {
                tracing::warn!(group = %self.config.group, "listing the group's leases timed out")
            }
        }
        let now = Instant::now();
        let acting_until = match (r.may_act_from, r.renewed_at, r.listed_at) {
            (Some(from), Some(renewed), Some(listed)) if from <= now => {
                Some(renewed.min(listed) + timing.renew_deadline).filter(|u| now < *u)
            }
            _ => None,
        };
        self.shard.publish(View {
            ring: r.ring.clone(),
            acting_until,
        });
    }

    /// The live members from a list of the group's Leases; deletes Leases long expired.
    async fn read_members(&self, own: &str, leases: Vec<Lease>, r: &mut Round) {
        let now = Instant::now();
        let mut live = Vec::new();
        let mut others = false;
        let mut longest = std::time::Duration::ZERO;
        let mut expired = Vec::new();
        let mut names = Vec::with_capacity(leases.len());
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            if name == own {
                continue;
            }
            // Not named as members name their Leases (made by hand): not a member.
            let Some(member) = self.config.member_of(&name).map(str::to_owned) else {
                continue;
            };
            names.push(name.clone());
            let record = LeaderElectionRecord::from_spec(&lease.spec.clone().unwrap_or_default());
            let entry = r.seen.entry(name.clone()).or_insert_with(|| Seen {
                record: record.clone(),
                since: now,
                missing: false,
            });
            if entry.record != record {
                entry.record = record.clone();
                entry.since = now;
            }
            entry.missing = false;
            if record.holder_identity.is_empty() {
                // Released by a member that left; deleted here if its own delete failed.
                if entry.since + 2 * self.config.timing.lease_duration <= now
                    && let Some(rv) = lease.metadata.resource_version
                {
                    expired.push((name, rv));
                }
                continue;
            }
            others = true;
            longest = longest.max(record.lease_duration);
            let since = entry.since;
            if since + record.lease_duration > now {
                live.push(member);
            } else if since + 2 * record.lease_duration <= now
                && let Some(rv) = lease.metadata.resource_version
            {
                expired.push((name, rv));
            }
        }
        // A Lease gone from the list while last seen held (deleted by hand, or its member's
        // release was missed between two lists) counts as live for its duration from the
        // first list that missed it: its member may still be acting, may have renewed after
        // the list before (the delete hid that renewal), and a clean leave releases before it
        // deletes.
        r.seen.retain(|n, seen| {
            if names.contains(n) {
                return true;
            }
            // Restarted only for a Lease still live: one that had expired (a dead member's,
            // deleted by the expiry rule below) stays expired.
            let Seen {
                record,
                since,
                missing,
            } = seen;
            if !*missing {
                *missing = true;
                if *since + record.lease_duration > now {
                    *since = now;
                }
            }
            let held = !record.holder_identity.is_empty() && *since + record.lease_duration > now;
            if held {
                others = true;
                longest = longest.max(record.lease_duration);
                live.extend(self.config.member_of(n).map(str::to_owned));
            }
            held
        });
        if let Some(joined) = r.joined_at {
            live.push(self.config.identity.clone());
            if r.may_act_from.is_none() {
                // A newcomer waits a lease duration before it acts, unless it found no other
                // holder in the group: then nobody else can be acting on any key.
                // The longest duration in the group: members with a longer one act for longer
                // on a list that predates this member.
                r.may_act_from = Some(if others {
                    joined + self.config.timing.lease_duration.max(longest)
                } else {
                    joined
                });
            }
        }
        r.ring = ShardRing::new(live);
        for (name, rv) in expired {
            match self.leases.delete(&name, &rv).await {
                Ok(()) | Err(LeaseError::NotFound(_) | LeaseError::Conflict(_)) => {}
                Err(e) => {
                    tracing::debug!(lease = %name, error = %e, "deleting an expired member lease failed")
                }
            }
        }
    }
}
