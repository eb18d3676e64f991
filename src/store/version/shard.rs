//! Which shard of a buffer's key tables a key hash goes to: unequal shares of the hash range,
//! so that the shards' tables are not all just past a doubling at once.

use std::sync::Arc;

use super::Version;

/// Slices of the hash range that [`shard_map`] assigns to shards (a power of two).
const SHARD_SLOTS: usize = 1024;

/// Above this many shards every shard gets an equal share of the hash range (a slice of
/// [`SHARD_SLOTS`] is then too coarse to weigh them).
const MAX_WEIGHTED_SHARDS: usize = 256;

/// Which shard each slice of the hash range goes to, for `shards` shards (1 <
/// `shards` <= [`MAX_WEIGHTED_SHARDS`]; empty otherwise).
///
/// The shares are unequal on purpose: shard `i` gets a share proportional to `2^(i/shards)`,
/// so shard sizes are spread evenly, on a log scale, over one factor of two. A hash table
/// doubles when it passes 7/8 load, so it sits anywhere between 44 % and 88 % full depending
/// on its size; equal shards all sit at the same point of that cycle (at 1 000 000 objects in
/// 16 shards, all just past a doubling, at 48 %), unequal ones at every point of it at once,
/// which holds the average near 63 % load whatever the store size.
pub(super) fn shard_map(shards: usize) -> Arc<[u16]> {
    if shards <= 1 || shards > MAX_WEIGHTED_SHARDS {
        return Arc::from([]);
    }
    let weights: Vec<f64> = (0..shards)
        .map(|i| (i as f64 / shards as f64).exp2())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut map = Vec::with_capacity(SHARD_SLOTS);
    let mut upto = 0.0;
    for (i, w) in weights.iter().enumerate() {
        upto += w;
        // Every shard gets at least one slice; the last one takes the rest.
        let end = if i + 1 == shards {
            SHARD_SLOTS
        } else {
            ((upto / total * SHARD_SLOTS as f64).round() as usize)
                .max(map.len() + 1)
                .min(SHARD_SLOTS - (shards - 1 - i))
        };
        map.resize(end, i as u16);
    }
    map.into()
}

impl Version {
    /// Shard of a key hash: bits 47..57 pick one of [`SHARD_SLOTS`] slices of the hash range,
    /// mapped to shards by [`shard_map`] (unequal shares, see there); above
    /// [`MAX_WEIGHTED_SHARDS`] shards, bits 25..57 scaled to the shard count (equal shares).
    /// The tables use the low bits (bucket) and the top 7 bits (tag) of the same hash, so the
    /// shard choice leaves both uniformly spread within a shard.
    pub(super) fn shard_of(&self, hash: u64) -> usize {
        let n = self.shards.len();
        if n == 1 {
            return 0;
        }
        if let Some(&s) = self
            .shard_map
            .get(((hash >> 47) as usize) & (SHARD_SLOTS - 1))
        {
            return usize::from(s);
        }
        ((((hash >> 25) & 0xFFFF_FFFF) * n as u64) >> 32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_map_gives_every_shard_a_growing_share() {
        assert!(shard_map(1).is_empty());
        assert!(shard_map(MAX_WEIGHTED_SHARDS + 1).is_empty());
        for shards in 2..=MAX_WEIGHTED_SHARDS {
            let map = shard_map(shards);
            assert_eq!(map.len(), SHARD_SLOTS);
            let mut share = vec![0usize; shards];
            for w in map.windows(2) {
                assert!(w[0] <= w[1], "{shards} shards: slices in shard order");
            }
            for &s in map.iter() {
                share[usize::from(s)] += 1;
            }
            assert!(share.iter().all(|&n| n > 0), "{shards} shards: {share:?}");
            if shards <= 32 {
                // Largest share about twice the smallest (2^((n-1)/n), rounded to slices).
                let (lo, hi) = (share[0] as f64, share[shards - 1] as f64);
                assert!(hi / lo > 1.4 && hi / lo < 2.3, "{shards} shards: {share:?}");
            }
        }
    }
}
