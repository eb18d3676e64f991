//! The queue of an [`OverflowPolicy::CoalesceByKey`](super::OverflowPolicy::CoalesceByKey)
//! listener: at most one pending notification per key.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crossbeam::channel::{Receiver, Sender, TrySendError, bounded};

use super::Notification;
use super::marker::ReachOnDrop;
use super::metrics::Metrics;
use crate::object::{KeyMap, Object, ObjectKey};

/// Pending notifications keyed by object, in order of each key's first pending notification.
/// The publisher merges into it under a short lock; the listener thread swaps the whole content
/// out under the same lock and handles it without the lock. Swapping leaves empty collections
/// behind, so the memory of a drained backlog goes back to the allocator.
pub(crate) struct CoalesceQueue {
    state: Mutex<State>,
    /// Capacity one: a token means "look at the state".
    doorbell: Sender<()>,
}

#[derive(Default)]
struct State {
    entries: KeyMap<Pending>,
    /// Keys in first-pending order with the sequence number of the entry they were pushed for;
    /// a slot whose entry was merged away (or replaced by a newer one) is skipped.
    order: VecDeque<(ObjectKey, u64)>,
    next_seq: u64,
    markers: Vec<ReachOnDrop>,
    stopped: bool,
}

struct Pending {
    seq: u64,
    /// What the listener holds for this key before `n` (`None`: nothing), kept across merges
    /// so that a merged update starts from the state the listener really has.
    held: Option<Arc<Object>>,
    n: Notification,
}

/// What the listener takes out in one go.
pub(crate) struct Taken {
    pub(crate) items: Vec<Notification>,
    pub(crate) markers: Vec<ReachOnDrop>,
    pub(crate) stopped: bool,
}

impl CoalesceQueue {
    pub(crate) fn new() -> (Self, Receiver<()>) {
        let (doorbell, rx) = bounded(1);
        (
            CoalesceQueue {
                state: Mutex::new(State::default()),
                doorbell,
            },
            rx,
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ring(&self) {
        match self.doorbell.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// Merges `batch` into the pending notifications; `false` (and nothing queued) once the
    /// queue is stopped.
    pub(crate) fn push(&self, batch: &[Notification], metrics: &Metrics) -> bool {
        let mut merged_away = 0;
        {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.stopped {
                return false;
            }
            for n in batch {
                let key = n.key();
                let seq = st.next_seq;
                match st.entries.entry(key) {
                    Entry::Vacant(e) => {
                        st.order.push_back((e.key().clone(), seq));
                        e.insert(Pending {
                            seq,
                            held: held_before(n),
                            n: n.clone(),
                        });
                        st.next_seq += 1;
                    }
                    Entry::Occupied(mut e) => {
                        let p = e.get();
                        match merge(p.held.as_ref(), &p.n, n) {
                            Some(m) => {
                                e.get_mut().n = m;
                                merged_away += 1;
                            }
                            None => {
                                e.remove();
                                merged_away += 2;
                            }
                        }
                    }
                }
            }
            // Slots of entries merged away stay in `order` until taken; keys that come and go
            // while the listener is blocked would grow it without bound: drop them.
            if st.order.len() > 2 * st.entries.len() + 1024 {
                let State { entries, order, .. } = st;
                order.retain(|(k, seq)| entries.get(k).is_some_and(|p| p.seq == *seq));
            }
        }
        if merged_away > 0 {
            metrics.coalesced.fetch_add(merged_away, Ordering::Relaxed);
        }
        self.ring();
        true
    }

    /// Reached once everything pending now has been handled (or the listener stopped).
    pub(crate) fn push_marker(&self, marker: ReachOnDrop) {
        let mut st = self.lock();
        if st.stopped {
            return; // dropping reaches it
        }
        st.markers.push(marker);
        drop(st);
        self.ring();
    }

    /// The listener handles what is pending, then stops.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.ring();
    }

    pub(crate) fn take(&self) -> Taken {
        let (mut entries, order, markers, stopped) = {
            let mut st = self.lock();
            (
                mem::take(&mut st.entries),
                mem::take(&mut st.order),
                mem::take(&mut st.markers),
                st.stopped,
            )
        };
        let mut items = Vec::with_capacity(entries.len());
        for (key, seq) in order {
            if let Entry::Occupied(e) = entries.entry(key)
                && e.get().seq == seq
            {
                items.push(e.remove().n);
            }
        }
        Taken {
            items,
            markers,
            stopped,
        }
    }
}

/// What a listener holds for a key before `first`, the first pending notification of the key.
fn held_before(first: &Notification) -> Option<Arc<Object>> {
    match first {
        Notification::Add { .. } => None,
        Notification::Update { old, .. } => Some(old.clone()),
        Notification::Delete { obj } => Some(obj.object().clone()),
    }
}

/// The one notification that takes a listener holding `held` (for a key whose pending
/// notification is `pending`) to the state after `new`, or `None` when that is nothing (it
/// held nothing and the key is gone again).
fn merge(
    held: Option<&Arc<Object>>,
    pending: &Notification,
    new: &Notification,
) -> Option<Notification> {
    use Notification::{Add, Delete, Update};
    Some(match (held, new) {
        (None, Delete { .. }) => return None,
        (Some(_), Delete { obj }) => Delete { obj: obj.clone() },
        // The listener holds nothing: still an add (the pending one is an add), of the newest
        // state.
        (None, Add { obj, .. } | Update { new: obj, .. }) => Add {
            obj: obj.clone(),
            is_in_initial_list: matches!(
                pending,
                Add {
                    is_in_initial_list: true,
                    ..
                }
            ),
        },
        // The listener holds `old`: it moves to the newest state, even across a delete and a
        // re-creation (which can surface as an update, as in client-go).
        (Some(old), Add { obj: new, .. } | Update { new, .. }) => Update {
            old: old.clone(),
            new: new.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use crate::object::ObjectMetaFields;
    use bytes::Bytes;

    use super::*;
    use crate::fifo::DeltaObject;
    use crate::object::{Encoding, GroupVersionKind, ObjectMeta};

    fn obj(name: &str, rv: u64) -> Arc<Object> {
        let meta = ObjectMeta::from(ObjectMetaFields {
            name: name.to_owned().into(),
            namespace: "ns".to_owned().into(),
            resource_version: rv.to_string().into(),
            ..Default::default()
        });
        Arc::new(Object::from_parts(
            Arc::new(GroupVersionKind::new("", "v1", "Pod")),
            meta,
            Bytes::new(),
            Encoding::Json,
        ))
    }

    /// Short-lived keys (created and deleted while the listener is behind) leave nothing
    /// pending, and their slots in the delivery order do not pile up either.
    #[test]
    fn keys_that_come_and_go_while_behind_keep_memory_bounded() {
        let (q, _doorbell) = CoalesceQueue::new();
        let metrics = Metrics::default();
        for i in 0..100_000u64 {
            let name = format!("job-{}", i % 7);
            let o = obj(&name, i);
            q.push(
                &[
                    Notification::Add {
                        obj: o.clone(),
                        is_in_initial_list: false,
                    },
                    Notification::Delete {
                        obj: DeltaObject::Object(o),
                    },
                ],
                &metrics,
            );
            let st = q.lock();
            assert!(st.entries.is_empty());
            assert!(
                st.order.len() <= 2 * st.entries.len() + 1024 + 2,
                "order holds {} slots for {} entries",
                st.order.len(),
                st.entries.len()
            );
        }
        assert_eq!(metrics.coalesced.load(Ordering::Relaxed), 200_000);
        // A key still pending survives the compaction and is delivered once.
        let kept = obj("kept", 1);
        q.push(
            &[Notification::Add {
                obj: kept.clone(),
                is_in_initial_list: false,
            }],
            &metrics,
        );
        for i in 0..5_000u64 {
            let o = obj("gone", i);
            q.push(
                &[
                    Notification::Add {
                        obj: o.clone(),
                        is_in_initial_list: false,
                    },
                    Notification::Delete {
                        obj: DeltaObject::Object(o),
                    },
                ],
                &metrics,
            );
        }
        let taken = q.take();
        assert_eq!(taken.items.len(), 1);
        assert_eq!(taken.items[0].key(), kept.key());
    }

    /// Update, delete, re-create while behind: one update from the state the listener holds.
    #[test]
    fn merged_update_starts_from_the_state_the_listener_holds() {
        let (q, _doorbell) = CoalesceQueue::new();
        let metrics = Metrics::default();
        q.push(
            &[
                Notification::Update {
                    old: obj("k", 1),
                    new: obj("k", 2),
                },
                Notification::Delete {
                    obj: DeltaObject::Object(obj("k", 2)),
                },
                Notification::Add {
                    obj: obj("k", 3),
                    is_in_initial_list: false,
                },
                Notification::Update {
                    old: obj("k", 3),
                    new: obj("k", 4),
                },
            ],
            &metrics,
        );
        let taken = q.take();
        assert_eq!(taken.items.len(), 1);
        match &taken.items[0] {
            Notification::Update { old, new } => {
                assert_eq!(old.resource_version(), "1");
                assert_eq!(new.resource_version(), "4");
            }
            other => panic!("expected an update, got {other:?}"),
        }
        // Delete then add then delete: a delete of what it holds.
        q.push(
            &[
                Notification::Delete {
                    obj: DeltaObject::Object(obj("d", 5)),
                },
                Notification::Add {
                    obj: obj("d", 6),
                    is_in_initial_list: false,
                },
                Notification::Delete {
                    obj: DeltaObject::Object(obj("d", 6)),
                },
            ],
            &metrics,
        );
        let taken = q.take();
        assert_eq!(taken.items.len(), 1);
        assert!(
            matches!(&taken.items[0], Notification::Delete { obj } if obj.object().resource_version() == "6")
        );
    }
}
