//! The processing thread: pops DeltaFIFO batches, applies them to the store and publishes their
//! notifications (client-go `sharedIndexInformer.HandleDeltas` and `processDeltas`,
//! `tools/cache/shared_informer.go`, `controller.go`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use super::Shared;
use super::compaction::Compaction;
use crate::distributor::{Marker, Notification};
use crate::fifo::{DeltaType, PopError, TryPopError};
use crate::store::{Op, WriteBatch, Writer};

/// Pop, apply, publish, until the DeltaFIFO closes. When the queue is empty it sleeps until a
/// delta arrives or the reflector's resourceVersion moves.
pub(super) fn process_loop(shared: &Shared, handle: &tokio::runtime::Handle) {
    let mut compaction = Compaction::new(&shared.compression, shared.tails.clone());
    loop {
        check_synced(shared);
        let batch = match shared.fifo.try_pop_batch(shared.batch_size) {
            Ok(b) => Some(b),
            Err(TryPopError::Closed) => return,
            Err(TryPopError::Empty) => {
                // Nothing queued: everything the reflector handed over is applied, so the
                // store may reflect the newest resourceVersion it saw (a bookmark, a list).
                advance_resource_version(shared);
                check_synced(shared);
                // Compress what was written while nothing else is to be done.
                if compaction.run(shared) {
                    continue;
                }
                let woke = handle.block_on(async {
                    tokio::select! {
                        biased;
                        b = shared.fifo.pop_batch_async(shared.batch_size) => b.map(Some),
                        () = shared.rv_moved.notified() => Ok(None),
                    }
                });
                match woke {
                    Ok(b) => b,
                    Err(PopError::Closed) => return,
                }
            }
        };
        if let Some(batch) = batch {
            let start = std::time::Instant::now();
            process_batch(shared, &batch, &mut compaction);
            shared.processing.observe(start.elapsed());
            // Dropping the batch completes it: the DeltaFIFO stops overlaying it on the store
            // and counts it towards has_synced, now that the store holds it.
            drop(batch);
        }
    }
}

/// Once the DeltaFIFO has synced (its first list applied and published), gives every
/// registration still waiting a marker behind those notifications in its listener's stream,
/// then releases `wait_for_cache_sync` callers.
fn check_synced(shared: &Shared) {
    // Closed: shutting down. What is still queued gets applied, but its notifications may be
    // dropped at full `Block` listeners, so an informer that had not synced never reports it.
    if shared.synced.load(Ordering::Acquire) || !shared.fifo.has_synced() || shared.fifo.is_closed()
    {
        return;
    }
    let waiting = {
        let mut w = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
        w.synced = true;
        std::mem::take(&mut w.awaiting_sync)
    };
    // Outside the writer lock: a full `Block` listener may make us wait, and its handler may
    // want to register another handler meanwhile.
    for (id, slot) in waiting {
        let marker = shared.distributor.marker(id).unwrap_or_else(|| {
            let m = Marker::new();
            m.reach(); // removed meanwhile: nothing to wait for
            m
        });
        let _ = slot.set(marker);
    }
    shared.synced.store(true, Ordering::Release);
    shared.synced_or_stopped.reach();
}

/// Moves the store's resourceVersion to the newest one the reflector handed over, when no
/// delta is queued (so every delta up to it has been applied by this thread).
fn advance_resource_version(shared: &Shared) {
    // Read the version first, then check the queue: deltas pushed before the version was
    // recorded are then either visible in the queue or already applied.
    let seen = shared.seen_rv.load(Ordering::SeqCst);
    if seen == 0 || !shared.fifo.is_empty() {
        return;
    }
    let mut w = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
    if seen > w.writer.resource_version() {
        w.writer.bookmark(seen);
    }
}

/// A notification and whether it is a *sync* (resync, or a relist that found the object
/// unchanged): those go only to the handlers due for resync.
type Note = (Notification, bool);

/// Applies one popped batch to the store and publishes its notifications
/// (client-go `processDeltas`).
fn process_batch(shared: &Shared, batch: &crate::fifo::PopBatch, compaction: &mut Compaction) {
    let _publishing = shared
        .publishing
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut state = shared.writer.lock().unwrap_or_else(PoisonError::into_inner);
    let writer = &mut state.writer;
    let mut ops = Vec::with_capacity(batch.len());
    let mut notes: Vec<Note> = Vec::with_capacity(batch.len());
    let mut deltas = 0u64;
    // Per key: the ops and notifications of its deltas, oldest first, from the stored state.
    let mut per_key: Vec<(usize, usize)> = Vec::with_capacity(batch.len());
    let before = writer.snapshot();
    for item in batch.iter() {
        let (op_start, note_start) = (ops.len(), notes.len());
        let mut current = before.get(&item.key).cloned();
        for delta in item.deltas.iter() {
            deltas += 1;
            match delta.kind {
                DeltaType::Deleted => {
                    ops.push(Op::Delete(item.key.clone()));
                    current = None;
                    let obj = delta.object.clone();
                    notes.push((Notification::Delete { obj }, false));
                }
                DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                    let new = delta.object.object().clone();
                    // A Sync delta carries the stored object itself: nothing to write.
                    let unchanged = current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &new));
                    if !unchanged {
                        ops.push(Op::Upsert(new.clone()));
                        compaction.written(&item.key, &new);
                    }
                    match current.replace(new.clone()) {
                        Some(old) => {
                            let is_sync = delta.kind == DeltaType::Sync
                                || (delta.kind == DeltaType::Replaced
                                    && old.resource_version() == new.resource_version());
                            notes.push((Notification::Update { old, new }, is_sync));
                        }
                        None => notes.push((
                            Notification::Add {
                                obj: new,
                                is_in_initial_list: item.is_in_initial_list,
                            },
                            false,
                        )),
                    }
                }
            }
        }
        per_key.push((op_start, note_start));
    }
    // Let the version go before writing: held across the writes below, it would be the
    // buffer a later write of this call needs (`apply_key_by_key` writes once per key), and
    // that write would wait for this thread, then copy the store.
    drop(before);
    // The store's resourceVersion may only advance to what the reflector handed over once
    // nothing older is still queued: read it first, then check the queue. A list's version
    // comes with the batch too: the reflector records it only after queueing the list, and
    // this thread may apply the whole list before that.
    let seen = shared
        .seen_rv
        .load(Ordering::SeqCst)
        .max(batch.list_resource_version());
    let rv = if shared.fifo.is_empty() {
        seen.max(writer.resource_version())
    } else {
        writer.resource_version()
    };
    let mut store_batch = WriteBatch::with_capacity(ops.len());
    for op in &ops {
        store_batch.push(op.clone());
    }
    store_batch.set_resource_version(rv);
    let notes = match writer.apply(store_batch) {
        Ok(_) => notes,
        Err(_) => apply_key_by_key(shared, writer, &ops, notes, &per_key, rv),
    };
    shared.metrics.batches.fetch_add(1, Ordering::Relaxed);
    shared.metrics.deltas.fetch_add(deltas, Ordering::Relaxed);
    // Listeners with room get the batch under the writer lock (ordered with registrations);
    // the lock is released before waiting on a full Block listener.
    let syncs = notes.iter().filter(|(_, s)| *s).count();
    if syncs == 0 {
        let all: Arc<[Notification]> = notes.into_iter().map(|(n, _)| n).collect();
        count_published(shared, all.len());
        shared.distributor.publish_releasing(all, state);
        return;
    }
    let due = shared.resync.syncing();
    let without: Arc<[Notification]> = notes
        .iter()
        .filter(|(_, s)| !*s)
        .map(|(n, _)| n.clone())
        .collect();
    if due.is_empty() {
        count_published(shared, without.len());
        shared.distributor.publish_releasing(without, state);
    } else {
        let with: Arc<[Notification]> = notes.into_iter().map(|(n, _)| n).collect();
        count_published(shared, with.len());
        shared.distributor.publish_split(with, without, &due, state);
    }
}

fn count_published(shared: &Shared, n: usize) {
    shared
        .metrics
        .notifications
        .fetch_add(n as u64, Ordering::Relaxed);
}

/// An index function rejected the batch: apply it key by key so that only the keys whose
/// objects fail are left at their old state (and not notified).
fn apply_key_by_key(
    shared: &Shared,
    writer: &mut Writer,
    ops: &[Op],
    notes: Vec<Note>,
    per_key: &[(usize, usize)],
    rv: u64,
) -> Vec<Note> {
    let mut kept = Vec::with_capacity(notes.len());
    for (i, &(op_start, note_start)) in per_key.iter().enumerate() {
        let (op_end, note_end) = per_key
            .get(i + 1)
            .copied()
            .unwrap_or((ops.len(), notes.len()));
        let mut b = WriteBatch::with_capacity(op_end - op_start);
        for op in &ops[op_start..op_end] {
            b.push(op.clone());
        }
        b.set_resource_version(writer.resource_version());
        match writer.apply(b) {
            Ok(_) => kept.extend_from_slice(&notes[note_start..note_end]),
            Err(_) => {
                shared.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    writer.bookmark(rv);
    kept
}
