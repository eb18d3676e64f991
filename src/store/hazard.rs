//! Hazard slots: how a [`Store`](super::Store) call reads the published buffer without touching
//! a shared reference count. Each thread owns a few slots in a process-wide list; a call
//! announces the buffer it is about to read in one of its slots, checks that the buffer is still
//! the published one, reads, and clears the slot. The writer, before it writes or frees a
//! buffer it has unpublished, waits until no slot announces it (`super::sync::wait_unique`).
//!
//! The announcement and the writer's check are ordered by two `SeqCst` fences (store-buffering:
//! the reader stores its slot then loads the published pointer; the writer stores the
//! published pointer then loads every slot). Of the two, at least one sees the other's store:
//! either the reader finds that the buffer is no longer published and tries again, or the
//! writer finds the announcement and waits. `tests/loom_handoff.rs` model-checks this protocol
//! with the hand-back it protects.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering, fence};
use std::sync::{Mutex, PoisonError};

/// Slots per thread: how many `Store` calls one thread can have in progress at once (a
/// `Store::with` closure that reads the store again nests a second one). A call beyond these
/// reads through arc-swap instead.
const SLOTS: usize = 4;

/// One thread's slots. Nodes are never freed: a thread that ends gives its node back for the
/// next thread to claim, so there are as many as threads ever read at once.
struct Node {
    /// The buffer each call in progress reads (null: none).
    slots: [AtomicPtr<()>; SLOTS],
    /// Owned by a live thread.
    claimed: AtomicBool,
}

/// Every node ever made. Readers lock it only to claim a node, once per thread; the writer,
/// for each scan of the slots.
static NODES: Mutex<Vec<&'static Node>> = Mutex::new(Vec::new());

/// This thread's node and how many of its slots are in use.
struct Local {
    node: &'static Node,
    depth: Cell<usize>,
}

impl Local {
    fn claim() -> Local {
        let mut nodes = NODES.lock().unwrap_or_else(PoisonError::into_inner);
        let free = nodes.iter().copied().find(|n| {
            n.claimed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        let node = free.unwrap_or_else(|| {
            let node: &'static Node = Box::leak(Box::new(Node {
                slots: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
                claimed: AtomicBool::new(true),
            }));
            nodes.push(node);
            node
        });
        Local {
            node,
            depth: Cell::new(0),
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Every call this thread made has returned: all its slots are clear.
        self.node.claimed.store(false, Ordering::Release);
    }
}

thread_local! {
    static LOCAL: Local = Local::claim();
}

/// Clears a slot when the read ends, also when the reader's closure panics.
struct Announced<'a> {
    local: &'a Local,
    index: usize,
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        // Release: the writer that loads this null (Acquire) sees every read made before it.
        self.local.node.slots[self.index].store(std::ptr::null_mut(), Ordering::Release);
        self.local.depth.set(self.index);
    }
}

/// Calls `f` with the buffer `published` points to, announced in one of this thread's slots
/// for the duration of the call. `None` (and `f` not called) when this thread has no free slot
/// (calls nested more than [`SLOTS`] deep) or is being torn down: read another way then.
///
/// `published` must always point to a live buffer that its writer frees or changes only after
/// storing another pointer in `published` and then finding, by [`announced`], that no slot
/// announces it, and that is kept alive while `published` is, if it is still announced when
/// the writer goes (the protocol of `super::handoff`; `super::sync::Current` keeps it).
pub(crate) fn read<T, R>(
    published: &AtomicPtr<T>,
    f: &mut Option<impl FnOnce(&T) -> R>,
) -> Option<R> {
    LOCAL
        .try_with(|local| {
            let index = local.depth.get();
            if index == SLOTS {
                return None;
            }
            local.depth.set(index + 1);
            let slot = &local.node.slots[index];
            let _clear = Announced { local, index };
            let mut p = published.load(Ordering::Acquire);
            loop {
                // Release: a writer that finds this announcement (say of the next buffer)
                // with its Acquire load must also see that the reads this thread made before
                // it (say in the buffer that writer is about to change) are over. (A later
                // plain store does not carry the release of the clear before it; loom found
                // that race.)
                slot.store(p.cast(), Ordering::Release);
                // Paired with the fence in `announced`: the writer sees this announcement, or
                // this thread sees the writer's newer pointer below.
                fence(Ordering::SeqCst);
                let now = published.load(Ordering::Acquire);
                if now == p {
                    break;
                }
                p = now;
            }
            // Safety: `p` was the published pointer after it was announced in `slot` (the
            // load above, ordered after the announcement by the fence). The writer changes or
            // frees a buffer only once it is no longer published and `announced` finds no slot
            // holding it, and that check, ordered after the unpublishing by the fence there,
            // sees this slot until `_clear` empties it after `f` returns (a writer dropped
            // meanwhile leaves a buffer it finds announced to the cell that holds `published`,
            // which outlives this call: `Current::bury`). So the buffer is alive and unchanged
            // for as long as `f` holds the reference. The Acquire loads
            // make what the writer wrote before publishing `p` visible here.
            #[allow(unsafe_code)]
            let buffer = unsafe { &*p };
            f.take().map(|f| f(buffer))
        })
        .ok()
        .flatten()
}

/// Whether a read in progress announces `buffer`. Call after `buffer` was unpublished (its
/// pointer replaced in the published cell): a read that starts after this check cannot
/// announce it any more.
pub(crate) fn announced<T>(buffer: *const T) -> bool {
    // Paired with the fence in `read`.
    fence(Ordering::SeqCst);
    let target: *mut () = buffer.cast_mut().cast();
    let nodes = NODES.lock().unwrap_or_else(PoisonError::into_inner);
    nodes
        .iter()
        .any(|n| n.slots.iter().any(|s| s.load(Ordering::Acquire) == target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_announces_its_buffer_until_it_returns_and_nests() {
        let a = Box::new(1u64);
        let b = Box::new(2u64);
        let pa: *const u64 = &*a;
        let pb: *const u64 = &*b;
        let published = AtomicPtr::new(pa.cast_mut());
        let other = AtomicPtr::new(pb.cast_mut());
        assert!(!announced(pa));
        let got = read(
            &published,
            &mut Some(|v: &u64| {
                assert!(announced(pa), "announced while read");
                let inner = read(
                    &other,
                    &mut Some(|w: &u64| {
                        assert!(announced(pa) && announced(pb), "nested reads announce both");
                        *w
                    }),
                );
                *v + inner.unwrap()
            }),
        );
        assert_eq!(got, Some(3));
        assert!(!announced(pa) && !announced(pb), "cleared after the reads");
    }

    #[test]
    fn a_panicking_read_clears_its_slot_and_deep_nesting_falls_back() {
        let a = Box::new(7u64);
        let pa: *const u64 = &*a;
        let published = AtomicPtr::new(pa.cast_mut());
        let caught = std::panic::catch_unwind(|| {
            read(&published, &mut Some(|_: &u64| panic!("in the reader")));
        });
        assert!(caught.is_err());
        assert!(!announced(pa), "the slot is cleared on unwind");
        // SLOTS reads nest; the next one finds no slot.
        fn nest(p: &AtomicPtr<u64>, left: usize) -> Option<usize> {
            read(
                p,
                &mut Some(|_: &u64| {
                    if left == 0 {
                        0
                    } else {
                        nest(p, left - 1).map_or(100, |d| d + 1)
                    }
                }),
            )
        }
        assert_eq!(nest(&published, SLOTS - 1), Some(SLOTS - 1));
        assert_eq!(
            nest(&published, SLOTS),
            Some(100 + SLOTS - 1),
            "the innermost read fell back"
        );
        assert!(!announced(pa));
    }
}
