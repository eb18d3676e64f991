//! The queue of an [`OverflowPolicy::CoalesceByKey`](super::OverflowPolicy::CoalesceByKey)
//! listener: at most one pending notification per key.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crossbeam::channel::{Receiver, Sender, TrySendError, bounded};

use super::Notification;
use super::listener::ReachOnDrop;
use super::metrics::Metrics;
use crate::object::ObjectKey;

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
    entries: HashMap<ObjectKey, Pending>,
    /// Keys in first-pending order with the sequence number of the entry they were pushed for;
    /// a slot whose entry was merged away (or replaced by a newer one) is skipped.
    order: VecDeque<(ObjectKey, u64)>,
    next_seq: u64,
    markers: Vec<ReachOnDrop>,
    stopped: bool,
}

struct Pending {
    seq: u64,
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

    /// Merges `batch` into the pending notifications.
    pub(crate) fn push(&self, batch: &[Notification], metrics: &Metrics) {
        let mut merged_away = 0;
        {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.stopped {
                return;
            }
            for n in batch {
                let key = n.key();
                let seq = st.next_seq;
                match st.entries.entry(key) {
                    Entry::Vacant(e) => {
                        st.order.push_back((e.key().clone(), seq));
                        e.insert(Pending { seq, n: n.clone() });
                        st.next_seq += 1;
                    }
                    Entry::Occupied(mut e) => match merge(&e.get().n, n) {
                        Some(m) => {
                            e.get_mut().n = m;
                            merged_away += 1;
                        }
                        None => {
                            e.remove();
                            merged_away += 2;
                        }
                    },
                }
            }
        }
        if merged_away > 0 {
            metrics.coalesced.fetch_add(merged_away, Ordering::Relaxed);
        }
        self.ring();
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

/// The one notification equivalent to `pending` followed by `new` for a listener that has seen
/// neither, or `None` when together they amount to nothing (an add then a delete).
fn merge(pending: &Notification, new: &Notification) -> Option<Notification> {
    use Notification::{Add, Delete, Update};
    Some(match (pending, new) {
        // The listener never saw the pending add: it is still an add, of the newest state.
        (
            Add {
                is_in_initial_list, ..
            },
            Add { obj, .. } | Update { new: obj, .. },
        ) => Add {
            obj: obj.clone(),
            is_in_initial_list: *is_in_initial_list,
        },
        (Add { .. }, Delete { .. }) => return None,
        // The listener holds `old`: it moves to the newest state.
        (Update { old, .. }, Add { obj: new, .. } | Update { new, .. }) => Update {
            old: old.clone(),
            new: new.clone(),
        },
        (Update { .. } | Delete { .. }, Delete { obj }) => Delete { obj: obj.clone() },
        // Deleted then created again under the same key: an update from what the listener
        // last held (delete + recreate can surface as an update, as in client-go).
        (Delete { obj: old }, Add { obj: new, .. } | Update { new, .. }) => Update {
            old: old.object().clone(),
            new: new.clone(),
        },
    })
}
