//! [`LeaderElector`]: one candidate in a leader election over a Lease (client-go
//! `tools/leaderelection/leaderelection.go`, `LeaderElector.Run`: acquire, renew, release).

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::{ConfigError, JITTER_FACTOR, LeaderElectionConfig};
use super::leases::{LeaseError, Leases};
use super::lock::LeaseLock;

/// Where a candidate stands, as [`LeaderElector::watch`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// Not leading. `leader` is the holder last seen (`None` before the Lease was read, or
    /// while nobody holds it).
    Following {
        /// The current leader's identity, as last read.
        leader: Option<String>,
    },
    /// This candidate leads (client-go `OnStartedLeading`). It stays leader while
    /// [`LeaderElector::is_leader`] says so.
    Leading,
    /// It led, and could not renew within the renew deadline, or found someone else holding
    /// the Lease (client-go `OnStoppedLeading`). [`LeaderElector::run`] has returned.
    Lost,
    /// [`LeaderElector::run`] ended on its shutdown signal (after releasing the Lease, if it
    /// led and `release_on_cancel` is set).
    Stopped,
}

/// One candidate in a leader election over a `coordination.k8s.io/v1` Lease, with client-go's
/// semantics: a candidate takes a Lease that is free, released, or unchanged for its
/// `leaseDurationSeconds` (timed on this machine's monotonic clock from when the candidate saw
/// it change); the leader renews every `retry_period`, stops leading once `renew_deadline`
/// has passed since the start of its last successful renewal, and writes the Lease released
/// when stopped. Every write carries the resourceVersion read, so two candidates racing for
/// one Lease cannot both win.
///
/// Why two leaders never act at once: the leader acts until its last successful renewal
/// started plus `renew_deadline`; any other candidate waits `lease_duration` from when it saw
/// that renewal, which came later. `lease_duration − renew_deadline` (5 s by default) covers
/// request latency and clocks running at different rates; clocks that disagree on the time of
/// day do no harm, since the Lease's timestamps are never compared with a local clock.
///
/// Edits by hand: a candidate that saw the Lease held waits that holder out if the Lease is
/// deleted, for a whole lease duration from the read that found it gone; a record naming a
/// candidate that it did not write itself (a hand edit, or an earlier process with the same
/// identity) is waited out like anyone else's. Not covered, as in client-go: clearing
/// `holderIdentity` by hand (it reads as a release), or a candidate that never saw the Lease
/// starting after it was deleted; the old leader then acts until its next renewal finds the
/// new holder (at most a retry period and a request).
///
/// # Examples
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use informer::election::{LeaderElectionConfig, LeaderElector, Leadership};
/// use k8s_openapi::api::coordination::v1::Lease;
///
/// let client = informer::ClientOptions::default().client().await?;
/// let leases = kube::Api::<Lease>::namespaced(client, "kube-system");
/// let elector = LeaderElector::new(leases, LeaderElectionConfig::new("my-controller", "pod-a"))?;
/// let mut status = elector.watch();
/// let run = elector.run(async { tokio::signal::ctrl_c().await.ok(); });
/// let work = async {
///     while status.changed().await.is_ok() {
///         match *status.borrow() {
///             Leadership::Leading => {
///                 // start the workers; check `elector.is_leader()` before each write
///             }
///             // stop the workers; after `Lost`, call `run` again to stand again, or exit
///             Leadership::Lost | Leadership::Stopped => break,
///             Leadership::Following { .. } => {}
///         }
///     }
/// };
/// let (end, ()) = tokio::join!(run, work);
/// println!("election ended: {end:?}");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderElector<C = kube::Api<Lease>> {
    config: LeaderElectionConfig,
    lock: tokio::sync::Mutex<LeaseLock<C>>,
    state: watch::Sender<Leadership>,
    /// While leading: when this candidate must stop acting unless it renews first.
    leading_until: Mutex<Option<Instant>>,
}

impl LeaderElector<kube::Api<Lease>> {
    /// A candidate for the Lease `config.lease_name` in `leases`' namespace.
    ///
    /// # Errors
    /// [`ConfigError`] for an empty identity or name, or timing that breaks client-go's rules.
    pub fn new(
        leases: kube::Api<Lease>,
        config: LeaderElectionConfig,
    ) -> Result<Self, ConfigError> {
        Self::with_leases(leases, config)
    }
}

impl<C: Leases> LeaderElector<C> {
    /// A candidate over any [`Leases`] implementation.
    ///
    /// # Errors
    /// As [`LeaderElector::new`].
    pub fn with_leases(leases: C, config: LeaderElectionConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let lock = LeaseLock::new(
            leases,
            &config.lease_name,
            &config.identity,
            config.timing.lease_duration,
        );
        Ok(Self::with_lock(lock, config))
    }

    pub(crate) fn with_lock(lock: LeaseLock<C>, config: LeaderElectionConfig) -> Self {
        LeaderElector {
            config,
            lock: tokio::sync::Mutex::new(lock),
            state: watch::Sender::new(Leadership::Following { leader: None }),
            leading_until: Mutex::new(None),
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Whether this candidate leads now: it holds the Lease and its last successful renewal
    /// started less than `renew_deadline` ago. Turns false by the clock alone, even if the
    /// task running [`run`](Self::run) is stalled.
    pub fn is_leader(&self) -> bool {
        self.leading_until().is_some()
    }

    /// While leading, the instant until which this candidate may act as leader without
    /// another renewal (monotonic clock); `None` when not leading.
    pub fn leading_until(&self) -> Option<Instant> {
        let until = *self
            .leading_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        until.filter(|u| Instant::now() < *u)
    }

    /// Where the candidate stands, as a `tokio::sync::watch` (the latest state; a receiver
    /// that looks late may miss a short-lived one).
    pub fn watch(&self) -> watch::Receiver<Leadership> {
        self.state.subscribe()
    }

    fn set_until(&self, until: Option<Instant>) {
        *self
            .leading_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = until;
    }

    fn report(&self, state: Leadership) {
        self.state.send_if_modified(|s| {
            let changed = *s != state;
            *s = state;
            changed
        });
    }

    /// The wait between two tries to acquire: the retry period plus up to 1.2 of it, so that
    /// candidates started together do not keep colliding (client-go `JitterUntil`).
    fn acquire_wait(&self) -> Duration {
        self.config
            .timing
            .retry_period
            .mul_f64(1.0 + fastrand::f64() * JITTER_FACTOR)
    }

    /// Campaigns until this candidate leads, then renews until it loses the Lease or
    /// `shutdown` completes; returns [`Leadership::Lost`] or [`Leadership::Stopped`]. Call it
    /// again to stand again after a loss. Only one `run` proceeds at a time (a second call
    /// waits for the first).
    ///
    /// Failed requests are logged (`tracing`) and retried every `retry_period`; a request that
    /// takes longer than `renew_deadline` counts as failed.
    ///
    /// Stop it through `shutdown`, not by dropping it: a `run` dropped while leading neither
    /// releases the Lease nor reports `Stopped` on [`watch`](Self::watch) (which then says
    /// `Leading` until the next `run`), though [`is_leader`](Self::is_leader) still turns
    /// false at the renew deadline.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Leadership {
        let mut lock = self.lock.lock().await;
        tokio::pin!(shutdown);
        let timing = self.config.timing;
        // Campaign.
        let mut until = loop {
            let start = Instant::now();
            match tokio::time::timeout(timing.renew_deadline, lock.try_acquire_or_renew()).await {
                Ok(Ok(true)) => break start + timing.renew_deadline,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => log_failure(&lock, &e),
                Err(_) => log_failure(&lock, &LeaseError::Timeout),
            }
            let holder = &lock.observed().holder_identity;
            self.report(Leadership::Following {
                leader: (!holder.is_empty()).then(|| holder.clone()),
            });
            tokio::select! {
                () = tokio::time::sleep(self.acquire_wait()) => {}
                () = &mut shutdown => {
                    self.report(Leadership::Stopped);
                    return Leadership::Stopped;
                }
            }
        };
        self.set_until(Some(until));
        self.report(Leadership::Leading);
        // Lead: renew every retry period until the deadline of the last success.
        loop {
            // Wake at the deadline at the latest, so that a lapse is reported when it happens
            // (client-go's renew poll ends at the renew deadline), not a retry period later.
            let wake = (Instant::now() + timing.retry_period).min(until);
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                () = &mut shutdown => {
                    // Stop acting first, then give the Lease up.
                    self.set_until(None);
                    if self.config.release_on_cancel
                        && let Err(e) = tokio::time::timeout(timing.renew_deadline, lock.release())
                            .await
                            .unwrap_or(Err(LeaseError::Timeout))
                    {
                        tracing::warn!(lease = %lock.name(), error = %e, "releasing the lease failed; it expires after its duration");
                    }
                    self.report(Leadership::Stopped);
                    return Leadership::Stopped;
                }
            }
            let start = Instant::now();
            if start >= until {
                break;
            }
            match tokio::time::timeout_at(until, lock.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    until = start + timing.renew_deadline;
                    self.set_until(Some(until));
                }
                // Someone else holds it now.
                Ok(Ok(false)) => break,
                Ok(Err(e)) => log_failure(&lock, &e),
                Err(_) => log_failure(&lock, &LeaseError::Timeout),
            }
        }
        self.set_until(None);
        tracing::warn!(lease = %lock.name(), identity = %lock.identity(), "leader election lost");
        self.report(Leadership::Lost);
        Leadership::Lost
    }
}

fn log_failure<C: Leases>(lock: &LeaseLock<C>, e: &LeaseError) {
    match e {
        LeaseError::Conflict(_) => {
            tracing::debug!(lease = %lock.name(), error = %e, "lease write lost a race")
        }
        _ => tracing::warn!(lease = %lock.name(), error = %e, "lease request failed"),
    }
}
