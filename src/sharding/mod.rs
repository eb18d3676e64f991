//! Sharded controllers over `coordination.k8s.io/v1` Leases: each replica holds a membership
//! Lease ([`ShardMember`]), keys go to live members by rendezvous hashing ([`ShardRing`]),
//! an informer keeps only its member's keys ([`Shard::filter`], [`attach`]), and workers act
//! on a key only under a [`Claim`], by the handover rule described on [`Shard`].

mod attach;
mod config;
mod member;
mod ring;
mod shard;
#[cfg(test)]
mod tests;

pub use attach::attach;
pub use config::{GROUP_LABEL, ShardConfig};
pub use member::ShardMember;
pub use ring::{ShardRing, shard_hash};
pub use shard::{Claim, Shard};
