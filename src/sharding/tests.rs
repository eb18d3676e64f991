//! Shard membership on paused time over the in-memory Lease store: the handover rule holds at
//! every instant while members start, die, are cut off, join and leave.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::*;
use crate::election::ElectionTiming;
use crate::election::memory::MemoryLeases;

const MS: Duration = Duration::from_millis(1);

/// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
fn timing() -> ElectionTiming {
    ElectionTiming::default()
}

struct Member {
    shard: Shard,
    leases: MemoryLeases,
    stop: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<()>,
}

/// One member per identity in `ids`, each running.
fn members(store: &MemoryLeases, ids: &[&str]) -> Vec<Member> {
    ids.iter().map(|id| member(store, id)).collect()
}

fn member(store: &MemoryLeases, id: &str) -> Member {
    let leases = store.client();
    let m = Arc::new(
        ShardMember::with_leases(leases.clone(), ShardConfig::new("g", id).timing(timing()))
            .unwrap(),
    );
    let shard = m.shard();
    let (tx, rx) = oneshot::channel();
    let run = tokio::spawn(async move {
        m.run(async {
            let _ = rx.await;
        })
        .await;
    });
    Member {
        shard,
        leases,
        stop: Some(tx),
        run,
    }
}

fn keys() -> Vec<String> {
    (0..600).map(|i| format!("ns-{}/obj-{i}", i % 5)).collect()
}

/// For every key, the members that may act on it now.
fn owners(ms: &[Member], k: &str) -> Vec<usize> {
    (0..ms.len()).filter(|&i| ms[i].shard.owns(k)).collect()
}

/// Steps paused time by 50 ms until `f` holds or `limit` passes; at every step no key has two
/// acting owners.
async fn until(ms: &[Member], limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let ks = keys();
    let start = Instant::now();
    while !f() {
        for k in &ks {
            let o = owners(ms, k);
            assert!(o.len() <= 1, "{k} owned by {o:?} at once");
        }
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(50 * MS).await;
    }
    start.elapsed()
}

/// The `alive` members all act and list exactly each other, and every key has exactly one
/// acting owner among them.
fn covered(ms: &[Member], alive: &[usize]) -> bool {
    let ids: Vec<String> = alive
        .iter()
        .map(|&i| ms[i].shard.identity().to_owned())
        .collect();
    alive
        .iter()
        .all(|&i| ms[i].shard.acting_until().is_some() && ms[i].shard.members() == ids)
        && keys().iter().all(|k| {
            let o = owners(ms, k);
            o.len() == 1 && alive.contains(&o[0])
        })
}

#[tokio::test(start_paused = true)]
async fn a_lone_member_acts_at_once_and_newcomers_wait_a_lease_duration() {
    let store = MemoryLeases::default();
    let mut ms = vec![member(&store, "a")];
    let t = until(&ms, Duration::from_secs(1), || covered(&ms, &[0])).await;
    assert!(t < Duration::from_millis(100), "{t:?}");
    ms.push(member(&store, "b"));
    ms.push(member(&store, "c"));
    let t = until(&ms, Duration::from_secs(30), || covered(&ms, &[0, 1, 2])).await;
    assert!(t >= timing().lease_duration, "{t:?}");
    assert!(
        t <= timing().lease_duration + timing().retry_period + 100 * MS,
        "{t:?}"
    );
    // Each holds about a third; all agree on the members.
    for m in &ms {
        assert_eq!(m.shard.members(), vec!["a", "b", "c"]);
        let mine = keys().iter().filter(|k| m.shard.is_assigned(k)).count();
        assert!(
            (120..=280).contains(&mine),
            "{}: {mine}",
            m.shard.identity()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_member_stops_before_its_keys_move() {
    let store = MemoryLeases::default();
    let ms = members(&store, &["a", "b", "c"]);
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1, 2])).await;
    let claim_key = keys()
        .into_iter()
        .find(|k| ms[1].shard.is_assigned(k))
        .unwrap();
    let claim = ms[1].shard.claim(&claim_key).unwrap();
    ms[1].leases.set_down(true);
    let cut = Instant::now();
    let t = until(&ms, Duration::from_secs(40), || covered(&ms, &[0, 2])).await;
    // Taken over a lease duration after the survivors saw the last renewal (up to a round
    // after it was made), found at a round (up to one more).
    assert!(
        t >= timing().lease_duration - timing().retry_period,
        "{t:?}"
    );
    assert!(
        t <= timing().lease_duration + 2 * timing().retry_period + 100 * MS,
        "{t:?}"
    );
    assert!(!claim.is_valid());
    assert!(claim.deadline() <= cut + timing().renew_deadline);
    assert!(ms[1].shard.acting_until().is_none());
    drop(claim);
    assert_eq!(ms[0].shard.members(), vec!["a", "c"]);
    // The dead member's Lease is deleted twice its duration after it was last seen changing.
    until(&ms, Duration::from_secs(40), || store.peek("g-b").is_none()).await;
    // Reconnected, it comes back as a newcomer: a lease duration before it acts again.
    ms[1].leases.set_down(false);
    let back = Instant::now();
    until(&ms, Duration::from_secs(40), || covered(&ms, &[0, 1, 2])).await;
    assert!(back.elapsed() >= timing().lease_duration);
}

#[tokio::test(start_paused = true)]
async fn a_member_that_leaves_waits_for_its_claims_then_hands_over_at_the_next_round() {
    let store = MemoryLeases::default();
    let mut ms = members(&store, &["a", "b", "c"]);
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1, 2])).await;
    let key = keys()
        .into_iter()
        .find(|k| ms[2].shard.is_assigned(k))
        .unwrap();
    let claim = ms[2].shard.claim(&key).unwrap();
    let _ = ms[2].stop.take().unwrap().send(());
    tokio::time::sleep(3 * MS).await;
    // It stopped granting claims, and keeps its Lease while a claim is held.
    assert!(ms[2].shard.claim(&key).is_none());
    assert!(!claim.is_valid());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(store.peek("g-c").is_some());
    drop(claim);
    (&mut ms[2].run).await.unwrap();
    assert!(store.peek("g-c").is_none());
    assert!(ms[2].shard.members().is_empty());
    let t = until(&ms, Duration::from_secs(10), || covered(&ms, &[0, 1])).await;
    assert!(t <= timing().retry_period + 100 * MS, "{t:?}");
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_lists_fail_stops_acting_but_keeps_its_keys() {
    let store = MemoryLeases::default();
    let ms = members(&store, &["a", "b"]);
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1])).await;
    ms[0].leases.set_down(true);
    until(&ms, Duration::from_secs(11), || {
        ms[0].shard.acting_until().is_none()
    })
    .await;
    // Its ring is kept (its cache stays), but it acts on nothing.
    assert_eq!(ms[0].shard.members(), vec!["a", "b"]);
    assert!(keys().iter().all(|k| !ms[0].shard.owns(k)));
    ms[0].leases.set_down(false);
    until(&ms, Duration::from_secs(40), || covered(&ms, &[0, 1])).await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_member_whose_renewal_lands_late_comes_back_as_a_newcomer() {
    let store = MemoryLeases::default();
    let ms = members(&store, &["a", "b", "c"]);
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1, 2])).await;
    // b stalls: its next renewal and list each take effect at once but are answered 9.9 s
    // later (each within the renew deadline). Its Lease then stays unchanged for a whole
    // round of 21.8 s, longer than the lease duration, so a and c take its keys.
    let stall = Duration::from_millis(9_900);
    ms[1].leases.slow_answers(&[stall, stall]);
    let stalled = Instant::now();
    until(&ms, Duration::from_secs(30), || covered(&ms, &[0, 2])).await;
    // Its next renewal succeeds, but more than a renew deadline after the one before: it
    // must wait as a newcomer, not act at once on keys the others still act on. `until`
    // checks at every step that no key has two acting owners.
    until(&ms, Duration::from_secs(60), || covered(&ms, &[0, 1, 2])).await;
    assert!(
        stalled.elapsed() >= 2 * stall + timing().retry_period + timing().lease_duration,
        "{:?}",
        stalled.elapsed()
    );
}

/// Two members whose rounds are a second apart (b's at odd seconds from `t0`, a's at even),
/// once both act; then steps to 300 ms after one of b's rounds.
async fn offset_pair(store: &MemoryLeases) -> Vec<Member> {
    let t0 = Instant::now();
    let mut ms = vec![member(store, "a")];
    tokio::time::sleep(Duration::from_secs(1)).await;
    ms.push(member(store, "b"));
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1])).await;
    let period = timing().retry_period.as_millis();
    let phase = t0.elapsed().as_millis() % period;
    let to = (1_300 + period - phase) % period;
    tokio::time::sleep(Duration::from_millis(u64::try_from(to).unwrap())).await;
    ms
}

/// Writes b's Lease around its member, with `f` applied to its spec.
async fn edit_b(
    store: &MemoryLeases,
    f: impl FnOnce(&mut k8s_openapi::api::coordination::v1::LeaseSpec),
) {
    use crate::election::Leases;
    let mut lease = store.peek("g-b").unwrap();
    f(lease.spec.as_mut().unwrap());
    store.client().replace(&lease).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_membership_lease_deleted_by_hand_is_waited_out_not_taken_over() {
    let store = MemoryLeases::default();
    let ms = offset_pair(&store).await;
    // Someone deletes b's Lease between b's round and a's: a's next list does not find it,
    // yet must not take b's keys while b may still act; b, finding its Lease gone, comes back
    // as a newcomer. `until` checks every step.
    store.remove("g-b");
    let deleted = Instant::now();
    until(&ms, Duration::from_secs(40), || {
        deleted.elapsed() > timing().lease_duration && covered(&ms, &[0, 1])
    })
    .await;
    assert!(store.peek("g-b").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_lease_deleted_after_an_unseen_renewal_is_waited_out_from_the_list_that_missed_it() {
    let store = MemoryLeases::default();
    let ms = offset_pair(&store).await;
    // b renewed 300 ms ago, after a's last list; now b is cut off and its Lease deleted, so
    // a never sees that renewal. b may act until it + the renew deadline; a must count b as
    // live for a whole lease duration from its first list without b's Lease.
    ms[1].leases.set_down(true);
    store.remove("g-b");
    let deleted = Instant::now();
    until(&ms, Duration::from_secs(40), || covered(&ms, &[0])).await;
    assert!(
        deleted.elapsed() >= timing().lease_duration + Duration::from_millis(700),
        "{:?}",
        deleted.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_dead_members_lease_stays_dead_when_the_expiry_rule_deletes_it() {
    let store = MemoryLeases::default();
    let ms = members(&store, &["a", "b", "c"]);
    until(&ms, Duration::from_secs(20), || covered(&ms, &[0, 1, 2])).await;
    ms[2].leases.set_down(true);
    until(&ms, Duration::from_secs(30), || covered(&ms, &[0, 1])).await;
    // Unchanged for twice its duration, c's Lease is deleted; its keys stay with a and b.
    let start = Instant::now();
    while start.elapsed() < 3 * timing().lease_duration {
        assert!(covered(&ms, &[0, 1]), "after {:?}", start.elapsed());
        tokio::time::sleep(50 * MS).await;
    }
    assert!(store.peek("g-c").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_holder_rewritten_by_hand_moves_no_keys() {
    let store = MemoryLeases::default();
    let ms = offset_pair(&store).await;
    // The ring is keyed by Lease name: a keeps b's keys assigned to b. b, finding its Lease
    // held by someone else, stops acting; once that record expires it takes the Lease back
    // and joins anew. No key has two acting owners at any step.
    edit_b(&store, |spec| {
        spec.holder_identity = Some("intruder".into())
    })
    .await;
    let edited = Instant::now();
    until(&ms, Duration::from_secs(60), || {
        edited.elapsed() > timing().lease_duration && covered(&ms, &[0, 1])
    })
    .await;
    let spec = store.peek("g-b").unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert!(
        edited.elapsed() >= timing().lease_duration,
        "{:?}",
        edited.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_holder_is_cleared_by_hand_joins_anew() {
    let store = MemoryLeases::default();
    let ms = offset_pair(&store).await;
    // Cleared, b's Lease reads as a clean leave and a takes b's keys at its next list, while
    // b acts until its own next round (the documented exception). From that round on, b must
    // not act: a may hold claims on its keys. It acts again only a lease duration later.
    edit_b(&store, |spec| spec.holder_identity = Some(String::new())).await;
    tokio::time::sleep(timing().retry_period).await;
    let rejoined = Instant::now();
    assert!(ms[1].shard.acting_until().is_none());
    until(&ms, Duration::from_secs(40), || covered(&ms, &[0, 1])).await;
    assert!(rejoined.elapsed() >= timing().lease_duration - timing().retry_period);
}

#[test]
fn names_the_api_server_would_refuse_are_a_typed_error() {
    use crate::election::ConfigError;
    let bad = |group: &str, id: &str| ShardConfig::new(group, id).validate();
    assert!(matches!(
        bad("g", "Host-1"),
        Err(ConfigError::InvalidName {
            what: "lease name",
            ..
        })
    ));
    assert!(matches!(
        bad("a b", "x"),
        Err(ConfigError::InvalidName { what: "group", .. })
    ));
    assert_eq!(bad("workers", "replica-0"), Ok(()));
}
