//! A listener's thread: runs its [`EventHandler`] on what its feed delivers, one notification
//! at a time, catching panics (the thread counterpart of
//! [`NotificationStream`](super::NotificationStream)).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam::channel::{Receiver, TryRecvError};

use super::Notification;
use super::coalesce::CoalesceQueue;
use super::feed::{Msg, Source};
use super::handler::EventHandler;
use super::listener::Listener;
use super::wakeup::{Patience, Wakeup};

/// The thread's body: handles what `source` delivers until the listener stops, sleeping in
/// `wakeup` while there is nothing to handle.
pub(crate) fn run<H: EventHandler>(
    handler: H,
    listener: &Listener,
    source: Source,
    wakeup: &Wakeup,
) {
    wakeup.register();
    match source {
        Source::Channel(rx) => run_channel(handler, listener, &rx, wakeup),
        Source::Coalesce { queue, doorbell } => {
            run_coalesce(handler, listener, &queue, &doorbell, wakeup)
        }
    }
}

/// The next message, sleeping while there is none; `None` once the channel is disconnected or
/// the publishing side is gone (after what was queued).
fn next<T>(rx: &Receiver<T>, wakeup: &Wakeup, patience: &mut Patience) -> Option<T> {
    loop {
        match rx.try_recv() {
            Ok(msg) => return Some(msg),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if wakeup.is_closed() => return None,
            Err(TryRecvError::Empty) => wakeup.wait(patience, || !rx.is_empty()),
        }
    }
}

fn run_channel<H: EventHandler>(
    mut handler: H,
    listener: &Listener,
    rx: &Receiver<Msg>,
    wakeup: &Wakeup,
) {
    let mut patience = Patience::default();
    while let Some(msg) = next(rx, wakeup, &mut patience) {
        match msg {
            Msg::Batch(batch) => handle(&mut handler, listener, &batch),
            Msg::BatchThen(batch, marker) => {
                handle(&mut handler, listener, &batch);
                drop(marker);
            }
            Msg::Marker(marker) => drop(marker),
            Msg::Stop => break,
        }
        if listener.stop_requested() && rx.is_empty() {
            break;
        }
    }
    // Release markers queued behind the stop; later ones fail to send and release themselves.
    while let Ok(msg) = rx.try_recv() {
        drop(msg);
    }
}

fn run_coalesce<H: EventHandler>(
    mut handler: H,
    listener: &Listener,
    queue: &CoalesceQueue,
    doorbell: &Receiver<()>,
    wakeup: &Wakeup,
) {
    let mut patience = Patience::default();
    while next(doorbell, wakeup, &mut patience).is_some() {
        let taken = queue.take();
        handle(&mut handler, listener, &taken.items);
        drop(taken.markers);
        if taken.stopped {
            break;
        }
    }
}

/// Hands `batch` to the handler, one notification at a time, catching panics.
fn handle<H: EventHandler>(handler: &mut H, listener: &Listener, batch: &[Notification]) {
    if batch.is_empty() {
        return;
    }
    let metrics = listener.metrics();
    let start = Instant::now();
    for n in batch {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| handler.on_notification(n))) {
            report_panic(listener, n, payload.as_ref());
        }
    }
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    metrics.handler_nanos.fetch_add(nanos, Ordering::Relaxed);
    metrics
        .delivered
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
}

fn report_panic(listener: &Listener, n: &Notification, payload: &(dyn Any + Send)) {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    };
    let metrics = listener.metrics();
    metrics.panics.fetch_add(1, Ordering::Relaxed);
    tracing::error!(
        listener = listener.name(),
        id = %listener.id(),
        key = ?n.key(),
        panic = %msg,
        "event handler panicked; the listener goes on with the next notification"
    );
    *metrics
        .last_panic
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(msg);
}
