//! [`SlotSet`]: the items indexed under one index value, as slab slots in key order.

use std::collections::BTreeMap;

use crate::object::ObjectKey;

/// Position of an item in a store buffer's slab (see `version/mod.rs`): the same number in both
/// buffers of a store, so index entries and logged changes name items by it.
pub(crate) type Slot = u32;

/// Sets above this many slots move to a B-tree.
const FEW_MAX: usize = 256;
/// B-tree sets at or below this many slots move back to a sorted vector (hysteresis, so that a
/// set oscillating around one size does not convert on every write).
const FEW_MIN: usize = 128;

/// The items indexed under one value, as slots sorted by their items' keys. Never empty: the
/// value is removed from its index when its last item goes.
///
/// Three shapes, because most index values hold one item (UID, owner) or a few hundred at most
/// (a namespace), and a B-tree node costs hundreds of bytes:
/// - `One`: a single slot, no allocation;
/// - `Few`: a vector of at most [`FEW_MAX`] slots in key order (4 bytes each; an insertion
///   finds its place by binary search over the items' keys and moves at most that many);
/// - `Many`: a B-tree from key to slot, O(log n) per insert/remove.
///
/// Reading a set never touches a key: `by_index` goes from slot to object directly. Methods
/// that need keys take `key_of`, the buffer's slot → key lookup.
#[derive(Clone, Debug)]
pub(crate) enum SlotSet {
    One(Slot),
    Few(Vec<Slot>),
    Many(BTreeMap<ObjectKey, Slot>),
}

/// No position to report or to use as a hint (a `Many` set, or nothing changed).
pub(crate) const NO_POS: u32 = u32::MAX;

impl SlotSet {
    /// Adds `slot`, whose item's key is `key` (no-op when present). `hint` is where the same
    /// insertion went in an identical set (from the other buffer's log) together with that
    /// set's length before it, or `None`. Returns the position and the length before, to log
    /// as the hint for the other buffer (`(NO_POS, 0)` when there is none).
    pub(crate) fn insert<'k>(
        &mut self,
        slot: Slot,
        key: &ObjectKey,
        hint: Option<(u32, u32)>,
        key_of: impl Fn(Slot) -> Option<&'k ObjectKey>,
    ) -> (u32, u32) {
        match self {
            SlotSet::One(s) => {
                if *s == slot {
                    return (NO_POS, 0);
                }
                let (v, pos) = if key_of(*s) < Some(key) {
                    (vec![*s, slot], 1)
                } else {
                    (vec![slot, *s], 0)
                };
                *self = SlotSet::Few(v);
                (pos, 1)
            }
            SlotSet::Few(slots) => {
                let len = slots.len();
                let pos = match hint {
                    Some((pos, hint_len)) if hint_len as usize == len && (pos as usize) <= len => {
                        pos as usize
                    }
                    _ => {
                        let Err(pos) = slots.binary_search_by(|&s| key_of(s).cmp(&Some(key)))
                        else {
                            return (NO_POS, 0);
                        };
                        pos
                    }
                };
                if len < FEW_MAX {
                    slots.insert(pos, slot);
                    (pos as u32, len as u32)
                } else {
                    let mut map: BTreeMap<ObjectKey, Slot> = slots
                        .iter()
                        .filter_map(|&s| key_of(s).map(|k| (k.clone(), s)))
                        .collect();
                    map.insert(key.clone(), slot);
                    *self = SlotSet::Many(map);
                    (NO_POS, 0)
                }
            }
            SlotSet::Many(map) => {
                if !map.contains_key(key) {
                    map.insert(key.clone(), slot);
                }
                (NO_POS, 0)
            }
        }
    }

    /// Removes `slot` (whose item's key is `key`). `hint` is the position the same slot had in
    /// an identical set, or [`NO_POS`]. Returns the position it had (to log as the other
    /// buffer's hint; [`NO_POS`] for a `Many` set or when absent) and whether the set would now
    /// be empty, in which case `self` is left unchanged and the caller must drop the whole set.
    pub(crate) fn remove(&mut self, slot: Slot, key: &ObjectKey, hint: u32) -> (u32, bool) {
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
                    slots.remove(pos);
                    if slots.capacity() > 2 * slots.len() + 4 {
                        slots.shrink_to_fit();
                    }
                }
                (pos as u32, false)
            }
            SlotSet::Many(map) => {
                if map.get(key) != Some(&slot) {
                    return (NO_POS, false);
                }
                if map.len() == 1 {
                    return (NO_POS, true);
                }
                map.remove(key);
                if map.len() <= FEW_MIN {
                    let slots: Vec<Slot> = std::mem::take(map).into_values().collect();
                    *self = SlotSet::Few(slots);
                }
                (NO_POS, false)
            }
        }
    }

    /// Whether `slot` (whose item's key is `key`) is in the set.
    pub(crate) fn contains(&self, slot: Slot, key: &ObjectKey) -> bool {
        match self {
            SlotSet::One(s) => *s == slot,
            SlotSet::Few(slots) => slots.contains(&slot),
            SlotSet::Many(map) => map.get(key) == Some(&slot),
        }
    }

    /// Number of slots (at least 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            SlotSet::One(_) => 1,
            SlotSet::Few(slots) => slots.len(),
            SlotSet::Many(map) => map.len(),
        }
    }

    /// The slots in ascending key order.
    pub(crate) fn iter(&self) -> SlotSetIter<'_> {
        match self {
            SlotSet::One(s) => SlotSetIter::Slice(std::slice::from_ref(s).iter()),
            SlotSet::Few(slots) => SlotSetIter::Slice(slots.iter()),
            SlotSet::Many(map) => SlotSetIter::Tree(map.values()),
        }
    }
}

/// Iterator over a [`SlotSet`], in key order.
pub(crate) enum SlotSetIter<'a> {
    Slice(std::slice::Iter<'a, Slot>),
    Tree(std::collections::btree_map::Values<'a, ObjectKey, Slot>),
}

impl Iterator for SlotSetIter<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        match self {
            SlotSetIter::Slice(it) => it.next().copied(),
            SlotSetIter::Tree(it) => it.next().copied(),
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
            set.insert(s, &keys[i], None, key_of);
            set.insert(s, &keys[i], None, key_of); // idempotent
            model.insert(keys[i].clone(), s);
            seen_many |= matches!(set, SlotSet::Many(_));
            assert_eq!(
                set.iter().collect::<Vec<_>>(),
                model.values().copied().collect::<Vec<_>>()
            );
            assert_eq!(set.len(), model.len());
        }
        assert!(seen_many);
        assert_eq!(set.remove(9999, &k(9999), NO_POS), (NO_POS, false));
        let all: Vec<(ObjectKey, Slot)> = model.iter().map(|(k, &s)| (k.clone(), s)).collect();
        for (n, (key, s)) in all.iter().enumerate() {
            let last = n + 1 == all.len();
            assert_eq!(set.remove(*s, key, NO_POS).1, last);
            if !last {
                model.remove(key);
                assert!(!set.contains(*s, key));
                assert_eq!(
                    set.iter().collect::<Vec<_>>(),
                    model.values().copied().collect::<Vec<_>>()
                );
            }
        }
        assert!(matches!(set, SlotSet::One(_)));
    }

    #[test]
    fn slotset_hints_replay_the_same_positions() {
        let keys: Vec<ObjectKey> = (0..50).map(|i| k((i * 31) % 50)).collect();
        let key_of = |s: Slot| keys.get(s as usize);
        let (mut a, mut b) = (SlotSet::One(0), SlotSet::One(0));
        for s in 1..50u32 {
            let hint = a.insert(s, &keys[s as usize], None, key_of);
            let hint = (hint.0 != NO_POS).then_some(hint);
            b.insert(s, &keys[s as usize], hint, |_| None);
        }
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
        for s in (0..49u32).step_by(3) {
            let (pos, _) = a.remove(s, &keys[s as usize], NO_POS);
            assert_ne!(pos, NO_POS);
            assert_eq!(b.remove(s, &keys[s as usize], pos), (pos, false));
        }
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
    }
}
