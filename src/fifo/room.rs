//! Giving back the room a large burst left in a queue's collections.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Capacity a drained collection keeps: room for the steady state's batches (a watch read
/// decodes at most 1 024 frames), so that a stream of events does not reallocate.
pub(crate) const KEEP: usize = 4096;

/// Collections that can give back capacity they no longer need.
///
/// A first list or a relist fills the DeltaFIFO (and the compaction queue) with one entry per
/// object; once drained, std maps and deques keep that capacity. For 100 000 etcd Pods it was
/// about 320 bytes per cached object (the DeltaFIFO's map of queued keys 198 B, its key queue
/// 39 B, the compaction queue's set and deque 80 B; `valgrind --tool=massif` of `informer
/// watch --compression zstd`, 2026-12-06), more than the compressed object itself.
pub(crate) trait GiveBackRoom {
    /// Shrinks to `max(2 × len, KEEP)` once the capacity is past `KEEP` and 8 times the length:
    /// rare enough that the rehash or copy it costs is paid once per burst, not per batch.
    fn give_back_room(&mut self);
}

fn shrinks(len: usize, capacity: usize) -> Option<usize> {
    (capacity > KEEP && len <= capacity / 8).then(|| (2 * len).max(KEEP))
}

impl<K: Hash + Eq, V, S: BuildHasher> GiveBackRoom for HashMap<K, V, S> {
    fn give_back_room(&mut self) {
        if let Some(to) = shrinks(self.len(), self.capacity()) {
            self.shrink_to(to);
        }
    }
}

impl<K: Hash + Eq, S: BuildHasher> GiveBackRoom for HashSet<K, S> {
    fn give_back_room(&mut self) {
        if let Some(to) = shrinks(self.len(), self.capacity()) {
            self.shrink_to(to);
        }
    }
}

impl<T> GiveBackRoom for VecDeque<T> {
    fn give_back_room(&mut self) {
        if let Some(to) = shrinks(self.len(), self.capacity()) {
            self.shrink_to(to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_burst_gives_its_room_back_and_a_small_queue_keeps_it() {
        let mut map: HashMap<u32, u32> = (0..100_000).map(|i| (i, i)).collect();
        let mut deque: VecDeque<u32> = (0..100_000).collect();
        map.retain(|&k, _| k < 10);
        deque.truncate(10);
        map.give_back_room();
        deque.give_back_room();
        assert!(
            map.capacity() >= KEEP && map.capacity() < 2 * KEEP,
            "{}",
            map.capacity()
        );
        assert!(deque.capacity() >= KEEP && deque.capacity() < 2 * KEEP);
        assert_eq!(map.len(), 10);
        assert_eq!(
            deque.iter().copied().collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );

        // Below the kept room, and while still a quarter full, nothing moves.
        let mut small: HashSet<u32> = (0..1000).collect();
        small.clear();
        let before = small.capacity();
        small.give_back_room();
        assert_eq!(small.capacity(), before);
        let mut busy: VecDeque<u32> = (0..100_000).collect();
        busy.truncate(30_000);
        let before = busy.capacity();
        busy.give_back_room();
        assert_eq!(busy.capacity(), before);
    }
}
