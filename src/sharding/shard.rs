//! [`Shard`]: what one member of a shard group may cache and act on, as its membership loop
//! last established it; [`Claim`]: the right to act on one key until a deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::ring::ShardRing;
use crate::object::Object;

/// One state of the membership, published as a whole.
#[derive(Debug, Clone, Default)]
pub(super) struct View {
    /// The live members this one last listed (itself included while it holds its Lease).
    pub(super) ring: ShardRing,
    /// While acting: until when, unless the next renewal and list succeed first.
    pub(super) acting_until: Option<Instant>,
}

#[derive(Debug)]
struct Inner {
    identity: String,
    view: ArcSwap<View>,
    /// Bumped when the ring changes (the keys this member is assigned may have changed).
    ring_changes: watch::Sender<u64>,
    /// Whether the member may act (its claims are granted), as last published.
    acting: watch::Sender<bool>,
    claims: AtomicUsize,
    claims_ended: Notify,
}

/// What one member of a shard group may cache and act on. Cheap to clone; read without locks.
///
/// Two questions, two answers:
/// - **assigned** ([`is_assigned`](Self::is_assigned)): the key hashes to this member among
///   the members it last listed. An informer filtered by [`filter`](Self::filter) caches
///   exactly these keys; it is filled while the member waits to act, so its cache is warm
///   when it starts.
/// - **owned** ([`owns`](Self::owns), [`claim`](Self::claim)): assigned *and* the member may act
///   now. Act on a key only under a [`Claim`], and only until its deadline.
///
/// # The handover rule
/// A member acts on its keys only while its last renewal of its own Lease *and* its last list
/// of the group both started less than `renew_deadline` ago, and a claim never outlives that
/// instant. A new member acts only after the longest `lease_duration` in the group has passed
/// since it joined (at once if it found no other Lease of the group at all); a member whose
/// renewal lands past its renew deadline, or whose Lease had to be created again, joins anew.
/// A member whose Lease stops changing, or vanishes while held, counts as gone only
/// `lease_duration` after the others saw its last change. As
/// `lease_duration > renew_deadline`, any member that could still act on a key when the key
/// moves has either already listed the newcomer (and let the key go) or reached its deadline;
/// and a member that died or was cut off stopped acting before the survivors start. A member
/// that leaves cleanly stops granting claims, waits for its claims to end, releases its Lease
/// (no holder), and deletes it one retry period later, so the others take over at their next
/// list.
///
/// Edits by hand: the ring is keyed by Lease name, so rewriting a Lease's `holderIdentity`
/// moves no keys, and a member that finds its own Lease deleted or rewritten by someone else
/// joins anew. Deleting a member's Lease is safe while other members see it go (they wait it
/// out). Not covered, as with client-go's leader election, where an empty holder means
/// released: clearing a member's `holderIdentity` by hand reads as a clean leave, so the
/// others act on its keys at once while it may act until its next round (at most a retry
/// period and a request); nor the group's only Lease deleted and a newcomer joining before
/// its member's next round, since the newcomer finds no one and acts at once.
#[derive(Debug, Clone)]
pub struct Shard {
    inner: Arc<Inner>,
}

impl Shard {
    pub(super) fn new(identity: &str) -> Self {
        Shard {
            inner: Arc::new(Inner {
                identity: identity.to_owned(),
                view: ArcSwap::from_pointee(View::default()),
                ring_changes: watch::Sender::new(0),
                acting: watch::Sender::new(false),
                claims: AtomicUsize::new(0),
                claims_ended: Notify::new(),
            }),
        }
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The live members as last listed, sorted (this one included while it holds its Lease).
    pub fn members(&self) -> Vec<String> {
        self.inner
            .view
            .load()
            .ring
            .members()
            .map(str::to_owned)
            .collect()
    }

    /// The member `key` (`namespace/name`, or `name` for cluster-scoped objects) is assigned
    /// to, among the members last listed.
    pub fn owner(&self, key: &str) -> Option<String> {
        self.inner.view.load().ring.owner(key).map(str::to_owned)
    }

    /// Whether `key` is assigned to this member (what its filtered informer caches).
    pub fn is_assigned(&self, key: &str) -> bool {
        self.inner.view.load().ring.owner(key) == Some(self.identity())
    }

    /// Until when this member may act on its keys without another successful renewal and list;
    /// `None` while it may not act (joining, cut off, stopping).
    pub fn acting_until(&self) -> Option<Instant> {
        self.inner
            .view
            .load()
            .acting_until
            .filter(|u| Instant::now() < *u)
    }

    /// Whether this member may act on `key` now.
    pub fn owns(&self, key: &str) -> bool {
        let view = self.inner.view.load();
        view.acting_until.is_some_and(|u| Instant::now() < u)
            && view.ring.owner(key) == Some(self.identity())
    }

    /// The right to act on `key` until [`Claim::deadline`], or `None` when this member may not
    /// act on it now. No other member of the group can hold a claim on the key before that
    /// deadline (the handover rule above). A claim does not extend: work that may run past its
    /// deadline checks [`Claim::is_valid`] before each write and takes a new claim.
    pub fn claim(&self, key: &str) -> Option<Claim> {
        let view = self.inner.view.load();
        let deadline = view.acting_until?;
        if Instant::now() >= deadline || view.ring.owner(key) != Some(self.identity()) {
            return None;
        }
        self.inner.claims.fetch_add(1, Ordering::SeqCst);
        // A member leaving publishes "not acting", then waits for the claims counted: a claim
        // counted after that check must see the new view and give up.
        if self.inner.view.load().acting_until.is_none() {
            if self.inner.claims.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.inner.claims_ended.notify_waiters();
            }
            return None;
        }
        Some(Claim {
            shard: self.clone(),
            key: key.to_owned(),
            deadline,
        })
    }

    /// Claims held now.
    pub fn claims(&self) -> usize {
        self.inner.claims.load(Ordering::SeqCst)
    }

    /// A receiver told each time the set of members changes (so the assigned keys may have).
    pub fn ring_changes(&self) -> watch::Receiver<u64> {
        self.inner.ring_changes.subscribe()
    }

    /// A receiver of whether this member may act, told when that changes (e.g. to enqueue
    /// every cached key once a newcomer's wait ends, since events that arrived during the wait
    /// found it not acting). The value is as published by the membership loop; between two
    /// rounds the deadline may pass first, as [`acting_until`](Self::acting_until) shows, and
    /// acting again after such a lapse is told as a change too (the value stays `true`).
    pub fn acting_changes(&self) -> watch::Receiver<bool> {
        self.inner.acting.subscribe()
    }

    /// The predicate for [`Informer::set_filter`](crate::Informer::set_filter): keeps the
    /// objects assigned to this member.
    pub fn filter(&self) -> impl Fn(&Object) -> bool + Send + Sync + 'static {
        let shard = self.clone();
        move |obj: &Object| shard.is_assigned(obj.key().as_str())
    }

    pub(super) fn view(&self) -> Arc<View> {
        self.inner.view.load_full()
    }

    /// Publishes `view`; tells ring watchers when the members changed.
    pub(super) fn publish(&self, view: View) {
        let old = self.inner.view.load_full();
        let ring_changed = old.ring != view.ring;
        let acting = view.acting_until.is_some();
        // A deadline that lapsed between two rounds stopped the claims as surely as a
        // published stop: acting again after it is a change, so watchers re-enqueue the keys
        // refused meanwhile.
        let lapsed = old.acting_until.is_some_and(|u| u <= Instant::now());
        self.inner.view.store(Arc::new(view));
        if ring_changed {
            self.inner.ring_changes.send_modify(|g| *g += 1);
        }
        self.inner.acting.send_if_modified(|a| {
            let was = std::mem::replace(a, acting);
            was != acting || (acting && lapsed)
        });
    }

    /// Waits until no claim is held or `until` passes.
    pub(super) async fn claims_ended(&self, until: Instant) {
        loop {
            let ended = self.inner.claims_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.claims() == 0 {
                return;
            }
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep_until(until) => return,
            }
        }
    }
}

/// The right to act on one key until a deadline ([`Shard::claim`]). Dropping it ends it.
#[derive(Debug)]
pub struct Claim {
    shard: Shard,
    key: String,
    deadline: Instant,
}

impl Claim {
    /// The key claimed.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// When the claim ends (monotonic clock): act on the key only before it.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the claim still holds: before its deadline, and this member has not stopped.
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.deadline && self.shard.inner.view.load().acting_until.is_some()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.shard.inner.claims.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.shard.inner.claims_ended.notify_waiters();
        }
    }
}
