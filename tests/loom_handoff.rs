//! Loom model of the store's left-right hand-back (`src/store/handoff.rs`): the one piece of
//! synchronization the store builds itself, on top of arc-swap and `Arc`.
//!
//! The file under test is compiled here as it is, with loom's `Arc` and a loom cell in place
//! of std's `Arc` and arc-swap's `ArcSwap` (the `sync` module below has the names
//! `handoff.rs` imports from `super::sync`). Loom runs the writer and the readers under every
//! interleaving (up to a preemption bound) and checks, in each one:
//!
//! - the writer never writes a buffer anyone else holds: `make_mut` here asserts that the
//!   buffer is unique instead of cloning it, as std's `Arc::make_mut` would;
//! - every buffer a reader loads is a whole published version (a batch that sets both cells
//!   is seen entirely or not at all, with the resourceVersion and generation it was published
//!   with), versions never go back for a reader, and a held buffer never changes;
//! - once the readers are gone, the back buffer catches up to exactly the front's state, and
//!   every buffer left to readers is freed.
//!
//! What is taken as given: arc-swap's contract that `swap` returns only once every reader
//! that loaded the old value holds a counted reference to it or will load the new one (the
//! cell here is a loom mutex, which gives exactly that), and that `Arc::get_mut` succeeds only
//! when no other reference exists (loom models the count and its memory ordering).
//!
//! Run: `cargo test --release --test loom_handoff` (part of the normal test run; the bounds
//! the search is exhaustive and takes a few seconds).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loom::thread;

/// The names `handoff.rs` takes from `super::sync`, in loom's versions.
mod sync {
    use std::time::Duration;

    pub(crate) use loom::sync::Arc;
    use loom::sync::Mutex;

    /// The published cell: stands in for `arc_swap::ArcSwap` (a load and a swap are atomic
    /// with respect to each other; a load returns a counted reference).
    pub(crate) struct Current<T>(Mutex<Arc<T>>);

    impl<T> Current<T> {
        pub(crate) fn new(value: Arc<T>) -> Self {
            Current(Mutex::new(value))
        }

        pub(crate) fn load(&self) -> Arc<T> {
            self.0.lock().expect("cell lock").clone()
        }

        pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
            std::mem::replace(&mut *self.0.lock().expect("cell lock"), value)
        }
    }

    /// Unlike `Arc::make_mut`, never clones: the hand-back must only write buffers it holds
    /// alone, and the model fails if it tries otherwise.
    pub(crate) fn make_mut<T>(arc: &mut Arc<T>) -> &mut T {
        Arc::get_mut(arc).expect("the writer wrote a buffer that a reader holds")
    }

    /// One check when `limit` is zero; otherwise three, with a yield between them (loom then
    /// explores readers finishing before, between and after the checks).
    pub(crate) fn wait_unique<T>(arc: &mut Arc<T>, limit: Duration) -> bool {
        let tries = if limit.is_zero() { 1 } else { 3 };
        for i in 0..tries {
            if i > 0 {
                loom::thread::yield_now();
            }
            if Arc::get_mut(arc).is_some() {
                return true;
            }
        }
        false
    }
}

#[allow(dead_code)]
#[path = "../src/store/handoff.rs"]
mod handoff;

use handoff::{Buffer, Handoff};
use sync::{Arc, Current};

/// A store in miniature: every write sets both cells to the new resourceVersion, which is
/// also the number of versions published, so a reader can tell a whole version from a torn
/// or stale one.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    cells: [u64; 2],
    rv: u64,
    generation: u64,
}

impl Buffer for Model {
    type Change = (usize, u64);

    fn catch_up(&mut self, log: &mut Vec<(usize, u64)>, front: &Self) {
        for (cell, value) in log.drain(..) {
            self.cells[cell] = value;
        }
        self.rv = front.rv;
        self.generation = front.generation;
    }

    fn empty_like(&self) -> Self {
        Model {
            cells: [0; 2],
            rv: 0,
            generation: 0,
        }
    }

    fn len(&self) -> usize {
        self.cells.len()
    }

    fn same_config(&self, _: &Self) -> bool {
        true
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn set_generation(&mut self, generation: u64) {
        self.generation = generation;
    }
}

/// A whole published version: both cells and the generation agree with the resourceVersion.
fn check(v: &Model) {
    assert_eq!(v.cells, [v.rv, v.rv], "torn or stale version: {v:?}");
    assert_eq!(v.generation, v.rv, "generation of {v:?}");
}

/// An update (`Writer::apply`): changes in the back buffer, logged, then published.
fn apply(h: &mut Handoff<Model>, cur: &Current<Model>, rv: u64) {
    let (back, log) = h.begin(true);
    check(back);
    for cell in 0..2 {
        back.cells[cell] = rv;
        log.push((cell, rv));
    }
    back.rv = rv;
    h.publish(cur);
    h.settle(false);
}

/// A rebuild (`Writer::replace`): new content, nothing logged, then published; waits for the
/// old content's readers.
fn replace(h: &mut Handoff<Model>, cur: &Current<Model>, rv: u64) {
    let (back, scratch) = h.begin_rebuild();
    assert!(scratch.is_empty());
    *back = back.empty_like();
    back.cells = [rv; 2];
    back.rv = rv;
    h.publish(cur);
    h.settle(true);
}

/// A rebuild that fails half-way (`Writer::replace` with a failing index function): the back
/// buffer is left half-built and nothing is published.
fn failed_replace(h: &mut Handoff<Model>) {
    let (back, _) = h.begin_rebuild();
    *back = back.empty_like();
    back.cells[0] = 999;
}

/// After the readers are gone: the front is what the cell holds, the back catches up to it
/// exactly, and no retired buffer is left.
fn finish(mut h: Handoff<Model>, cur: &Current<Model>, rv: u64) {
    let front = (**h.front()).clone();
    assert_eq!(front.rv, rv);
    check(&front);
    assert_eq!(*cur.load(), front);
    let (back, log) = h.begin(true);
    assert!(log.is_empty());
    assert_eq!(*back, front);
    h.sweep();
    assert_eq!(h.retired(), 0);
}

/// Runs `f` under every interleaving loom finds (no preemption bound unless
/// `LOOM_MAX_PREEMPTIONS` sets one); prints how many there were (`--nocapture`).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let count = runs.clone();
    loom::model::Builder::new().check(move || {
        count.fetch_add(1, Ordering::Relaxed);
        f();
    });
    eprintln!("{} interleavings explored", runs.load(Ordering::Relaxed));
}

fn start() -> (Handoff<Model>, Arc<Current<Model>>) {
    let (h, front) = Handoff::new(Model {
        cells: [0; 2],
        rv: 0,
        generation: 0,
    });
    (h, Arc::new(Current::new(front)))
}

/// One reader loading twice while the writer applies, replaces and applies again.
#[test]
fn reader_sees_whole_versions_in_order() {
    model(|| {
        let (mut h, cur) = start();
        let reader = {
            let cur = cur.clone();
            thread::spawn(move || {
                let a = cur.load();
                check(&a);
                let b = cur.load();
                check(&b);
                assert!(b.rv >= a.rv, "went back from {a:?} to {b:?}");
            })
        };
        apply(&mut h, &cur, 1);
        replace(&mut h, &cur, 2);
        apply(&mut h, &cur, 3);
        reader.join().expect("reader");
        finish(h, &cur, 3);
    });
}

/// A reader holding a version across writes (a `Snapshot`): the writer works around it (it
/// copies instead of waiting forever), the held version never changes, and the buffer it
/// kept is freed once it lets go.
#[test]
fn held_version_never_changes_and_is_freed() {
    model(|| {
        let (mut h, cur) = start();
        let holder = {
            let cur = cur.clone();
            thread::spawn(move || {
                let held = cur.load();
                let seen = (*held).clone();
                check(&seen);
                thread::yield_now();
                let later = cur.load();
                check(&later);
                assert!(later.rv >= held.rv);
                assert_eq!(*held, seen, "a held version changed");
            })
        };
        apply(&mut h, &cur, 1);
        apply(&mut h, &cur, 2);
        apply(&mut h, &cur, 3);
        holder.join().expect("holder");
        finish(h, &cur, 3);
    });
}

/// Two readers, and a replace that fails half-way between two updates: the half-built buffer
/// is never published and is rebuilt before the next write.
#[test]
fn two_readers_and_a_failed_replace() {
    model(|| {
        let (mut h, cur) = start();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let cur = cur.clone();
                thread::spawn(move || check(&cur.load()))
            })
            .collect();
        apply(&mut h, &cur, 1);
        failed_replace(&mut h);
        apply(&mut h, &cur, 2);
        for r in readers {
            r.join().expect("reader");
        }
        finish(h, &cur, 2);
    });
}

/// The wait limit the real writer uses grows with the store (the model's `wait_unique` only
/// tells zero from non-zero).
#[test]
fn pin_wait_grows_with_the_store() {
    assert_eq!(handoff::pin_wait(0), Duration::from_millis(1));
    assert_eq!(
        handoff::pin_wait(100_000),
        Duration::from_millis(1) + Duration::from_millis(5)
    );
    assert!(handoff::pin_wait(usize::MAX) > Duration::from_secs(200));
}
