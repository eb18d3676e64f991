//! [`decode_frames`]: a batch of watch frames decoded on the reflector's thread together with
//! process-wide helper threads, events back in stream order.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use crossbeam::channel::{Sender, unbounded};

use crate::object::{DecodeError, FrameCache, WatchEvent, WatchFrame};

/// Frames one claim takes. The reflector's thread waits at most for the blocks helpers have
/// claimed and not finished, so a block is a few microseconds of decoding (8 etcd Pods about
/// 8 µs); a claim costs one atomic add and one short lock.
const BLOCK: usize = 8;

/// Fewest frames a batch must hold to be shared with helpers. A live watch at normal load
/// delivers one event per read: it is decoded at once, without waking a thread.
const SHARE_MIN: usize = 4 * BLOCK;

/// Most helper threads: one per core beside the reflector's, at most this many.
const MAX_HELPERS: usize = 7;

/// Decodes `frames` in order, appending their events to `out` and stopping at the first frame
/// that fails (its error is returned; nothing after it is decoded or appended). A batch of at
/// least [`SHARE_MIN`] frames is shared with the helper threads when `share` is set and the
/// machine has more than one core: each thread claims [`BLOCK`] frames at a time, so a
/// helper that is late or not scheduled costs nothing but its claimed block. The result is the
/// same as decoding the frames one by one on this thread.
pub(crate) fn decode_frames(
    frames: Vec<WatchFrame>,
    cache: &mut FrameCache,
    share: bool,
    out: &mut Vec<WatchEvent>,
) -> Option<DecodeError> {
    let pool = if share && frames.len() >= SHARE_MIN {
        Pool::get()
    } else {
        None
    };
    let Some(pool) = pool else {
        out.reserve(frames.len());
        for f in &frames {
            match f.decode(cache) {
                Ok(ev) => out.push(ev),
                Err(e) => return Some(e),
            }
        }
        return None;
    };
    let blocks = frames.len().div_ceil(BLOCK);
    let job = Arc::new(Job {
        frames,
        next: AtomicUsize::new(0),
        failed: AtomicUsize::new(usize::MAX),
        done: Mutex::new(Done::default()),
        finished: Condvar::new(),
    });
    for _ in 0..pool.helpers.min(blocks - 1) {
        // Helpers hold the job only while they work on it: one that comes to it after the
        // batch is done finds it gone, and the frames (slices of received chunks) are freed
        // when this function returns. A helper that is gone (its thread panicked) leaves the
        // work to the others (a panic while decoding is caught: see `Failure::Panic`).
        let _ = pool.jobs.send(Arc::downgrade(&job));
    }
    job.work(cache);
    let mut done = job.lock();
    while done.frames < job.frames.len() {
        done = job
            .finished
            .wait(done)
            .unwrap_or_else(PoisonError::into_inner);
    }
    let mut decoded = std::mem::take(&mut done.blocks);
    drop(done);
    decoded.sort_unstable_by_key(|b| b.start);
    out.reserve(job.frames.len());
    for b in decoded {
        out.extend(b.events);
        // A skipped block starts after a failed one, so the loop never reaches it.
        match b.error {
            None => {}
            Some(Failure::Decode(e)) => return Some(e),
            // Raised here, on the reflector's thread, as decoding alone would have.
            Some(Failure::Panic(p)) => std::panic::resume_unwind(p),
        }
    }
    None
}

/// The helper threads (started on first use) and the channel they take jobs from.
struct Pool {
    jobs: Sender<Weak<Job>>,
    helpers: usize,
}

impl Pool {
    /// The process-wide pool; `None` on a single core or when no helper thread could start.
    fn get() -> Option<&'static Pool> {
        static POOL: OnceLock<Option<Pool>> = OnceLock::new();
        POOL.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let (jobs, rx) = unbounded::<Weak<Job>>();
            let mut helpers = 0;
            for i in 0..cores.saturating_sub(1).min(MAX_HELPERS) {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("informer-decode-{i}"))
                    .spawn(move || {
                        let mut cache = FrameCache::default();
                        for job in rx {
                            if let Some(job) = job.upgrade() {
                                job.work(&mut cache);
                            }
                        }
                    });
                helpers += usize::from(spawned.is_ok());
            }
            (helpers > 0).then_some(Pool { jobs, helpers })
        })
        .as_ref()
    }
}

/// One shared batch: the frames, the next unclaimed index, and the decoded blocks.
struct Job {
    frames: Vec<WatchFrame>,
    next: AtomicUsize,
    /// Start of the earliest block seen failing (`usize::MAX`: none): blocks after it are not
    /// decoded. A block before it always is, even if claimed and started after the failure.
    failed: AtomicUsize,
    done: Mutex<Done>,
    /// Signalled when the last frame's block is in `done`.
    finished: Condvar,
}

/// Blocks decoded so far and how many frames they cover.
#[derive(Default)]
struct Done {
    frames: usize,
    blocks: Vec<Block>,
}

/// The events of frames `start..start + BLOCK` (fewer when one failed; none when skipped
/// after an earlier failure) and what stopped it.
struct Block {
    start: usize,
    events: Vec<WatchEvent>,
    error: Option<Failure>,
}

/// Why a block stopped short.
enum Failure {
    Decode(DecodeError),
    /// Decoding a frame panicked (a bug): the payload, re-raised by the caller. Caught so that
    /// the block is still counted (the caller would otherwise wait for it forever) and the
    /// helper thread lives on.
    Panic(Box<dyn std::any::Any + Send>),
}

impl Job {
    fn lock(&self) -> MutexGuard<'_, Done> {
        // Decoding never panics while the lock is held; a poisoned lock still holds whole blocks.
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims and decodes blocks until none is left. Every claimed block is recorded, decoded
    /// or (when it starts after a failed one) skipped, so the frames recorded reach the total
    /// exactly once all claims are done.
    fn work(&self, cache: &mut FrameCache) {
        let total = self.frames.len();
        loop {
            let start = self.next.fetch_add(BLOCK, Ordering::Relaxed);
            if start >= total {
                return;
            }
            let end = (start + BLOCK).min(total);
            let mut events = Vec::with_capacity(end - start);
            let mut error = None;
            if start < self.failed.load(Ordering::Relaxed) {
                let decoded = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    for f in &self.frames[start..end] {
                        events.push(f.decode(cache)?);
                    }
                    Ok(())
                }));
                error = match decoded {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(Failure::Decode(e)),
                    Err(p) => Some(Failure::Panic(p)),
                };
                if error.is_some() {
                    self.failed.fetch_min(start, Ordering::Relaxed);
                }
            }
            let mut done = self.lock();
            done.frames += end - start;
            done.blocks.push(Block {
                start,
                events,
                error,
            });
            if done.frames == total {
                self.finished.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::object::{
        DEFAULT_FRAME_LIMIT, Encoding, GroupVersionKind, WatchDecoder, WatchFormat,
        encode_watch_frame,
    };

    /// `n` bookmark frames (resourceVersions 1..=n), frame `bad` replaced by bytes that do not
    /// decode; cut by a decoder, with that decoder.
    fn frames(n: usize, bad: Option<usize>) -> (Vec<WatchFrame>, WatchDecoder) {
        let gvk = Arc::new(GroupVersionKind::new("", "v1", "Pod"));
        let mut wire = Vec::new();
        for i in 1..=n {
            if Some(i - 1) == bad {
                wire.extend_from_slice(&4u32.to_be_bytes());
                wire.extend_from_slice(&[0xff; 4]);
            } else {
                let rv = i.to_string();
                let ev = WatchEvent::bookmark(gvk.clone(), &rv, false, Encoding::Protobuf);
                encode_watch_frame(&ev, &mut wire).unwrap();
            }
        }
        let mut d = WatchDecoder::new(WatchFormat::Protobuf, DEFAULT_FRAME_LIMIT);
        d.push(Bytes::from(wire));
        let mut out = Vec::new();
        while let Some(f) = d.next_frame().unwrap() {
            out.push(f);
        }
        assert_eq!(out.len(), n);
        (out, d)
    }

    fn versions(events: &[WatchEvent]) -> Vec<u64> {
        events
            .iter()
            .map(|e| e.object().unwrap().meta().resource_version_u64().unwrap())
            .collect()
    }

    #[test]
    fn shared_decoding_gives_the_events_in_stream_order() {
        for n in [1, SHARE_MIN - 1, SHARE_MIN, 1000] {
            let (f, mut d) = frames(n, None);
            let mut shared = Vec::new();
            assert!(decode_frames(f, d.frame_cache(), true, &mut shared).is_none());
            assert_eq!(versions(&shared), (1..=n as u64).collect::<Vec<_>>());
            let (f, mut d) = frames(n, None);
            let mut alone = Vec::new();
            assert!(decode_frames(f, d.frame_cache(), false, &mut alone).is_none());
            assert_eq!(shared, alone);
        }
    }

    #[test]
    fn a_frame_that_fails_ends_the_batch_after_the_frames_before_it() {
        for bad in [0, 7, 8, 500, 999] {
            let mut errors = Vec::new();
            for share in [true, false] {
                let (f, mut d) = frames(1000, Some(bad));
                let mut out = Vec::new();
                let e = decode_frames(f, d.frame_cache(), share, &mut out)
                    .expect("the bad frame fails");
                assert_eq!(versions(&out), (1..=bad as u64).collect::<Vec<_>>());
                errors.push(e.to_string());
            }
            // The same error, at the same stream offset, shared or not.
            assert_eq!(errors[0], errors[1]);
            assert!(errors[0].contains("truncated"), "{}", errors[0]);
        }
    }
}
