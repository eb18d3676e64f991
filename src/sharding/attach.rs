//! [`attach`]: an informer that keeps only its member's keys, and follows the group.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::shard::Shard;
use crate::informer::{AlreadyStarted, Informer};
use crate::reflector::ListerWatcher;

/// Filters `informer` to the keys assigned to `shard`'s member (before the DeltaFIFO, so its
/// memory scales as 1/N of the group) and, on `handle`, re-applies the filter each time the
/// group's members change ([`Informer::refilter`]): handlers see keys that moved away as
/// deletes at once, and keys that moved in as adds once the relist that follows brings them.
/// Call it before [`Informer::start`]. The task ends when the member stops or the informer is
/// dropped.
///
/// # Errors
/// [`AlreadyStarted`] when the informer has started (its cache holds unfiltered objects).
pub fn attach<L: ListerWatcher + 'static>(
    shard: &Shard,
    informer: &Arc<Informer<L>>,
    handle: &tokio::runtime::Handle,
) -> Result<JoinHandle<()>, AlreadyStarted> {
    informer.set_filter(shard.filter())?;
    let weak = Arc::downgrade(informer);
    let mut changes = shard.ring_changes();
    Ok(handle.spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(informer) = weak.upgrade() else {
                return;
            };
            if informer.is_stopped() {
                return;
            }
            informer.refilter();
        }
    }))
}
