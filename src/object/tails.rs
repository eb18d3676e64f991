//! [`MetaTails`]: one copy of each distinct metadata tail (labels, annotations, owner
//! references, finalizers) for the compact objects of a compressed cache.

use std::sync::{Arc, Mutex, PoisonError};

use hashbrown::HashTable;

/// At most this many distinct tails are kept; past it (after a sweep of those no object holds
/// any more) a compact object keeps its tail to itself.
pub const TAIL_LIMIT: usize = 1 << 16;

/// The table of metadata tails that compact objects share: the labels, annotations, owner
/// references and finalizers of an object, as packed strings with where each ends. Objects of
/// one workload (the Pods of a ReplicaSet, the Jobs of a CronJob) differ in name, uid and
/// resourceVersion but share all of that, so a compressed cache keeps it once per distinct
/// content. Used by [`Compactor`](super::Compactor); clones share the table.
///
/// Tails no object holds any more are swept when the table doubles, and at most
/// [`TAIL_LIMIT`] are kept.
#[derive(Clone, Default)]
pub struct MetaTails {
    table: Arc<Mutex<Table>>,
}

#[derive(Default)]
struct Table {
    entries: HashTable<Entry>,
    /// Seeded per table: tails come from the API server, whose objects anyone with write
    /// access shapes.
    hasher: foldhash::quality::RandomState,
    /// Sweep when `entries` reaches this many.
    sweep_at: usize,
    /// Inserts refused at the limit since the last sweep.
    refused: usize,
}

struct Entry {
    hash: u64,
    text: SharedText,
    ends: Arc<[u32]>,
}

/// A shared tail's text: a thin pointer (an `Arc<str>` is two words).
pub(crate) type SharedText = Arc<Box<str>>;

/// A shared tail: its strings, and its words: the metadata's four counts, the strings' ends
/// (relative to `text`), then the owners' flags.
pub(crate) type Tail = (SharedText, Arc<[u32]>);

impl MetaTails {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared copy of the tail `text` with its words `ends` (see [`Tail`]; made now if
    /// new), or `None` when the table is full.
    pub(crate) fn share(&self, text: &str, ends: &[u32]) -> Option<Tail> {
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let hash = hash_of(&t.hasher, text, ends);
        let same = |e: &Entry| e.hash == hash && **e.text == *text && *e.ends == *ends;
        if let Some(e) = t.entries.find(hash, same) {
            return Some((e.text.clone(), e.ends.clone()));
        }
        if t.entries.len() >= t.sweep_at.max(1024) {
            // `sweep_at` starts at 0: the first sweep comes at 1 024 tails.
            t.sweep();
        }
        if t.entries.len() >= TAIL_LIMIT {
            t.refused += 1;
            if t.refused >= 4096 {
                t.sweep();
            }
            return None;
        }
        let (text, ends): Tail = (Arc::new(Box::from(text)), Arc::from(ends));
        t.entries.insert_unique(
            hash,
            Entry {
                hash,
                text: text.clone(),
                ends: ends.clone(),
            },
            |e| e.hash,
        );
        Some((text, ends))
    }

    /// Distinct tails in the table (some may be held by no object until the next sweep).
    pub fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len()
    }

    /// `true` when the table holds no tail.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Table {
    /// Drops the tails only the table holds.
    fn sweep(&mut self) {
        self.entries.retain(|e| Arc::strong_count(&e.text) > 1);
        let len = self.entries.len();
        // Next when the table doubles, or fills; a table full of held tails waits for
        // refusals instead (sweeping it on every call would cost a pass per object).
        self.sweep_at = if len >= TAIL_LIMIT {
            usize::MAX
        } else {
            (2 * len).clamp(1024, TAIL_LIMIT)
        };
        self.refused = 0;
        if self.entries.capacity() > 4 * self.entries.len().max(1024) {
            self.entries.shrink_to(self.entries.len(), |e| e.hash);
        }
    }
}

fn hash_of(hasher: &foldhash::quality::RandomState, text: &str, ends: &[u32]) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = hasher.build_hasher();
    text.hash(&mut h);
    ends.hash(&mut h);
    h.finish()
}

impl std::fmt::Debug for MetaTails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaTails")
            .field("tails", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_tails_are_shared_and_unheld_ones_swept() {
        let tails = MetaTails::new();
        let a = tails.share("appweb", &[3, 6, 1]).unwrap();
        let b = tails.share("appweb", &[3, 6, 1]).unwrap();
        assert!(Arc::ptr_eq(&a.0, &b.0) && Arc::ptr_eq(&a.1, &b.1));
        // Same text, other ends (or flags): another tail.
        let c = tails.share("appweb", &[2, 6, 1]).unwrap();
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!(tails.len(), 2);
        drop((a, b, c));
        // Filling the table past its sweep threshold drops what no one holds.
        let held: Vec<Tail> = (0..1024)
            .map(|i| tails.share(&format!("t{i}"), &[1]).unwrap())
            .collect();
        assert!(tails.len() <= 1024 + 2);
        assert!(tails.len() >= held.len());
        let again = tails.share("t7", &[1]).unwrap();
        assert!(Arc::ptr_eq(&again.0, &held[7].0));
    }

    #[test]
    fn a_table_with_many_held_tails_still_sweeps_the_dead_ones_when_it_fills() {
        let tails = MetaTails::new();
        let held: Vec<Tail> = (0..40_000)
            .map(|i| tails.share(&format!("h{i}"), &[]).unwrap())
            .collect();
        // 60 000 more, none held: the table fills and sweeps them instead of refusing.
        let refused = (0..60_000)
            .filter(|i| tails.share(&format!("d{i}"), &[]).is_none())
            .count();
        assert_eq!(refused, 0);
        assert!(tails.len() < TAIL_LIMIT);
        drop(held);
    }

    #[test]
    fn a_full_table_refuses_then_sweeps() {
        let tails = MetaTails::new();
        let held: Vec<Tail> = (0..TAIL_LIMIT)
            .map(|i| tails.share(&i.to_string(), &[]).unwrap())
            .collect();
        assert_eq!(tails.len(), TAIL_LIMIT);
        assert!(tails.share("new", &[]).is_none());
        drop(held);
        // After enough refusals the table sweeps and takes new tails again.
        let shared = (0..5000).filter(|i| tails.share(&format!("n{i}"), &[]).is_some());
        assert!(shared.count() > 0);
        assert!(tails.len() < TAIL_LIMIT);
    }
}
