//! Loom model of the store's left-right hand-back (`src/store/handoff.rs`) and of the hazard
//! slots its borrowing readers use (`src/store/hazard.rs`): the synchronization the store
//! builds itself, on top of arc-swap and `Arc`.
//!
//! The file under test is compiled here as it is, with loom's `Arc` and a loom cell in place
//! of std's `Arc` and arc-swap's `ArcSwap` (the `sync` module below has the names
//! `handoff.rs` imports from `super::sync`, the slots and the writer's scan of them written as
//! `hazard.rs` has them). Slot readers (`slot_read`) announce the published buffer, check it,
//! and read it through a raw pointer, as `Store::get` does; every buffer records its accesses
//! in a loom `UnsafeCell` (`Access`), so loom reports any change or free of a buffer that is
//! not ordered after the end of every slot read in it. The writer runs the call sequences of `Writer`'s
//! update, replace, failed replace and index addition, and a write that stops half-way (a
//! panic), on a store in miniature whose changes are not idempotent (each buffer records every
//! version it went through, so a change replayed twice or missed shows). Loom runs the writer
//! and one or two readers under every interleaving (no preemption bound unless
//! `LOOM_MAX_PREEMPTIONS` sets one) and checks, in each one:
//!
//! - the writer never writes a buffer anyone else holds: `make_mut` here asserts that the
//!   buffer is unique instead of copying it, as std's `Arc::make_mut` would;
//! - every buffer a reader loads is a whole published version (both cells, the history, the
//!   resourceVersion and the generation agree), versions never go back for a reader, and a
//!   held buffer never changes;
//! - once the readers are gone, the back buffer catches up to exactly the front's state (same
//!   history, same index configuration), and every buffer left to readers is freed;
//! - the path where a reader holds the buffer the writer needs (the copy) is taken in some
//!   interleavings;
//! - no buffer is changed or freed while a slot read is in it, including when the writer is
//!   dropped (each of these fails when its rule is taken out: the writer's scan of the slots,
//!   the release of announced buffers to the cell when the writer goes, and `Release` on the
//!   announcement, with which loom found a race the first version had);
//! - a thread that reads both ways (counted loads and slot reads) never goes back a version.
//!
//! Not modelled: `hazard.rs`'s registry of per-thread slots (claiming, reuse after a thread
//! ends, nesting, the fallback when a thread has no free slot) is plain code around the
//! protocol and is covered by its unit tests; the model's `slot_read` and `announced` repeat
//! the protocol's loads, stores and fences as `hazard.rs` makes them.
//!
//! Taken as given: arc-swap's contract that `swap` returns only once every load in progress
//! either ends holding a counted reference to the old value or returns the new one (the cell
//! here is a loom mutex, which counts every load at once, so arc-swap's uncounted fast path is
//! not modelled), and that `Arc::get_mut` succeeds only when no other reference exists (loom
//! models the count). The buffers' contents are plain data changed through `&mut`, so loom has
//! no data race to look for in them: the checks are about the protocol.
//!
//! Run: `cargo test --release --test loom_handoff` (part of the normal test run; within these
//! scenarios the search is exhaustive, a few seconds).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loom::thread;

/// The names `handoff.rs` takes from `super::sync`, in loom's versions.
mod sync {
    use std::time::Duration;

    pub(crate) use loom::sync::Arc;
    use loom::sync::Mutex;
    use loom::sync::atomic::{AtomicUsize, Ordering, fence};

    loom::lazy_static! {
        /// The hazard slots of the model's slot readers (one each), as `src/store/hazard.rs`
        /// keeps them per thread: the address of the buffer a read is in, or 0.
        pub(crate) static ref SLOTS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
    }

    /// The published cell: stands in for `arc_swap::ArcSwap` (a load and a swap are atomic
    /// with respect to each other; a load returns a counted reference), with the plain pointer
    /// beside it that slot readers read, stored just before the cell as in `src/store/sync.rs`.
    pub(crate) struct Current<T> {
        cell: Mutex<Arc<T>>,
        pub(crate) published: AtomicUsize,
        buried: Mutex<Vec<Arc<T>>>,
    }

    impl<T> Current<T> {
        pub(crate) fn new(value: Arc<T>) -> Self {
            let published = AtomicUsize::new(Arc::as_ptr(&value) as usize);
            Current {
                cell: Mutex::new(value),
                published,
                buried: Mutex::new(Vec::new()),
            }
        }

        /// A counted load; the model's readers that only check whole versions use it as is.
        /// (The real one retries until it agrees with `published`: see `try_load`.)
        pub(crate) fn load(&self) -> Arc<T> {
            self.cell.lock().expect("cell lock").clone()
        }

        /// One attempt of the real counted load: `None` when the cell and `published` disagree
        /// (between `swap`'s two stores), where the real one tries again. Modelled as one
        /// attempt because loom cannot explore the retry loop's interleavings.
        pub(crate) fn try_load(&self) -> Option<Arc<T>> {
            let v = self.load();
            (Arc::as_ptr(&v) as usize == self.published.load(Ordering::Acquire)).then_some(v)
        }

        /// As `src/store/sync.rs`: `published` first, then the cell.
        pub(crate) fn swap(&self, value: Arc<T>) -> Arc<T> {
            self.published
                .store(Arc::as_ptr(&value) as usize, Ordering::SeqCst);
            std::mem::replace(&mut *self.cell.lock().expect("cell lock"), value)
        }

        pub(crate) fn bury(&self, buffer: Arc<T>) {
            if announced(Arc::as_ptr(&buffer)) {
                self.buried.lock().expect("buried lock").push(buffer);
            }
        }
    }

    /// `src/store/hazard.rs`'s `announced`: the same fence, then every slot.
    pub(crate) fn announced<T>(p: *const T) -> bool {
        fence(Ordering::SeqCst);
        SLOTS
            .iter()
            .any(|s| s.load(Ordering::Acquire) == p as usize)
    }

    /// Unlike `Arc::make_mut`, never clones: the hand-back must only write buffers it holds
    /// alone, and the model fails if it tries otherwise.
    pub(crate) fn make_mut<T>(arc: &mut Arc<T>) -> &mut T {
        Arc::get_mut(arc).expect("the writer wrote a buffer that a reader holds")
    }

    fn unique<T>(arc: &mut Arc<T>) -> bool {
        Arc::get_mut(arc).is_some() && !announced(Arc::as_ptr(arc))
    }

    pub(crate) fn in_use<T>(arc: &Arc<T>) -> bool {
        Arc::strong_count(arc) > 1 || announced(Arc::as_ptr(arc))
    }

    /// One check when `limit` is zero; otherwise three, with a yield between them (loom then
    /// explores readers finishing before, between and after the checks).
    pub(crate) fn wait_unique<T>(arc: &mut Arc<T>, limit: Duration) -> bool {
        let tries = if limit.is_zero() { 1 } else { 3 };
        for i in 0..tries {
            if i > 0 {
                loom::thread::yield_now();
            }
            if unique(arc) {
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

/// A store in miniature. Every write sets both cells to the resourceVersion it publishes,
/// which is also the generation it is published as, and appends it to `history`; a rebuild
/// starts a new history. `config` stands for the set of indexes.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    cells: [u64; 2],
    history: Vec<u64>,
    config: u32,
    rv: u64,
    generation: u64,
    access: Access,
}

/// Records the accesses to one buffer for loom's data-race check: the writer's (every change,
/// and the drop that frees it) as writes, a slot reader's as reads at the start and the end of
/// its read. Loom fails the model when two of them, one a write, are not ordered by
/// happens-before: a buffer changed or freed while a slot reader is in it.
struct Access(loom::cell::UnsafeCell<()>);

impl Access {
    fn new() -> Self {
        Access(loom::cell::UnsafeCell::new(()))
    }
}

impl Clone for Access {
    /// A copy of a buffer is a new buffer, with its own record.
    fn clone(&self) -> Self {
        Access::new()
    }
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Access")
    }
}

impl PartialEq for Access {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Model {
    /// The writer changes this buffer.
    fn write(&mut self) {
        self.access.0.with_mut(|_| ());
    }

    /// A slot reader reads this buffer.
    fn read(&self) {
        self.access.0.with(|_| ());
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.write();
    }
}

/// A logged change.
#[derive(Debug)]
enum Change {
    Cell(usize, u64),
    Seen(u64),
}

impl Buffer for Model {
    type Change = Change;

    fn catch_up(&mut self, log: &mut Vec<Change>, front: &Self) {
        self.write();
        for change in log.drain(..) {
            match change {
                Change::Cell(cell, value) => self.cells[cell] = value,
                Change::Seen(v) => self.history.push(v),
            }
        }
        self.rv = front.rv;
        self.generation = front.generation;
    }

    fn empty_like(&self) -> Self {
        Model {
            cells: [0; 2],
            history: Vec::new(),
            config: self.config,
            rv: 0,
            generation: 0,
            access: Access::new(),
        }
    }

    fn len(&self) -> usize {
        self.cells.len()
    }

    fn same_config(&self, other: &Self) -> bool {
        self.config == other.config
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn set_generation(&mut self, generation: u64) {
        self.write();
        self.generation = generation;
    }
}

/// A whole published version: cells, resourceVersion and generation agree, and the history is
/// strictly increasing and ends with it.
fn check(v: &Model) {
    assert_eq!(v.cells, [v.rv, v.rv], "torn or stale version: {v:?}");
    assert_eq!(v.generation, v.rv, "generation of {v:?}");
    assert!(
        v.history.windows(2).all(|w| w[0] < w[1]),
        "a change replayed twice or out of order: {v:?}"
    );
    assert_eq!(
        v.history.last().copied().unwrap_or(0),
        v.rv,
        "history of {v:?}"
    );
}

/// The resourceVersion (and generation) the next publish gets.
fn next(h: &Handoff<Model>) -> u64 {
    h.front().generation + 1
}

/// `Writer::apply`: logged changes in the back buffer, published, other buffer settled.
fn apply(h: &mut Handoff<Model>, cur: &Current<Model>) {
    let rv = next(h);
    let (back, log) = h.begin();
    back.write();
    check(back);
    for cell in 0..2 {
        back.cells[cell] = rv;
        log.push(Change::Cell(cell, rv));
    }
    back.history.push(rv);
    log.push(Change::Seen(rv));
    back.rv = rv;
    h.publish(cur);
    h.settle(false);
}

/// `Writer::replace`: new content, nothing logged, published; waits for the old content's
/// readers.
fn replace(h: &mut Handoff<Model>, cur: &Current<Model>) {
    let rv = next(h);
    let (back, scratch) = h.begin_rebuild();
    back.write();
    assert!(scratch.is_empty());
    *back = back.empty_like();
    back.cells = [rv; 2];
    back.history = vec![rv];
    back.rv = rv;
    h.publish(cur);
    h.settle(true);
}

/// `Writer::replace` with an index function failing half-way: nothing published.
fn failed_replace(h: &mut Handoff<Model>) {
    let (back, _) = h.begin_rebuild();
    back.write();
    *back = back.empty_like();
    back.cells[0] = 999;
    back.history = vec![999];
}

/// `Writer::add_indexers`: the new index in the back buffer (not logged), published.
fn add_index(h: &mut Handoff<Model>, cur: &Current<Model>) {
    let rv = next(h);
    let (back, _) = h.begin();
    back.write();
    back.config += 1;
    back.cells = [rv; 2];
    back.history.push(rv);
    back.rv = rv;
    h.discard();
    h.publish(cur);
    h.settle(false);
}

/// A write that stops half-way (an index function panics inside `Writer::apply`): part of
/// it in the buffer and the log, nothing published.
fn aborted_apply(h: &mut Handoff<Model>) {
    let (back, log) = h.begin();
    back.write();
    back.history.push(1_000);
    back.cells[1] = 1_000;
    log.push(Change::Seen(1_000));
}

/// After the readers are gone: the front is what the cell holds, at `rv` with `config`; the
/// back catches up to it exactly; no retired buffer is left. Returns the copies made.
fn finish(mut h: Handoff<Model>, cur: &Current<Model>, rv: u64, config: u32) -> u64 {
    let front = (**h.front()).clone();
    check(&front);
    assert_eq!((front.rv, front.config), (rv, config));
    assert_eq!(*cur.load(), front);
    let (back, log) = h.begin();
    assert!(log.is_empty());
    assert_eq!(*back, front);
    h.sweep();
    assert_eq!(h.retired(), 0);
    h.copies()
}

/// Runs `f` under every interleaving loom finds (no preemption bound unless
/// `LOOM_MAX_PREEMPTIONS` sets one); `f` returns the copies its writer made. Prints how many
/// interleavings there were (`--nocapture`); returns whether some interleaving made a copy.
fn model(f: impl Fn() -> u64 + Sync + Send + 'static) -> bool {
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let copied = std::sync::Arc::new(AtomicUsize::new(0));
    let (r, c) = (runs.clone(), copied.clone());
    loom::model::Builder::new().check(move || {
        r.fetch_add(1, Ordering::Relaxed);
        if f() > 0 {
            c.fetch_add(1, Ordering::Relaxed);
        }
    });
    let (runs, copied) = (runs.load(Ordering::Relaxed), copied.load(Ordering::Relaxed));
    eprintln!("{runs} interleavings explored, {copied} with a copy");
    copied > 0
}

fn start() -> (Handoff<Model>, Arc<Current<Model>>) {
    let (h, front) = Handoff::new(Model {
        cells: [0; 2],
        history: Vec::new(),
        config: 0,
        rv: 0,
        generation: 0,
        access: Access::new(),
    });
    (h, Arc::new(Current::new(front)))
}

/// Spawns a reader that loads twice and checks both versions and their order. It yields
/// while it holds each (a reader thread preempted in the middle of a call): loom runs a
/// yielding writer's other threads first, so without these the writer would always find the
/// reader gone.
fn reader(cur: &Arc<Current<Model>>) -> thread::JoinHandle<()> {
    let cur = cur.clone();
    thread::spawn(move || {
        let a = cur.load();
        check(&a);
        thread::yield_now();
        let b = cur.load();
        check(&b);
        assert!(
            b.generation >= a.generation,
            "went back from {a:?} to {b:?}"
        );
        thread::yield_now();
    })
}

/// `Store::get` and the other borrowing calls: reads the published buffer under hazard slot
/// `slot` (the protocol of `src/store/hazard.rs`), checks that it is a whole version, and
/// returns its generation. With `pause`, it yields in the middle of the read (a reader
/// preempted inside a call), so that the writer runs while it is in the buffer (loom then runs
/// the other threads first: a reader that must go on at once passes `false`).
fn slot_read(cur: &Current<Model>, slot: usize, pause: bool) -> u64 {
    let s = &sync::SLOTS[slot];
    let mut p = cur.published.load(Ordering::Acquire);
    loop {
        // Release, as in `src/store/hazard.rs` (loom found the race with `Relaxed`: a writer
        // that reads this announcement of the next buffer must also see the end of the read
        // before it in the buffer it is about to change).
        s.store(p, Ordering::Release);
        loom::sync::atomic::fence(Ordering::SeqCst);
        let now = cur.published.load(Ordering::Acquire);
        if now == p {
            break;
        }
        p = now;
    }
    // Safety: what `src/store/hazard.rs` relies on, and what this model checks: the buffer
    // published at `p` when the slot announced it stays alive and unchanged until the slot is
    // cleared. Were the hand-back to change or free it meanwhile, loom would report the race
    // on its `Access` record.
    #[allow(unsafe_code)]
    let m = unsafe { &*(p as *const Model) };
    m.read();
    check(m);
    if pause {
        thread::yield_now();
    }
    let generation = m.generation;
    m.read();
    s.store(0, Ordering::Release);
    generation
}

/// Spawns a slot reader that reads `reads` times through slot `slot` and checks the order.
fn slot_reader(cur: &Arc<Current<Model>>, slot: usize, reads: usize) -> thread::JoinHandle<()> {
    let cur = cur.clone();
    thread::spawn(move || {
        let mut last = 0;
        for _ in 0..reads {
            let generation = slot_read(&cur, slot, true);
            assert!(
                generation >= last,
                "went back from generation {last} to {generation}"
            );
            last = generation;
        }
    })
}

/// A slot reader reading twice while the writer applies twice: it only sees whole versions, in
/// order, and the writer never changes or frees a buffer it is in (when it stays too long, the
/// writer copies instead, as for a held version). Two reads through one slot: the second
/// announcement must not let the writer into the buffer of the first (what `Release` on the
/// announcement is for).
#[test]
fn slot_reader_is_never_in_a_buffer_being_written() {
    let copied = model(|| {
        let (mut h, cur) = start();
        let r = slot_reader(&cur, 0, 2);
        apply(&mut h, &cur);
        apply(&mut h, &cur);
        r.join().expect("slot reader");
        finish(h, &cur, 2, 0)
    });
    assert!(copied, "no interleaving took the copy path");
}

/// A slot read across an update, a replace and an update: the rebuilt buffer is not written
/// while the read is in it either.
#[test]
fn slot_reader_across_a_replace() {
    model(|| {
        let (mut h, cur) = start();
        let r = slot_reader(&cur, 0, 1);
        apply(&mut h, &cur);
        replace(&mut h, &cur);
        apply(&mut h, &cur);
        r.join().expect("slot reader");
        finish(h, &cur, 3, 0)
    });
}

/// A slot read while the writer applies twice and is then dropped (`Writer`'s drop: the
/// handoff's release, then the handoff): a buffer a read is in is left to the cell, never
/// freed under the read, and the writer never waits for it.
#[test]
fn a_dropped_writer_leaves_buffers_in_use_to_the_cell() {
    model(|| {
        let (mut h, cur) = start();
        let s = slot_reader(&cur, 0, 1);
        apply(&mut h, &cur);
        apply(&mut h, &cur);
        h.release(&cur);
        drop(h);
        s.join().expect("slot reader");
        0
    });
}

/// One thread reading both ways (a counted load, then a slot read, then a counted load) while
/// the writer applies: it never goes back a version, although `swap` stores the cell and
/// the slot readers' pointer one after the other.
#[test]
fn mixed_reads_on_one_thread_never_go_back() {
    model(|| {
        let (mut h, cur) = start();
        let r = {
            let cur = cur.clone();
            thread::spawn(move || {
                let a = cur.try_load().map(|v| v.generation);
                let b = slot_read(&cur, 0, false);
                let c = cur.try_load().map(|v| v.generation);
                assert!(a.is_none_or(|a| a <= b), "went back: {a:?} then {b}");
                assert!(c.is_none_or(|c| b <= c), "went back: {b} then {c:?}");
            })
        };
        apply(&mut h, &cur);
        r.join().expect("mixed reader");
        finish(h, &cur, 1, 0)
    });
}

/// One reader loading twice while the writer applies, replaces and applies again.
#[test]
fn reader_sees_whole_versions_in_order() {
    let copied = model(|| {
        let (mut h, cur) = start();
        let r = reader(&cur);
        apply(&mut h, &cur);
        replace(&mut h, &cur);
        apply(&mut h, &cur);
        r.join().expect("reader");
        finish(h, &cur, 3, 0)
    });
    assert!(copied, "no interleaving took the copy path");
}

/// A reader holding a version across writes (a `Snapshot`): the writer works around it (it
/// copies instead of waiting forever), the held version never changes, and the buffer it
/// kept is freed once it lets go.
#[test]
fn held_version_never_changes_and_is_freed() {
    let copied = model(|| {
        let (mut h, cur) = start();
        let holder = {
            let cur = cur.clone();
            thread::spawn(move || {
                let held = cur.load();
                let seen = (*held).clone();
                check(&seen);
                thread::yield_now();
                thread::yield_now();
                let later = cur.load();
                check(&later);
                assert!(later.generation >= held.generation);
                assert_eq!(*held, seen, "a held version changed");
            })
        };
        apply(&mut h, &cur);
        apply(&mut h, &cur);
        apply(&mut h, &cur);
        holder.join().expect("holder");
        finish(h, &cur, 3, 0)
    });
    assert!(copied, "no interleaving took the copy path");
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
        apply(&mut h, &cur);
        failed_replace(&mut h);
        apply(&mut h, &cur);
        for r in readers {
            r.join().expect("reader");
        }
        finish(h, &cur, 2, 0)
    });
}

/// An index addition, then a replace and an update, with a reader: every later buffer has the
/// new index configuration, including one rebuilt while the old one was still held.
#[test]
fn index_addition_reaches_both_buffers() {
    let copied = model(|| {
        let (mut h, cur) = start();
        let r = reader(&cur);
        add_index(&mut h, &cur);
        replace(&mut h, &cur);
        apply(&mut h, &cur);
        r.join().expect("reader");
        finish(h, &cur, 3, 1)
    });
    assert!(copied, "no interleaving took the copy path");
}

/// A write that stops half-way (a panic caught by the caller), then updates, with a reader:
/// the half-written buffer is rebuilt, never replayed onto or published.
#[test]
fn aborted_write_is_never_published() {
    model(|| {
        let (mut h, cur) = start();
        let r = reader(&cur);
        apply(&mut h, &cur);
        aborted_apply(&mut h);
        apply(&mut h, &cur);
        apply(&mut h, &cur);
        r.join().expect("reader");
        finish(h, &cur, 3, 0)
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
