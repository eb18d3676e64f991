//! [`SlotSet`]: the items indexed under one index value, as slab slots in key order.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Deref;

use triomphe::ThinArc;

use crate::object::ObjectKey;

/// Position of an item in a store buffer's slab (see `version/mod.rs`): the same number in both
/// buffers of a store, so index entries and logged changes name items by it.
pub(crate) type Slot = u32;

/// Sets above this many slots move to chunks.
const FEW_MAX: usize = 256;
/// Chunked sets at or below this many slots move back to one sorted vector (hysteresis, so
/// that a set oscillating around one size does not convert on every write).
const FEW_MIN: usize = 128;
/// Most slots in one chunk of a `Many` set: a full chunk splits in two.
const CHUNK: usize = 512;

/// The items indexed under one value, as slots sorted by their items' keys. Never empty: the
/// value is removed from its index when its last item goes.
///
/// Three shapes, because most index values hold one item (UID, owner) or a few hundred (a
/// namespace), and some hold tens of thousands (a large namespace):
/// - `One`: a single slot, no allocation;
/// - `Few`: at most [`FEW_MAX`] slots in key order (4 bytes each), shared: a change makes a
///   new array (an insertion finds its place by binary search over the items' keys and copies
///   at most that many slots), and the other buffer takes the same array from the log instead
///   of repeating the change, so the two buffers hold one copy of each set;
/// - `Many`: [`Chunks`] of at most [`CHUNK`] slots in key order, O(log n) key comparisons per
///   insert/remove.
///
/// Reading a set never touches a key: `by_index` goes from slot to object directly. Methods
/// that need keys take `key_of`, the buffer's slot → key lookup.
#[derive(Clone, Debug)]
pub(crate) enum SlotSet {
    One(Slot),
    Few(SharedSlots),
    /// Boxed: a rare shape, and the enum stays 16 bytes (one per index value).
    Many(Box<Chunks>),
}

/// The slots of a `Few` set, in key order: a reference-counted array behind one pointer, its
/// length kept in the allocation (16 bytes before the slots, as `Arc<[Slot]>`), so that a
/// [`SlotSet`] is 16 bytes, not 24: one per index value in each of a store's two buffers.
#[derive(Clone)]
pub(crate) struct SharedSlots(ThinArc<(), Slot>);

impl SharedSlots {
    /// A copy of `slots`.
    fn from_slice(slots: &[Slot]) -> Self {
        SharedSlots(ThinArc::from_header_and_slice((), slots))
    }

    /// These slots with `slot` inserted at `pos` (at most [`FEW_MAX`] before): gathered on the
    /// stack with two block copies, then copied once more into the new array, which is
    /// cheaper than building it slot by slot.
    fn inserted(&self, pos: usize, slot: Slot) -> Self {
        debug_assert!(self.len() <= FEW_MAX);
        let mut buf = [0; FEW_MAX + 1];
        let len = self.len().min(FEW_MAX);
        let pos = pos.min(len);
        buf[..pos].copy_from_slice(&self[..pos]);
        buf[pos] = slot;
        buf[pos + 1..=len].copy_from_slice(&self[pos..len]);
        SharedSlots::from_slice(&buf[..=len])
    }

    /// These slots without the one at `pos` (at most [`FEW_MAX`] of them).
    fn removed(&self, pos: usize) -> Self {
        debug_assert!(self.len() <= FEW_MAX && self.len() > 1);
        let mut buf = [0; FEW_MAX];
        let len = self.len().min(FEW_MAX);
        let pos = pos.min(len.saturating_sub(1));
        buf[..pos].copy_from_slice(&self[..pos]);
        buf[pos..len - 1].copy_from_slice(&self[pos + 1..len]);
        SharedSlots::from_slice(&buf[..len - 1])
    }
}

impl Deref for SharedSlots {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        &self.0.slice
    }
}

impl fmt::Debug for SharedSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// The slots of a large set in key order, cut into sorted chunks of at most [`CHUNK`]: a
/// one-level B-tree that keeps no keys (it compares through `key_of`), so 4 to 8 bytes per
/// item. It replaced a `BTreeMap<ObjectKey, Slot>`, about 40 bytes per item in each of a
/// store's two buffers: 80 bytes per cached object for the namespace index of a store of
/// 10 namespaces × 10 000 Pods (`valgrind --tool=massif` of `informer watch`, 2026-12-06).
#[derive(Clone, Debug, Default)]
pub(crate) struct Chunks {
    chunks: Vec<Vec<Slot>>,
    len: usize,
}

impl Chunks {
    /// Chunks of `slots`, already in key order, half full (room to grow before splitting).
    fn from_sorted(slots: &[Slot]) -> Self {
        Chunks {
            chunks: slots.chunks(CHUNK / 2).map(<[Slot]>::to_vec).collect(),
            len: slots.len(),
        }
    }

    /// The chunk where `key` belongs: the first whose last key is not below it, else the last.
    fn chunk_for<'k>(
        &self,
        key: &ObjectKey,
        key_of: &impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> usize {
        let i = self.chunks.partition_point(|c| {
            c.last()
                .is_some_and(|&s| key_of(s).cmp(&Some(key)) == Ordering::Less)
        });
        i.min(self.chunks.len().saturating_sub(1))
    }

    /// Where `slot`, whose item's key is `key`, sits: (chunk, position).
    fn find<'k>(
        &self,
        slot: Slot,
        key: &ObjectKey,
        key_of: &impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> Option<(usize, usize)> {
        let c = self.chunk_for(key, key_of);
        let chunk = self.chunks.get(c)?;
        let pos = chunk
            .binary_search_by(|&s| key_of(s).cmp(&Some(key)))
            .ok()?;
        (chunk[pos] == slot).then_some((c, pos))
    }

    /// Adds `slot` (no-op when its key is present).
    fn insert<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        key_of: &impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::new());
        }
        let c = self.chunk_for(key, key_of);
        let chunk = &mut self.chunks[c];
        let Err(pos) = chunk.binary_search_by(|&s| key_of(s).cmp(&Some(key))) else {
            return;
        };
        chunk.insert(pos, slot);
        self.len += 1;
        if chunk.len() > CHUNK {
            let upper = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(c + 1, upper);
        }
    }

    /// Removes `slot` (whose item's key is `key`); `false` when absent.
    fn remove<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        key_of: &impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> bool {
        let Some((c, pos)) = self.find(slot, key, key_of) else {
            return false;
        };
        self.chunks[c].remove(pos);
        self.len -= 1;
        // A chunk a quarter full joins a neighbour when both fit in one.
        let n = self.chunks[c].len();
        if n == 0 {
            self.chunks.remove(c);
        } else if n < CHUNK / 4 {
            let next = c + 1;
            if next < self.chunks.len() && n + self.chunks[next].len() <= CHUNK {
                let moved = self.chunks.remove(next);
                self.chunks[c].extend(moved);
            } else if c > 0 && n + self.chunks[c - 1].len() <= CHUNK {
                let moved = self.chunks.remove(c);
                self.chunks[c - 1].extend(moved);
            }
        }
        true
    }

    fn iter(&self) -> ChunksIter<'_> {
        self.chunks.iter().flatten().copied()
    }
}

/// No position to report or to use as a hint (a `Many` set, or nothing changed).
pub(crate) const NO_POS: u32 = u32::MAX;

impl SlotSet {
    /// The set of `slots`, already in key order and without repeats (at least one).
    pub(crate) fn from_sorted(slots: Vec<Slot>) -> SlotSet {
        match slots.len() {
            0 | 1 => SlotSet::One(slots.first().copied().unwrap_or_default()),
            n if n <= FEW_MAX => SlotSet::Few(SharedSlots::from_slice(&slots)),
            _ => SlotSet::Many(Box::new(Chunks::from_sorted(&slots))),
        }
    }

    /// Adds `slot`, whose item's key is `key` (no-op when present).
    pub(crate) fn insert<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        key_of: impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) {
        match self {
            SlotSet::One(s) => {
                if *s == slot {
                    return;
                }
                let pair = if key_of(*s) < Some(key) {
                    [*s, slot]
                } else {
                    [slot, *s]
                };
                *self = SlotSet::Few(SharedSlots::from_slice(&pair));
            }
            SlotSet::Few(slots) => {
                let Err(pos) = slots.binary_search_by(|&s| key_of(s).cmp(&Some(key))) else {
                    return;
                };
                let grown = slots.inserted(pos, slot);
                *self = if grown.len() <= FEW_MAX {
                    SlotSet::Few(grown)
                } else {
                    SlotSet::Many(Box::new(Chunks::from_sorted(&grown)))
                };
            }
            SlotSet::Many(chunks) => chunks.insert(slot, key, &key_of),
        }
    }

    /// Removes `slot` (whose item's key is `key`). `hint` is the position the same slot had in
    /// an identical set, or [`NO_POS`]. Returns the position it had (to log as the other
    /// buffer's hint; [`NO_POS`] for a `Many` set or when absent) and whether the set would now
    /// be empty, in which case `self` is left unchanged and the caller must drop the whole set.
    pub(crate) fn remove<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        hint: u32,
        key_of: impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> (u32, bool) {
        match self {
            SlotSet::One(s) => (NO_POS, *s == slot),
            SlotSet::Few(slots) => {
                let pos = match slots.get(hint as usize) {
                    Some(&s) if s == slot => hint as usize,
                    _ => match slots.iter().position(|&s| s == slot) {
                        Some(pos) => pos,
                        None => return (NO_POS, false),
                    },
                };
                if slots.len() == 2 {
                    *self = SlotSet::One(slots[1 - pos]);
                } else {
                    let shrunk = slots.removed(pos);
                    *self = SlotSet::Few(shrunk);
                }
                (pos as u32, false)
            }
            SlotSet::Many(chunks) => {
                if chunks.len == 1 {
                    return (NO_POS, chunks.find(slot, key, &key_of).is_some());
                }
                if !chunks.remove(slot, key, &key_of) {
                    return (NO_POS, false);
                }
                if chunks.len <= FEW_MIN {
                    let slots: Vec<Slot> = chunks.iter().collect();
                    *self = SlotSet::Few(SharedSlots::from_slice(&slots));
                }
                (NO_POS, false)
            }
        }
    }

    /// Whether `slot` (whose item's key is `key`) is in the set.
    pub(crate) fn contains<'k>(
        &self,
        slot: Slot,
        key: &ObjectKey,
        key_of: impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> bool {
        match self {
            SlotSet::One(s) => *s == slot,
            SlotSet::Few(slots) => slots.contains(&slot),
            SlotSet::Many(chunks) => chunks.find(slot, key, &key_of).is_some(),
        }
    }

    /// Number of slots (at least 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            SlotSet::One(_) => 1,
            SlotSet::Few(slots) => slots.len(),
            SlotSet::Many(chunks) => chunks.len,
        }
    }

    /// The slots in ascending key order.
    pub(crate) fn iter(&self) -> SlotSetIter<'_> {
        match self {
            SlotSet::One(s) => SlotSetIter::Slice(std::slice::from_ref(s).iter()),
            SlotSet::Few(slots) => SlotSetIter::Slice(slots.iter()),
            SlotSet::Many(chunks) => SlotSetIter::Chunks(chunks.iter()),
        }
    }
}

type ChunksIter<'a> = std::iter::Copied<std::iter::Flatten<std::slice::Iter<'a, Vec<Slot>>>>;

/// Iterator over a [`SlotSet`], in key order.
pub(crate) enum SlotSetIter<'a> {
    Slice(std::slice::Iter<'a, Slot>),
    Chunks(ChunksIter<'a>),
}

impl Iterator for SlotSetIter<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        match self {
            SlotSetIter::Slice(it) => it.next().copied(),
            SlotSetIter::Chunks(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: usize) -> ObjectKey {
        ObjectKey::from_raw(&format!("ns/k{i:04}"))
    }

    #[test]
    fn slotset_grows_and_shrinks_through_all_shapes() {
        // Slot i holds key k(perm(i)): slot order differs from key order.
        let n = 600;
        let keys: Vec<ObjectKey> = (0..n).map(|i| k((i * 7919) % n)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let mut set = SlotSet::One(0);
        let mut model = std::collections::BTreeMap::from([(keys[0].clone(), 0u32)]);
        let mut seen_many = false;
        for i in (1..n).map(|i| ((i * 17) % (n - 1)) + 1) {
            let s = i as Slot;
            set.insert(s, &keys[i], key_of);
            set.insert(s, &keys[i], key_of); // idempotent
            model.insert(keys[i].clone(), s);
            seen_many |= matches!(set, SlotSet::Many(_));
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                model.values().copied().collect::<Vec<_>>()
            );
            assert_eq!(set.len(), model.len());
        }
        assert!(seen_many);
        assert_eq!(set.remove(9999, &k(9999), NO_POS, key_of), (NO_POS, false));
        let all: Vec<(ObjectKey, Slot)> = model.iter().map(|(k, &s)| (k.clone(), s)).collect();
        for (n, (key, s)) in all.iter().enumerate() {
            let last = n + 1 == all.len();
            assert_eq!(set.remove(*s, key, NO_POS, key_of).1, last);
            if !last {
                model.remove(key);
                assert!(!set.contains(*s, key, key_of));
                assert_eq!(
                    set.iter().collect::<Vec<_>>(),
                    model.values().copied().collect::<Vec<_>>()
                );
            }
        }
        assert!(matches!(set, SlotSet::One(_)));
    }

    #[test]
    fn a_large_set_splits_and_joins_chunks_in_key_order() {
        // 5 000 keys inserted and removed in scrambled orders, checked against a model.
        let n = 5000usize;
        let keys: Vec<ObjectKey> = (0..n).map(|i| k((i * 7919) % n)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let mut set = SlotSet::One(0);
        let mut model = std::collections::BTreeMap::from([(keys[0].clone(), 0u32)]);
        let check = |set: &SlotSet, model: &std::collections::BTreeMap<ObjectKey, Slot>| {
            assert_eq!(set.len(), model.len());
            assert!(set.iter().eq(model.values().copied()));
        };
        for i in (1..n).map(|i| (i * 3571) % (n - 1) + 1) {
            set.insert(i as Slot, &keys[i], key_of);
            model.insert(keys[i].clone(), i as Slot);
        }
        check(&set, &model);
        let SlotSet::Many(chunks) = &set else {
            panic!("5 000 slots are a chunked set")
        };
        assert!(chunks.chunks.len() > 10);
        assert!(
            chunks
                .chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() <= CHUNK)
        );
        for (key, &s) in &model {
            assert!(set.contains(s, key, key_of));
            assert!(!set.contains(s + 1, key, key_of));
        }
        // Remove all but 3 in another scrambled order, checking as it shrinks.
        for (step, i) in (0..n).map(|i| (i * 3001) % n).enumerate().take(n - 3) {
            let (_, empty) = set.remove(i as Slot, &keys[i], NO_POS, key_of);
            assert!(!empty);
            model.remove(&keys[i]);
            if step % 97 == 0 {
                check(&set, &model);
            }
            if let SlotSet::Many(c) = &set {
                assert!(c.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
            }
        }
        check(&set, &model);
        assert!(matches!(set, SlotSet::Few(_)));
    }

    #[test]
    fn a_set_is_at_most_16_bytes() {
        // One per index value: a UID index has one per object, in each of two buffers.
        assert!(std::mem::size_of::<SlotSet>() <= 16);
    }

    #[test]
    fn slotset_remove_hints_replay_the_same_positions() {
        let keys: Vec<ObjectKey> = (0..50).map(|i| k((i * 31) % 50)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let (mut a, mut b) = (SlotSet::One(0), SlotSet::One(0));
        for s in 1..50u32 {
            a.insert(s, &keys[s as usize], key_of);
            b.insert(s, &keys[s as usize], key_of);
        }
        for s in (0..49u32).step_by(3) {
            let (pos, _) = a.remove(s, &keys[s as usize], NO_POS, key_of);
            assert_ne!(pos, NO_POS);
            assert_eq!(b.remove(s, &keys[s as usize], pos, |_| None), (pos, false));
        }
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
    }
}
