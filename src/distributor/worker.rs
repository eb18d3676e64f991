//! A listener's thread: runs its [`EventHandler`] on what its feed delivers, one notification
//! at a time, catching panics (the thread counterpart of
//! [`NotificationStream`](super::NotificationStream)).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam::channel::Receiver;

use super::Notification;
use super::coalesce::CoalesceQueue;
use super::feed::{Msg, Source};
use super::handler::EventHandler;
use super::listener::Listener;

/// The thread's body: handles what `source` delivers until the listener stops.
pub(crate) fn run<H: EventHandler>(handler: H, listener: &Listener, source: Source) {
    match source {
        Source::Channel(rx) => run_channel(handler, listener, &rx),
        Source::Coalesce { queue, doorbell } => run_coalesce(handler, listener, &queue, &doorbell),
    }
}

fn run_channel<H: EventHandler>(mut handler: H, listener: &Listener, rx: &Receiver<Msg>) {
    while let Ok(msg) = rx.recv() {
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
) {
    while doorbell.recv().is_ok() {
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
