//! The queue under a filter (an informer's `set_filter`): watch changes as a filter judged
//! them ([`DeltaFifo::apply_judged`]), and deletions of every key whose newest state the
//! filter no longer keeps ([`DeltaFifo::delete_unless`], after the filter's answer changed).

use std::sync::Arc;

use super::delta::{Delta, DeltaType};
use super::queue::DeltaFifo;
use super::state::{Inner, Shared};
use crate::object::{KeySet, Object, ObjectKey};

impl DeltaFifo {
    /// Queues watch changes as [`apply_changes`](Self::apply_changes) does, after `keep`
    /// judged them: an added or updated object `keep` rejects is queued as a
    /// [`DeltaType::Deleted`] delta carrying it when its key is *live* (its newest queued
    /// delta is not a deletion, or nothing is queued and it is known), and dropped otherwise.
    /// A deletion of a key neither queued nor known is ignored as always; in a
    /// [`FifoKind::RealFifo`](super::FifoKind::RealFifo), one of a key whose newest queued
    /// change is already a deletion is too (the per-key queue collapses the two instead), so
    /// a key a filter dropped and the server then deleted is deleted once.
    ///
    /// `keep` runs before the queue's lock is taken.
    pub(crate) fn apply_judged(
        &self,
        changes: impl IntoIterator<Item = (DeltaType, Arc<Object>)>,
        keep: impl Fn(&Object) -> bool,
    ) {
        let judged: Vec<(DeltaType, ObjectKey, Arc<Object>, bool)> = changes
            .into_iter()
            .map(|(kind, obj)| {
                let rejected = matches!(kind, DeltaType::Added | DeltaType::Updated) && !keep(&obj);
                (kind, obj.key(), obj, rejected)
            })
            .collect();
        let mut inner = self.shared.lock();
        let mut wake = false;
        for (kind, key, obj, rejected) in judged {
            let kind = if rejected { DeltaType::Deleted } else { kind };
            if kind == DeltaType::Deleted {
                let relevant = if rejected || inner.in_order.is_some() {
                    newest_state(&self.shared, &inner, &key).is_some()
                } else {
                    inner.is_queued(&key) || self.shared.known_get(&inner, &key).is_some()
                };
                if !relevant {
                    continue;
                }
            }
            wake |= inner.enqueue(key, Delta::new(kind, obj));
        }
        self.wake(inner, wake);
    }

    /// Queues a [`DeltaType::Deleted`] delta for every key queued or known (see
    /// [`KnownObjects`](super::KnownObjects)) whose newest state `keep` rejects; the delta
    /// carries that state (the object itself, not a tombstone: the consumer held it). A key
    /// whose newest queued delta is already a deletion is left alone. Returns how many
    /// deletions were queued.
    ///
    /// `keep` runs without the queue's lock (pops go on meanwhile). A key whose newest state
    /// changed while it ran (another resourceVersion or uid queued by a producer) is left
    /// alone: `keep` never saw that state. A caller that must not miss such a key keeps its
    /// producers out for the duration (an informer holds its filter lock).
    pub fn delete_unless(&self, keep: impl Fn(&Object) -> bool) -> usize {
        let candidates: Vec<(ObjectKey, Arc<Object>)> = {
            let inner = self.shared.lock();
            let mut keys: KeySet = self.shared.known_keys(&inner).into_iter().collect();
            match &inner.in_order {
                Some(q) => keys.extend(q.queued_keys().cloned()),
                None => keys.extend(inner.queue.iter().cloned()),
            }
            keys.into_iter()
                .filter_map(|k| newest_state(&self.shared, &inner, &k).map(|o| (k, o)))
                .collect()
        };
        let rejected: Vec<(ObjectKey, Arc<Object>)> =
            candidates.into_iter().filter(|(_, o)| !keep(o)).collect();
        if rejected.is_empty() {
            return 0;
        }
        let mut inner = self.shared.lock();
        let mut wake = false;
        let mut queued = 0;
        for (key, seen) in rejected {
            // Still the state `keep` judged (the consumer may have applied or compacted it
            // meanwhile: same uid and resourceVersion).
            let Some(now) = newest_state(&self.shared, &inner, &key) else {
                continue;
            };
            if now.uid() != seen.uid() || now.resource_version() != seen.resource_version() {
                continue;
            }
            wake |= inner.enqueue(key, Delta::new(DeltaType::Deleted, now));
            queued += 1;
        }
        self.wake(inner, wake);
        queued
    }
}

/// The newest state of `key`: its newest queued object (`None` when that is a deletion), else
/// the known object (in-flight batches applied).
fn newest_state(shared: &Shared, inner: &Inner, key: &ObjectKey) -> Option<Arc<Object>> {
    if !inner.is_queued(key) {
        return shared.known_get(inner, key);
    }
    match &inner.in_order {
        Some(q) => q.newest(key),
        None => inner
            .items
            .get(key)
            .and_then(|d| d.newest())
            .filter(|d| d.kind != DeltaType::Deleted)
            .map(|d| d.object.object().clone()),
    }
}

#[cfg(test)]
mod tests {
    use crate::object::ObjectMetaFields;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::fifo::{FifoKind, KnownObjects};
    use crate::object::{Encoding, GroupVersionKind, ObjectMeta};

    fn obj(name: &str, rv: &str) -> Arc<Object> {
        let meta = ObjectMeta::from(ObjectMetaFields {
            name: name.into(),
            namespace: "ns".into(),
            resource_version: rv.into(),
            uid: format!("uid-{name}").as_str().into(),
            ..Default::default()
        });
        Arc::new(Object::from_parts(
            Arc::new(GroupVersionKind::default()),
            meta,
            bytes::Bytes::new(),
            Encoding::Json,
        ))
    }

    /// Every popped key with its delta kinds and the newest object's resourceVersion.
    fn drain(q: &DeltaFifo) -> Vec<(String, Vec<DeltaType>, String)> {
        let batch = q.try_pop_batch(100).unwrap();
        batch
            .iter()
            .map(|kd| {
                let kinds = kd.deltas.iter().map(|d| d.kind).collect();
                let rv = kd
                    .deltas
                    .newest()
                    .unwrap()
                    .object
                    .object()
                    .resource_version();
                (kd.key.as_str().to_owned(), kinds, rv.to_owned())
            })
            .collect()
    }

    #[test]
    fn rejected_known_and_queued_keys_are_deleted_with_their_newest_state() {
        for kind in [FifoKind::DeltaFifo, FifoKind::RealFifo] {
            let known: Arc<Mutex<BTreeMap<ObjectKey, Arc<Object>>>> = Arc::default();
            for (n, rv) in [("kept", "1"), ("gone", "2"), ("updated", "3")] {
                let o = obj(n, rv);
                known.lock().unwrap().insert(o.key(), o);
            }
            let q = DeltaFifo::builder()
                .kind(kind)
                .known_objects(known.clone() as Arc<dyn KnownObjects>)
                .build();
            q.update(obj("updated", "4"));
            q.add(obj("new", "5"));
            q.add(obj("deleting", "6"));
            q.delete(obj("deleting", "7"));
            let judged = Mutex::new(Vec::new());
            let n = q.delete_unless(|o| {
                judged
                    .lock()
                    .unwrap()
                    .push(format!("{}@{}", o.name(), o.resource_version()));
                o.name() == "kept"
            });
            let mut judged = judged.into_inner().unwrap();
            judged.sort();
            // Each key once, at its newest state; the one on its way out not at all.
            assert_eq!(
                judged,
                ["gone@2", "kept@1", "new@5", "updated@4"],
                "{kind:?}"
            );
            assert_eq!(n, 3, "{kind:?}");
            let mut popped = Vec::new();
            while !q.is_empty() {
                popped.extend(drain(&q));
            }
            let deleted: BTreeMap<String, String> = popped
                .iter()
                .filter(|(_, kinds, _)| kinds.last() == Some(&DeltaType::Deleted))
                .map(|(k, _, rv)| (k.clone(), rv.clone()))
                .collect();
            let expected: BTreeMap<String, String> = [
                ("ns/gone", "2"),
                ("ns/updated", "4"),
                ("ns/new", "5"),
                ("ns/deleting", "7"),
            ]
            .into_iter()
            .map(|(k, rv)| (k.to_owned(), rv.to_owned()))
            .collect();
            assert_eq!(deleted, expected, "{kind:?}: {popped:?}");
            assert!(
                popped.iter().all(|(k, _, _)| k != "ns/kept"),
                "{kind:?}: nothing queued for the kept key: {popped:?}"
            );
        }
    }

    #[test]
    fn judged_changes_delete_a_live_key_once_and_drop_the_rest() {
        for kind in [FifoKind::DeltaFifo, FifoKind::RealFifo] {
            let known: Arc<Mutex<BTreeMap<ObjectKey, Arc<Object>>>> = Arc::default();
            let cached = obj("cached", "1");
            known.lock().unwrap().insert(cached.key(), cached);
            let q = DeltaFifo::builder()
                .kind(kind)
                .known_objects(known.clone() as Arc<dyn KnownObjects>)
                .build();
            let keep = |o: &Object| o.resource_version() != "out";
            q.apply_judged(
                [
                    // The cached key stops matching, twice, then the server deletes it.
                    (DeltaType::Updated, obj("cached", "out")),
                    (DeltaType::Updated, obj("cached", "out")),
                    (DeltaType::Deleted, obj("cached", "4")),
                    // Never seen and rejected: dropped; never seen and deleted: ignored.
                    (DeltaType::Added, obj("stranger", "out")),
                    (DeltaType::Deleted, obj("ghost", "5")),
                    // Accepted, then rejected: added, then deleted.
                    (DeltaType::Added, obj("brief", "6")),
                    (DeltaType::Updated, obj("brief", "out")),
                ],
                keep,
            );
            let mut popped = Vec::new();
            while !q.is_empty() {
                popped.extend(drain(&q));
            }
            let kinds = |key: &str| -> Vec<DeltaType> {
                popped
                    .iter()
                    .filter(|(k, _, _)| k == key)
                    .flat_map(|(_, kinds, _)| kinds.clone())
                    .collect()
            };
            assert_eq!(kinds("ns/cached"), [DeltaType::Deleted], "{kind:?}");
            assert_eq!(
                kinds("ns/brief"),
                [DeltaType::Added, DeltaType::Deleted],
                "{kind:?}"
            );
            assert!(kinds("ns/stranger").is_empty(), "{kind:?}");
            assert!(kinds("ns/ghost").is_empty(), "{kind:?}");
        }
    }

    #[test]
    fn nothing_known_nothing_queued() {
        let q = DeltaFifo::new();
        assert_eq!(q.delete_unless(|_| false), 0);
        assert!(q.is_empty());
    }
}
