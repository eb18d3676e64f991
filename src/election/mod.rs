//! Leader election over `coordination.k8s.io/v1` Leases, with client-go's
//! `tools/leaderelection` semantics: [`LeaderElector`] for one candidate, [`LeaseLock`] for
//! one identity's hold on one Lease (shard membership builds on it), [`Leases`] for the
//! requests (implemented for `kube::Api<Lease>`).

mod config;
mod elector;
mod identity;
mod leases;
mod lock;
#[cfg(test)]
pub(crate) mod memory;
mod record;
#[cfg(test)]
mod tests;

pub(crate) use config::check_lease_name;
pub use config::{ConfigError, ElectionTiming, JITTER_FACTOR, LeaderElectionConfig, MAX_DURATION};
pub use elector::{LeaderElector, Leadership};
pub use identity::default_identity;
pub use leases::{LeaseError, Leases};
pub use lock::LeaseLock;
pub use record::LeaderElectionRecord;
