//! [`ShardRing`]: which live member owns a key, by rendezvous (highest random weight)
//! hashing: each key goes to the member with the highest score for it, so a member that
//! leaves gives up exactly its own keys, spread over the others, and a member that joins
//! takes about `1/N` of every other member's keys and nothing else moves.

use std::sync::Arc;

/// 64-bit FNV-1a: fixed and specified, so every replica, whatever its build or version,
/// computes the same owner for a key.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// splitmix64's finalizer: spreads FNV's weak low bits over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The stable hash of a key (`namespace/name`) or a member identity.
pub fn shard_hash(s: &str) -> u64 {
    mix(fnv1a(s.as_bytes()))
}

/// A set of member identities and the owner of any key among them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardRing {
    /// Identities, sorted, with their hashes.
    members: Arc<[(String, u64)]>,
}

impl ShardRing {
    /// A ring over `members` (duplicates kept once).
    pub fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut m: Vec<(String, u64)> = members
            .into_iter()
            .map(|s| {
                let s = s.into();
                let h = shard_hash(&s);
                (s, h)
            })
            .collect();
        m.sort();
        m.dedup();
        ShardRing { members: m.into() }
    }

    /// The member identities, sorted.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(m, _)| m.as_str())
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// No members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `identity` is a member.
    pub fn contains(&self, identity: &str) -> bool {
        self.members.iter().any(|(m, _)| m == identity)
    }

    /// The member that owns `key` (`None` when the ring is empty). Costs one hash of the key
    /// and one multiply-mix per member.
    pub fn owner(&self, key: &str) -> Option<&str> {
        let k = shard_hash(key);
        self.members
            .iter()
            .max_by_key(|(m, h)| (mix(k ^ h), m.as_str()))
            .map(|(m, _)| m.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("ns-{}/pod-{i}", i % 7)).collect()
    }

    #[test]
    fn keys_spread_evenly_and_only_the_leavers_keys_move() {
        let ring = ShardRing::new(["a", "b", "c", "d"]);
        let ks = keys(40_000);
        let mut per = std::collections::BTreeMap::new();
        for k in &ks {
            *per.entry(ring.owner(k).unwrap()).or_insert(0) += 1;
        }
        for (m, n) in &per {
            assert!((9_000..=11_000).contains(n), "{m}: {n} of 40 000");
        }
        let without_c = ShardRing::new(["a", "b", "d"]);
        let with_e = ShardRing::new(["a", "b", "c", "d", "e"]);
        let (mut moved_in, mut moved_join) = (0, 0);
        for k in &ks {
            let before = ring.owner(k).unwrap();
            let after = without_c.owner(k).unwrap();
            if before != "c" {
                assert_eq!(before, after, "{k} moved though its owner stayed");
            } else {
                moved_in += 1;
            }
            let joined = with_e.owner(k).unwrap();
            if joined != before {
                assert_eq!(joined, "e", "{k} moved to another old member");
                moved_join += 1;
            }
        }
        assert_eq!(moved_in, per["c"]);
        assert!((6_800..=9_200).contains(&moved_join), "{moved_join}");
    }

    #[test]
    fn the_owner_is_the_same_everywhere() {
        // Fixed values: a change of hash would split a fleet running two builds.
        assert_eq!(shard_hash(""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(shard_hash("default/web-0"), 0xe561_b668_671b_4307);
        let ring = ShardRing::new(["replica-0", "replica-1", "replica-2"]);
        let same = ShardRing::new(["replica-2", "replica-0", "replica-1", "replica-0"]);
        assert_eq!(ring, same);
        assert_eq!(ring.len(), 3);
        for k in keys(100) {
            assert_eq!(ring.owner(&k), same.owner(&k));
        }
        for (k, m) in [
            ("default/web-0", "replica-0"),
            ("default/web-1", "replica-1"),
            ("kube-system/coredns", "replica-0"),
            ("a", "replica-2"),
        ] {
            assert_eq!(ring.owner(k), Some(m), "{k}");
        }
        assert_eq!(ShardRing::default().owner("a/b"), None);
    }
}
