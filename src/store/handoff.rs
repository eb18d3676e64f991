//! The left-right hand-back between a store's two buffers: which buffer the writer may change,
//! when the other one is free again, and how it catches up. Generic over the buffer (see
//! [`Buffer`]) and written against a small facade, `super::sync` (`Arc`, the published
//! `Current` cell, [`wait_unique`](super::sync::wait_unique), `make_mut`), so that the same
//! file is model-checked with loom: `tests/loom_handoff.rs` includes it with loom's `Arc` and
//! a loom cell in place of std's and arc-swap's.
//!
//! # Protocol
//!
//! - Readers load the published buffer from the cell (`Current`) and drop it when done, or
//!   borrow it for one call under a hazard slot (`super::hazard`); nothing else. Nothing
//!   changes a buffer while the cell or any reader can reach it.
//! - The writer owns two buffers: `front` (published) and `back`. It changes `back` only
//!   while it holds the only reference to it and no hazard slot announces it
//!   ([`wait_unique`](super::sync::wait_unique): an `Arc::get_mut` check and a scan of the
//!   slots), and records each change in a log. Retired buffers are freed under the same two
//!   conditions; when the writer goes, a buffer a read still announces is left to the cell
//!   (`release`), which frees it when no `Store` call can be in progress any more.
//! - `publish` swaps `back` into the cell; the cell's `swap` returns only once every load in
//!   progress either ends holding a counted reference to the old front or returns the new one
//!   (arc-swap settles its readers' debts before `swap` returns; the loom model's cell is a
//!   mutex, which counts every load at once), and a slot read that did not see the new
//!   pointer is seen by the writer's scan (a `SeqCst` fence on each side). The old front
//!   becomes `back`.
//! - Once no reader holds the new `back`, it replays the log (or, when `stale`, is rebuilt as
//!   a copy of the front) and is then in the front's state again.
//! - A reader that keeps `back` too long (a held snapshot) does not block the writer: after
//!   waiting up to [`pin_wait`], the writer leaves that buffer to its readers (`retired`,
//!   freed by a later call once they let go) and continues in a fresh copy of the front (or
//!   an empty buffer, for a rebuild).
//! - A write that stops between `begin` and `publish` (a panic in an index function or in
//!   the caller's iterator) leaves the back buffer half-written: the next `begin` finds it
//!   so and rebuilds it from the front.

use std::time::Duration;

use super::sync::{Arc, Current, in_use, make_mut, wait_unique};

/// One complete state of a store that can be brought to another buffer's state by replaying
/// the changes recorded while that buffer was written.
pub(crate) trait Buffer: Clone {
    /// One recorded change.
    type Change;

    /// Applies (and removes) `log`, recorded on the buffer that became `front` while it was
    /// in this buffer's state; afterwards this buffer is in `front`'s state.
    fn catch_up(&mut self, log: &mut Vec<Self::Change>, front: &Self);

    /// An empty buffer of the same configuration (shards, hasher, indexes).
    fn empty_like(&self) -> Self;

    /// Number of objects (sets how long the writer waits for readers, see [`pin_wait`]).
    fn len(&self) -> usize;

    /// Whether `other` has the same configuration, so that this buffer's content can be
    /// thrown away without rebuilding it as `empty_like(other)`.
    fn same_config(&self, other: &Self) -> bool;

    /// Number of versions published before this one.
    fn generation(&self) -> u64;

    /// Sets [`Buffer::generation`].
    fn set_generation(&mut self, generation: u64);
}

/// How long a writer call waits for readers to leave the buffer it must write before it copies
/// the front buffer instead: a fixed part plus a part per object, because the copy it avoids
/// grows with the store (an estimate, not a measured copy time).
pub(crate) fn pin_wait(len: usize) -> Duration {
    Duration::from_millis(1)
        + Duration::from_nanos(50).saturating_mul(len.min(u32::MAX as usize) as u32)
}

/// The writer's two buffers and what lies between them.
pub(crate) struct Handoff<B: Buffer> {
    /// The published buffer (also in the cell).
    front: Arc<B>,
    /// The other buffer: front's state minus `log` (or minus everything when `stale`).
    back: Arc<B>,
    /// Changes in `front` that `back` has not replayed yet, in order.
    log: Vec<B::Change>,
    /// `back` must be rebuilt as a copy of `front` (after a replace, an index addition, a
    /// failed replace that left it half-built, or a write or replay that stopped half-way).
    stale: bool,
    /// A write began on `back` and was not published: whatever it changed is not in the log
    /// (or only partly), so `back` must be rebuilt before the next write.
    writing: bool,
    /// Buffers left to readers that still hold them.
    retired: Vec<Arc<B>>,
    /// How many times a held buffer made the writer copy the front buffer.
    copies: u64,
}

impl<B: Buffer> Handoff<B> {
    /// Two buffers in the state of `initial`; returns the front, to be published in the cell.
    pub(crate) fn new(initial: B) -> (Self, Arc<B>) {
        let back = Arc::new(initial.clone());
        let front = Arc::new(initial);
        let handoff = Handoff {
            front: front.clone(),
            back,
            log: Vec::new(),
            stale: false,
            writing: false,
            retired: Vec::new(),
            copies: 0,
        };
        (handoff, front)
    }

    /// The published buffer.
    pub(crate) fn front(&self) -> &Arc<B> {
        &self.front
    }

    /// How many times a buffer held by readers made the writer copy the front.
    pub(crate) fn copies(&self) -> u64 {
        self.copies
    }

    /// Changes the back buffer has not replayed yet.
    pub(crate) fn pending(&self) -> usize {
        self.log.len()
    }

    /// Buffers left to readers and not freed yet.
    pub(crate) fn retired(&self) -> usize {
        self.retired.len()
    }

    /// Frees the retired buffers no reader holds any more. Call at the start of every write.
    pub(crate) fn sweep(&mut self) {
        self.retired.retain(in_use);
    }

    /// The back buffer, the writer's alone and in the front's state, for the next version,
    /// and the log to record its changes in (for the other buffer to replay). Follow with
    /// [`Handoff::publish`], or [`Handoff::discard`] when the changes must not be replayed.
    ///
    /// Waits up to [`pin_wait`] for readers still in the buffer; past that, leaves it to them
    /// and starts a fresh copy of the front.
    pub(crate) fn begin(&mut self) -> (&mut B, &mut Vec<B::Change>) {
        self.prepare(true);
        self.writing = true;
        (make_mut(&mut self.back), &mut self.log)
    }

    /// [`Handoff::begin`] for a write that rebuilds the whole content (a replace): the
    /// buffer's content is unspecified (the caller clears it) but its configuration is the
    /// front's. It is marked stale first (see [`Handoff::discard`]), so that however the
    /// rebuild ends, even half-way, it is copied from the front before its next use; the log
    /// returned is empty scratch space.
    pub(crate) fn begin_rebuild(&mut self) -> (&mut B, &mut Vec<B::Change>) {
        self.prepare(false);
        self.discard();
        self.writing = true;
        (make_mut(&mut self.back), &mut self.log)
    }

    /// Makes `back` the writer's alone and, with `state`, in the front's state.
    fn prepare(&mut self, state: bool) {
        if self.writing {
            // The last write stopped half-way (it panicked): its changes are in `back` but
            // not all in the log.
            self.discard();
            self.writing = false;
        }
        if !wait_unique(&mut self.back, pin_wait(self.front.len())) {
            let fresh = if state {
                (*self.front).clone()
            } else {
                self.front.empty_like()
            };
            let held = std::mem::replace(&mut self.back, Arc::new(fresh));
            self.retired.push(held);
            self.log.clear();
            self.stale = false;
            self.copies += 1;
        } else if state {
            self.catch_up();
        } else if !self.back.same_config(&self.front) {
            // The content is about to be thrown away; only the configuration must match.
            *make_mut(&mut self.back) = self.front.empty_like();
        }
    }

    /// Marks the back buffer as no longer the front's state minus the log (a rebuilt or
    /// half-built buffer): it is copied from the front before its next use as the back.
    pub(crate) fn discard(&mut self) {
        self.stale = true;
        self.log.clear();
    }

    /// Publishes the back buffer (written since [`Handoff::begin`]) as the new front; the old
    /// front becomes the back. Call [`Handoff::settle`] next.
    pub(crate) fn publish(&mut self, current: &Current<B>) {
        self.writing = false;
        let generation = self.front.generation() + 1;
        make_mut(&mut self.back).set_generation(generation);
        let next = self.back.clone();
        // The old front comes back with every reader still in it counted in its strong count.
        drop(current.swap(next.clone()));
        self.back = std::mem::replace(&mut self.front, next);
    }

    /// Brings the back buffer up to date now if no reader holds it, waiting up to
    /// [`pin_wait`] for them when `wait` (after a replace, to free the old content promptly);
    /// otherwise the next [`Handoff::begin`] does.
    pub(crate) fn settle(&mut self, wait: bool) {
        let limit = if wait {
            pin_wait(self.front.len())
        } else {
            Duration::ZERO
        };
        if wait_unique(&mut self.back, limit) {
            self.catch_up();
        }
    }

    /// Gives up the buffers that are not published (the back one and the retired ones), for
    /// the writer's drop: each one a read in progress still announces is kept by `current`
    /// until the cell goes (see `Current::bury`); the others are dropped here (or by their last
    /// `Snapshot`). Never waits. The handoff is left with an empty back buffer and nothing to
    /// replay.
    pub(crate) fn release(&mut self, current: &Current<B>) {
        let empty = Arc::new(self.front.empty_like());
        current.bury(std::mem::replace(&mut self.back, empty));
        for buffer in std::mem::take(&mut self.retired) {
            current.bury(buffer);
        }
        self.log.clear();
        self.stale = true;
    }

    /// Brings `back` (the writer's alone) to the front's state.
    fn catch_up(&mut self) {
        let back = make_mut(&mut self.back);
        if self.stale {
            // Release the old content before copying, so two copies never coexist with it.
            *back = self.front.empty_like();
            *back = (*self.front).clone();
            self.stale = false;
        } else {
            // Stale while replaying: should the replay stop half-way (a panic), the buffer is
            // rebuilt from the front before its next use, not written on as if caught up.
            self.stale = true;
            back.catch_up(&mut self.log, &self.front);
            self.stale = false;
        }
        self.log.clear();
    }
}
