//! The elector on paused time over the in-memory Lease store: one leader at a time, failover
//! bounds, release, races and skewed wall clocks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::leases::Leases as _;
use super::memory::MemoryLeases;
use super::*;

const MS: Duration = Duration::from_millis(1);

/// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
fn timing() -> ElectionTiming {
    ElectionTiming::default()
}

struct Candidate {
    elector: Arc<LeaderElector<MemoryLeases>>,
    leases: MemoryLeases,
    stop: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<Leadership>,
}

fn candidate(store: &MemoryLeases, id: &str) -> Candidate {
    candidate_with(store, id, None)
}

fn candidate_with(
    store: &MemoryLeases,
    id: &str,
    wall: Option<fn() -> jiff::Timestamp>,
) -> Candidate {
    let leases = store.client();
    let config = LeaderElectionConfig::new("lead", id).timing(timing());
    let mut lock = LeaseLock::new(leases.clone(), "lead", id, timing().lease_duration);
    if let Some(w) = wall {
        lock = lock.with_wall_clock(w);
    }
    let elector = Arc::new(LeaderElector::with_lock(lock, config));
    let (tx, rx) = oneshot::channel();
    let e = elector.clone();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    Candidate {
        elector,
        leases,
        stop: Some(tx),
        run,
    }
}

fn leaders(cs: &[Candidate]) -> Vec<usize> {
    (0..cs.len())
        .filter(|&i| cs[i].elector.is_leader())
        .collect()
}

/// Steps paused time by 50 ms until `f` holds or `limit` passes, checking at every step that
/// at most one candidate leads; the time it took.
async fn until(cs: &[Candidate], limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            leaders(cs).len() <= 1,
            "two leaders at once: {:?}",
            leaders(cs)
        );
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(50 * MS).await;
    }
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn one_leader_and_the_others_follow_it() {
    let store = MemoryLeases::default();
    let cs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| candidate(&store, id))
        .collect();
    until(&cs, Duration::from_secs(10), || leaders(&cs).len() == 1).await;
    let l = leaders(&cs)[0];
    let name = cs[l].elector.identity().to_owned();
    // The followers read the holder.
    until(&cs, Duration::from_secs(10), || {
        cs.iter().enumerate().all(|(i, c)| {
            i == l
                || *c.elector.watch().borrow()
                    == Leadership::Following {
                        leader: Some(name.clone()),
                    }
        })
    })
    .await;
    assert_eq!(*cs[l].elector.watch().borrow(), Leadership::Leading);
    // A minute of renewals: the same leader, no transition.
    for_a_while(&cs, Duration::from_secs(60)).await;
    assert_eq!(leaders(&cs), vec![l]);
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(spec.lease_duration_seconds, Some(15));
}

/// Steps paused time for `d`, checking at every step that at most one candidate leads.
async fn for_a_while(cs: &[Candidate], d: Duration) {
    let start = Instant::now();
    until(cs, d + MS * 100, || start.elapsed() >= d).await;
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_stops_before_another_starts() {
    let store = MemoryLeases::default();
    let cs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| candidate(&store, id))
        .collect();
    until(&cs, Duration::from_secs(10), || leaders(&cs).len() == 1).await;
    let old = leaders(&cs)[0];
    let last_until = cs[old].elector.leading_until().unwrap();
    cs[old].leases.set_down(true);
    let cut = Instant::now();
    // It stops leading by the clock, at most renew_deadline after its last renewal started.
    until(&cs, Duration::from_secs(11), || {
        !cs[old].elector.is_leader()
    })
    .await;
    assert!(Instant::now() <= last_until + 50 * MS);
    let t = until(&cs, Duration::from_secs(30), || {
        leaders(&cs).len() == 1 && leaders(&cs)[0] != old
    })
    .await;
    let failover = cut.elapsed();
    // A follower waits the lease duration from when it saw the last renewal (at most a retry
    // period and its jitter before the cut), so failover lies between them.
    assert!(
        failover >= timing().lease_duration - timing().retry_period.mul_f64(2.2),
        "failover {failover:?}"
    );
    assert!(
        failover <= timing().lease_duration + timing().retry_period.mul_f64(2.2) + 100 * MS,
        "failover {failover:?} ({t:?} after it stopped)"
    );
    assert!(cs[old].run.is_finished() || *cs[old].elector.watch().borrow() == Leadership::Lost);
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1));
    // Reconnected, the old leader follows the new one.
    cs[old].leases.set_down(false);
    let mut again = candidate(&store, cs[old].elector.identity());
    until(&cs, Duration::from_secs(10), || {
        matches!(
            &*again.elector.watch().borrow(),
            Leadership::Following { leader: Some(_) }
        )
    })
    .await;
    assert!(!again.elector.is_leader());
    let _ = again.stop.take().map(|s| s.send(()));
}

#[tokio::test(start_paused = true)]
async fn release_on_stop_hands_over_at_once() {
    let store = MemoryLeases::default();
    let mut cs: Vec<_> = ["a", "b"].iter().map(|id| candidate(&store, id)).collect();
    until(&cs, Duration::from_secs(10), || leaders(&cs).len() == 1).await;
    let old = leaders(&cs)[0];
    let _ = cs[old].stop.take().unwrap().send(());
    let stopped = Instant::now();
    let end = (&mut cs[old].run).await.unwrap();
    assert_eq!(end, Leadership::Stopped);
    assert!(!cs[old].elector.is_leader());
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    until(&cs, Duration::from_secs(10), || {
        leaders(&cs) == vec![1 - old]
    })
    .await;
    // Within one acquire wait (retry period + jitter), not a lease duration.
    assert!(stopped.elapsed() <= timing().retry_period.mul_f64(2.2) + 100 * MS);
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn wall_clocks_hours_apart_change_nothing() {
    fn past() -> jiff::Timestamp {
        jiff::Timestamp::now() - jiff::SignedDuration::from_hours(5)
    }
    fn future() -> jiff::Timestamp {
        jiff::Timestamp::now() + jiff::SignedDuration::from_hours(5)
    }
    for wall in [past as fn() -> jiff::Timestamp, future] {
        let store = MemoryLeases::default();
        let cs = vec![candidate_with(&store, "skewed", Some(wall))];
        until(&cs, Duration::from_secs(5), || leaders(&cs) == vec![0]).await;
        let mut cs = cs;
        cs.push(candidate(&store, "b"));
        // The follower never takes a Lease that keeps being renewed, whatever its times say.
        for_a_while(&cs, Duration::from_secs(60)).await;
        assert_eq!(leaders(&cs), vec![0]);
        cs[0].leases.set_down(true);
        let cut = Instant::now();
        until(&cs, Duration::from_secs(30), || leaders(&cs) == vec![1]).await;
        assert!(cut.elapsed() >= timing().lease_duration - timing().retry_period.mul_f64(2.2));
    }
}

#[tokio::test(start_paused = true)]
async fn a_lease_left_by_a_dead_holder_is_taken_after_its_duration() {
    let store = MemoryLeases::default();
    // A holder that renewed once and died.
    let mut dead = LeaseLock::new(store.client(), "lead", "dead", Duration::from_secs(15));
    assert!(dead.try_acquire_or_renew().await.unwrap());
    let start = Instant::now();
    let cs = vec![candidate(&store, "b")];
    until(&cs, Duration::from_secs(30), || leaders(&cs) == vec![0]).await;
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(15), "{waited:?}");
    assert!(waited <= Duration::from_secs(15) + timing().retry_period.mul_f64(2.2) + 100 * MS);
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    // The dead holder, back, sees it lost: its next try is refused.
    assert!(!dead.try_acquire_or_renew().await.unwrap());
    assert_eq!(dead.observed().holder_identity, "b");
}

/// Steps paused time until the leader `l` has just renewed (its deadline moved).
async fn just_renewed(cs: &[Candidate], l: usize) {
    let before = cs[l].elector.leading_until();
    until(cs, Duration::from_secs(5), || {
        cs[l].elector.leading_until() != before
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_lease_deleted_by_hand_is_waited_out_by_candidates_that_saw_it_held() {
    let store = MemoryLeases::default();
    let cs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| candidate(&store, id))
        .collect();
    until(&cs, Duration::from_secs(10), || leaders(&cs).len() == 1).await;
    let l = leaders(&cs)[0];
    // Read by every follower, then deleted just after a renewal: the followers' next tries
    // (jittered) mostly come before the leader's, and find no Lease. They must not create
    // one while the leader may still act; the leader puts it back and keeps leading.
    for_a_while(&cs, Duration::from_secs(5)).await;
    for _ in 0..5 {
        just_renewed(&cs, l).await;
        store.remove("lead");
        for_a_while(&cs, Duration::from_secs(6)).await;
        assert_eq!(leaders(&cs), vec![l]);
        assert_eq!(
            store
                .peek("lead")
                .unwrap()
                .spec
                .unwrap()
                .holder_identity
                .as_deref(),
            Some(cs[l].elector.identity())
        );
    }
    // Deleted and its leader cut off: the followers wait out what they saw, then one leads.
    just_renewed(&cs, l).await;
    store.remove("lead");
    cs[l].leases.set_down(true);
    let cut = Instant::now();
    until(&cs, Duration::from_secs(30), || {
        leaders(&cs).len() == 1 && leaders(&cs)[0] != l
    })
    .await;
    assert!(
        cut.elapsed() >= timing().lease_duration - timing().retry_period.mul_f64(2.2),
        "{:?}",
        cut.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_vanished_lease_is_waited_out_from_the_read_that_found_it_gone() {
    let store = MemoryLeases::default();
    let lease = Duration::from_secs(15);
    let mut l = LeaseLock::new(store.client(), "lead", "l", lease);
    let mut c = LeaseLock::new(store.client(), "lead", "c", lease);
    assert!(l.try_acquire_or_renew().await.unwrap());
    assert!(!c.try_acquire_or_renew().await.unwrap());
    // The leader renews after c's read; the Lease is deleted before c reads again, hiding
    // that renewal. The leader may act until its renewal + renew deadline (11.9 s), so c
    // must wait from its read that finds the Lease gone (2.5 s), not from its earlier read.
    tokio::time::sleep(1900 * MS).await;
    assert!(l.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(100 * MS).await;
    store.remove("lead");
    tokio::time::sleep(500 * MS).await;
    let gone = Instant::now();
    assert!(!c.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(lease - 300 * MS).await;
    assert!(
        !c.try_acquire_or_renew().await.unwrap(),
        "taken before its wait ended"
    );
    tokio::time::sleep(400 * MS).await;
    assert!(c.try_acquire_or_renew().await.unwrap());
    assert!(gone.elapsed() >= lease);
}

#[tokio::test(start_paused = true)]
async fn a_record_naming_a_candidate_that_it_did_not_write_is_waited_out() {
    let store = MemoryLeases::default();
    let cs: Vec<_> = ["a", "b"].iter().map(|id| candidate(&store, id)).collect();
    until(&cs, Duration::from_secs(10), || leaders(&cs).len() == 1).await;
    let l = leaders(&cs)[0];
    let other = cs[1 - l].elector.identity().to_owned();
    // Someone names the follower as holder by hand: the follower must not take it as its
    // own while the leader may still act. The leader finds another holder at its next
    // renewal and stops; the follower leads once the edited record has expired.
    just_renewed(&cs, l).await;
    let mut lease = store.peek("lead").unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some(other.clone());
    store.client().replace(&lease).await.unwrap();
    let edited = Instant::now();
    until(&cs, Duration::from_secs(30), || leaders(&cs) == vec![1 - l]).await;
    assert!(edited.elapsed() >= timing().lease_duration - timing().retry_period.mul_f64(2.2));
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(other.as_str()));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_whose_answer_was_lost_is_recognised_as_its_own() {
    let store = MemoryLeases::default();
    let leases = store.client();
    let mut l = LeaseLock::new(leases.clone(), "lead", "l", Duration::from_secs(15));
    assert!(l.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(2 * timing().retry_period).await;
    // The renewal takes effect, but its answer comes after the caller gave up on it.
    leases.slow_answers(&[Duration::from_secs(5)]);
    let r = tokio::time::timeout(Duration::from_secs(1), l.try_acquire_or_renew()).await;
    assert!(r.is_err());
    // Read back, the record is its own: it still holds the Lease, and nobody overwrote it.
    assert!(l.try_acquire_or_renew().await.unwrap());
    assert!(l.holds());
    assert!(!l.overwritten());
    let spec = store.peek("lead").unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(0));
}

#[tokio::test(start_paused = true)]
async fn racing_writes_cannot_both_win() {
    let store = MemoryLeases::default();
    let mut a = LeaseLock::new(store.client(), "lead", "a", Duration::from_secs(15));
    let mut b = LeaseLock::new(store.client(), "lead", "b", Duration::from_secs(15));
    // Both try at once: one wins, the other is refused (or conflicts).
    let (ra, rb) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
    let wins = [&ra, &rb].iter().filter(|r| matches!(r, Ok(true))).count();
    assert_eq!(wins, 1, "{ra:?} {rb:?}");
    assert!(
        [&ra, &rb]
            .iter()
            .any(|r| matches!(r, Ok(false) | Err(LeaseError::Conflict(_))))
    );
    // A stale write (b replaces from an old copy of a Lease a renewed since) conflicts.
    let stale = store.peek("lead").unwrap();
    let (winner, loser) = if matches!(ra, Ok(true)) {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert!(winner.try_acquire_or_renew().await.unwrap());
    assert!(matches!(
        loser.leases_for_test().replace(&stale).await,
        Err(LeaseError::Conflict(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_reports_lost_at_its_renew_deadline() {
    // A retry period close to the renew deadline (valid, as in client-go): the watch must
    // say Lost when the deadline passes, not a retry period later, and before anyone else
    // may lead.
    let t = ElectionTiming {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(8),
    };
    let store = MemoryLeases::default();
    let a_leases = store.client();
    let a = Arc::new(
        LeaderElector::with_leases(
            a_leases.clone(),
            LeaderElectionConfig::new("lead", "a").timing(t),
        )
        .unwrap(),
    );
    let e = a.clone();
    let _run = tokio::spawn(async move { e.run(std::future::pending()).await });
    tokio::time::sleep(MS).await;
    assert_eq!(*a.watch().borrow(), Leadership::Leading);
    let renewed = Instant::now();
    a_leases.set_down(true);
    tokio::time::sleep_until(renewed + t.renew_deadline + 10 * MS).await;
    assert!(!a.is_leader());
    assert_eq!(*a.watch().borrow(), Leadership::Lost);
}

#[test]
fn durations_beyond_a_lease_field_are_refused() {
    let t = ElectionTiming {
        lease_duration: Duration::from_secs(u64::MAX),
        renew_deadline: Duration::from_secs(u64::MAX - 1),
        retry_period: Duration::from_secs(1),
    };
    assert_eq!(t.validate(), Err(ConfigError::TooLong("lease_duration")));
    let ok = ElectionTiming {
        lease_duration: MAX_DURATION,
        renew_deadline: MAX_DURATION - Duration::from_secs(1),
        retry_period: Duration::from_secs(1),
    };
    assert_eq!(ok.validate(), Ok(()));
}
