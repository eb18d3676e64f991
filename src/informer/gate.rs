//! A stop gate for the informer's async tasks, so that [`Informer::shutdown`] can return only
//! when the reflector and the resync schedule have really stopped. client-go's factory
//! `Shutdown` waits for the informers' goroutines, but its reflector may leave a list running
//! in a goroutine of its own; here no request starts once the shutdown has returned.
//!
//! [`Informer::shutdown`]: super::Informer::shutdown

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

thread_local! {
    /// Whether this thread is inside the poll of a gated task. A `stop` from inside a gated
    /// poll (a lister-watcher shutting an informer down) does not wait: it would wait for
    /// itself, or, with two informers doing so at once, for each other.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside the poll of a gated task.
pub(crate) fn in_gated_poll() -> bool {
    POLLING.get()
}

/// Shared by a gated task and the informer that stops it.
///
/// Aborting a tokio task is not enough on its own: a task being polled on another worker
/// thread finishes that poll first, and the poll may start a list or a watch (a lister-watcher
/// may also block inside a poll). Each poll of a gated task holds the gate's mutex; `stop`
/// raises the flag, then takes the mutex once, so it returns after any poll in progress, and
/// every later poll sees the flag and ends the task without touching the inner future.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    stopped: AtomicBool,
    /// Held for the whole of each poll of the task.
    in_poll: Mutex<()>,
}

impl Gate {
    /// Wraps `future` so that it is never polled again once [`stop`](Self::stop) returned.
    pub(crate) fn guard<F: Future<Output = ()>>(self: &Arc<Self>, future: F) -> Gated<F> {
        Gated {
            gate: self.clone(),
            future: Box::pin(future),
        }
    }

    /// Stops the task: no later poll reaches the inner future, and, unless called from
    /// inside a gated poll (this task's or another's), returns only once no poll of it is in
    /// progress. Idempotent: every call waits the same way.
    pub(crate) fn stop(self: &Arc<Self>) {
        self.stopped.store(true, Ordering::SeqCst);
        if !POLLING.get() {
            drop(self.in_poll.lock().unwrap_or_else(PoisonError::into_inner));
        }
    }
}

/// A future run until its gate is stopped; see [`Gate::guard`].
pub(crate) struct Gated<F> {
    gate: Arc<Gate>,
    future: Pin<Box<F>>,
}

/// Restores the thread's `POLLING` mark, also when the inner poll panics.
struct Polling(bool);

impl Drop for Polling {
    fn drop(&mut self) {
        POLLING.set(self.0);
    }
}

impl<F: Future<Output = ()>> Future for Gated<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let _in_poll = this
            .gate
            .in_poll
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if this.gate.stopped.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        let _restore = Polling(POLLING.replace(true));
        this.future.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::task::Waker;
    use std::thread::JoinHandle;

    type TestTask = Gated<Pin<Box<dyn Future<Output = ()> + Send>>>;

    /// Polls `task` once with a waker that does nothing.
    fn poll_once<F: Future<Output = ()>>(task: &mut Gated<F>) -> Poll<()> {
        Pin::new(task).poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A poll of a task behind a gate, in progress on another thread and blocked until
    /// `release` sends.
    struct Blocked {
        /// Hands the task back once its poll has ended.
        poller: JoinHandle<TestTask>,
        release: mpsc::Sender<()>,
        /// Polls that reached the inner future.
        polls: Arc<AtomicUsize>,
        /// Set when the blocked poll ends.
        left: Arc<AtomicBool>,
    }

    /// Starts a [`Blocked`] poll of a task behind `gate`; returns once the poll has begun.
    fn blocked_poll(gate: &Arc<Gate>) -> Blocked {
        let (entered_tx, entered_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let polls = Arc::new(AtomicUsize::new(0));
        let left = Arc::new(AtomicBool::new(false));
        let inner: Pin<Box<dyn Future<Output = ()> + Send>> = {
            let (polls, left) = (polls.clone(), left.clone());
            Box::pin(std::future::poll_fn(move |_| {
                polls.fetch_add(1, Ordering::SeqCst);
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                left.store(true, Ordering::SeqCst);
                Poll::Pending
            }))
        };
        let mut task = gate.guard(inner);
        let poller = std::thread::spawn(move || {
            assert!(poll_once(&mut task).is_pending());
            task
        });
        entered_rx.recv().unwrap();
        Blocked {
            poller,
            release,
            polls,
            left,
        }
    }

    #[test]
    fn stop_waits_for_the_poll_in_progress_and_no_poll_follows() {
        let gate = Arc::new(Gate::default());
        let blocked = blocked_poll(&gate);
        let stopper = {
            let (gate, left) = (gate.clone(), blocked.left.clone());
            std::thread::spawn(move || {
                gate.stop();
                left.load(Ordering::SeqCst)
            })
        };
        // Release the poll only once `stop` has begun: it must then wait for the poll.
        while !gate.stopped.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        blocked.release.send(()).unwrap();
        assert!(
            stopper.join().unwrap(),
            "stop returned before the poll ended"
        );
        let mut task = blocked.poller.join().unwrap();
        assert!(poll_once(&mut task).is_ready());
        assert_eq!(
            blocked.polls.load(Ordering::SeqCst),
            1,
            "no poll after stop"
        );
    }

    #[test]
    fn stop_from_inside_the_poll_does_not_wait_for_itself() {
        let gate = Arc::new(Gate::default());
        let inner = gate.clone();
        let mut task = gate.guard(std::future::poll_fn(move |_| {
            inner.stop();
            Poll::Pending
        }));
        assert!(poll_once(&mut task).is_pending());
        assert!(poll_once(&mut task).is_ready());
        assert!(!POLLING.get(), "the mark is restored");
    }

    #[test]
    fn stop_from_inside_another_gated_poll_does_not_wait() {
        // Gate `x` is held by a poll blocked on another thread; a poll of gate `y` stops `x`
        // (an informer's lister-watcher shutting another informer down) and must not wait.
        let x = Arc::new(Gate::default());
        let y = Arc::new(Gate::default());
        let blocked = blocked_poll(&x);
        let (done_tx, done_rx) = mpsc::channel();
        let stopper = {
            let x = x.clone();
            let mut task = y.guard(std::future::poll_fn(move |_| {
                x.stop();
                Poll::Pending
            }));
            std::thread::spawn(move || {
                assert!(poll_once(&mut task).is_pending());
                done_tx.send(()).unwrap();
            })
        };
        // A `stop` that waited would wait until the release below: it must be done before.
        let done = done_rx.recv_timeout(std::time::Duration::from_secs(30));
        blocked.release.send(()).unwrap();
        blocked.poller.join().unwrap();
        stopper.join().unwrap();
        assert!(
            done.is_ok(),
            "stop inside a gated poll waited for another poll"
        );
        assert!(x.stopped.load(Ordering::SeqCst));
    }
}
