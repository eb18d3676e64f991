//! The queue of a [`FifoKind::RealFifo`](super::FifoKind::RealFifo): every change its own
//! entry, in arrival order, no per-key merging (client-go `tools/cache/the_real_fifo.go`);
//! a relist's entries form one group, popped as one batch (client-go's `AtomicFIFO`
//! `ReplacedAll`).

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::delta::{Delta, DeltaType};
use super::room::GiveBackRoom;
use crate::object::{KeyMap, KeySet, Object, ObjectKey};

/// One queued change; `group` is non-zero for the entries of one relist.
#[derive(Debug)]
struct Queued {
    key: ObjectKey,
    delta: Delta,
    group: u64,
}

/// Entries in arrival order, with per-key counts (for "is this key queued" and "its newest
/// queued object" in O(1)).
#[derive(Debug, Default)]
pub(super) struct InOrder {
    entries: VecDeque<Queued>,
    /// Per queued key: how many entries, and the newest one's object (`None` when it is a
    /// deletion: the key is on its way out).
    keys: KeyMap<(usize, Option<Arc<Object>>)>,
    next_group: u64,
}

impl InOrder {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_queued(&self, key: &ObjectKey) -> bool {
        self.keys.contains_key(key)
    }

    /// The object of `key`'s newest queued change, unless that change is a deletion.
    pub(super) fn newest(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.keys.get(key).and_then(|(_, o)| o.clone())
    }

    pub(super) fn queued_keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.keys.keys()
    }

    pub(super) fn keys_in_order(&self) -> Vec<ObjectKey> {
        self.entries.iter().map(|q| q.key.clone()).collect()
    }

    /// A fresh group id for the entries of one relist.
    pub(super) fn new_group(&mut self) -> u64 {
        self.next_group += 1;
        self.next_group
    }

    /// Appends one change (`group` 0 outside a relist).
    pub(super) fn push(&mut self, key: ObjectKey, delta: Delta, group: u64) {
        let obj = (delta.kind != DeltaType::Deleted).then(|| delta.object.object().clone());
        match self.keys.entry(key.clone()) {
            Entry::Occupied(mut e) => {
                let (n, newest) = e.get_mut();
                *n += 1;
                *newest = obj;
            }
            Entry::Vacant(e) => {
                e.insert((1, obj));
            }
        }
        self.entries.push_back(Queued { key, delta, group });
    }

    /// Takes the next batch: a whole relist group when one is first (whatever `max`), else up
    /// to `max` (at least one) entries outside groups, stopping before a key repeats (client-go
    /// `PopBatch`: a batch never holds two changes of one key).
    pub(super) fn take(&mut self, max: usize) -> Vec<(ObjectKey, Delta)> {
        let mut out = Vec::new();
        let Some(first) = self.entries.front() else {
            return out;
        };
        let group = first.group;
        let mut seen = KeySet::default();
        while let Some(front) = self.entries.front() {
            let fits = if group != 0 {
                front.group == group
            } else {
                front.group == 0 && out.len() < max.max(1) && !seen.contains(&front.key)
            };
            if !fits {
                break;
            }
            let q = self.entries.pop_front().expect("front exists");
            if group == 0 {
                seen.insert(q.key.clone());
            }
            if let Entry::Occupied(mut e) = self.keys.entry(q.key.clone()) {
                e.get_mut().0 -= 1;
                if e.get().0 == 0 {
                    e.remove();
                }
            }
            out.push((q.key, q.delta));
        }
        self.entries.give_back_room();
        self.keys.give_back_room();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectMetaFields;
    use crate::object::{Encoding, GroupVersionKind, ObjectMeta};

    fn obj(name: &str, rv: &str) -> Arc<Object> {
        let meta = ObjectMeta::from(ObjectMetaFields {
            name: name.into(),
            namespace: "ns".into(),
            resource_version: rv.into(),
            ..Default::default()
        });
        Arc::new(Object::from_parts(
            Arc::new(GroupVersionKind::default()),
            meta,
            bytes::Bytes::new(),
            Encoding::Json,
        ))
    }

    fn push(q: &mut InOrder, name: &str, rv: &str, group: u64) {
        let o = obj(name, rv);
        q.push(o.key(), Delta::new(DeltaType::Updated, o), group);
    }

    fn names(batch: &[(ObjectKey, Delta)]) -> Vec<String> {
        batch
            .iter()
            .map(|(k, d)| format!("{}@{}", k.as_str(), d.object.object().resource_version()))
            .collect()
    }

    #[test]
    fn batches_keep_order_never_repeat_a_key_and_take_a_relist_whole() {
        let mut q = InOrder::default();
        push(&mut q, "a", "1", 0);
        push(&mut q, "b", "2", 0);
        push(&mut q, "a", "3", 0);
        let g = q.new_group();
        for (n, rv) in [("a", "4"), ("b", "4"), ("c", "4")] {
            push(&mut q, n, rv, g);
        }
        push(&mut q, "c", "5", 0);
        assert_eq!(q.len(), 7);
        assert!(q.is_queued(&obj("a", "").key()));
        assert_eq!(
            q.newest(&obj("a", "").key()).unwrap().resource_version(),
            "4"
        );

        assert_eq!(
            names(&q.take(10)),
            ["ns/a@1", "ns/b@2"],
            "stops before a repeats"
        );
        assert_eq!(names(&q.take(10)), ["ns/a@3"], "stops at the relist");
        assert_eq!(
            names(&q.take(1)),
            ["ns/a@4", "ns/b@4", "ns/c@4"],
            "the relist whole, whatever max"
        );
        assert_eq!(names(&q.take(10)), ["ns/c@5"]);
        assert!(q.take(10).is_empty());
        assert!(!q.is_queued(&obj("a", "").key()), "counts go back to zero");
        assert_eq!(q.queued_keys().count(), 0);
    }
}
