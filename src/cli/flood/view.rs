//! The handlers of a flood or replay, each rebuilding a view of the world from its
//! notifications, and the check of the store and every view against the expected objects.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use informer::distributor::EventHandler;
use informer::fifo::DeltaObject;
use informer::object::{Object, ObjectKey, parse_resource_version};
use informer::reflector::ListerWatcher;
use informer::sim::diff_views;
use informer::{HandlerOptions, Informer};

use super::args::Policy;
use super::clock::Clock;

/// A handler's view of the world: what a controller rebuilding state from notifications holds.
pub(super) struct View {
    /// uid and resourceVersion of every object the handler holds.
    objects: HashMap<ObjectKey, (String, String)>,
    /// Server-change-to-handler latency, nanoseconds.
    latency: Histogram<u64>,
    /// Notifications received.
    notifications: u64,
}

/// The [`EventHandler`] that keeps a [`View`].
struct ViewHandler {
    view: Arc<Mutex<View>>,
    clock: Option<Arc<Clock>>,
    /// Time spent per notification by a slow handler.
    delay: Option<Duration>,
    /// Delay owed and not slept yet.
    owed: Duration,
}

impl ViewHandler {
    /// Pays a slow handler's delay (sleeping once at least 1 ms is owed), counts the
    /// notification and its latency; the view, locked.
    fn record(&mut self, obj: &Object) -> MutexGuard<'_, View> {
        if let Some(d) = self.delay {
            self.owed += d;
            if self.owed >= Duration::from_millis(1) {
                let t = Instant::now();
                std::thread::sleep(self.owed);
                self.owed = self.owed.saturating_sub(t.elapsed());
            }
        }
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        view.notifications += 1;
        if let Some(ns) = self.clock.as_ref().and_then(|c| {
            parse_resource_version(obj.resource_version()).and_then(|rv| c.latency_ns(rv))
        }) {
            let _ = view.latency.record(ns.max(1));
        }
        view
    }
}

impl EventHandler for ViewHandler {
    fn on_add(&mut self, obj: &Arc<Object>, _is_in_initial_list: bool) {
        let mut v = self.record(obj);
        v.objects.insert(
            obj.key(),
            (obj.uid().to_owned(), obj.resource_version().to_owned()),
        );
    }

    fn on_update(&mut self, _old: &Arc<Object>, new: &Arc<Object>) {
        let mut v = self.record(new);
        v.objects.insert(
            new.key(),
            (new.uid().to_owned(), new.resource_version().to_owned()),
        );
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        let mut v = self.record(obj.object());
        v.objects.remove(&obj.key());
    }
}

/// Registers `handlers` handlers named `handler-N` on `informer` under `policy`, the last
/// `slow` of them spending `delay` per notification, measuring latency against `clock` if
/// given; their views.
pub(super) fn add_views<L: ListerWatcher>(
    informer: &Informer<L>,
    handlers: u64,
    slow: u64,
    delay: Duration,
    policy: Policy,
    clock: Option<&Arc<Clock>>,
) -> Result<Vec<Arc<Mutex<View>>>, String> {
    let policy = policy.overflow_policy();
    let mut views = Vec::new();
    for i in 0..handlers {
        let view = Arc::new(Mutex::new(View {
            objects: HashMap::new(),
            latency: Histogram::new(3).map_err(|e| e.to_string())?,
            notifications: 0,
        }));
        let is_slow = i >= handlers - slow;
        informer
            .add_event_handler(
                ViewHandler {
                    view: view.clone(),
                    clock: clock.cloned(),
                    delay: is_slow.then_some(delay),
                    owed: Duration::ZERO,
                },
                HandlerOptions::new()
                    .name(format!("handler-{i}"))
                    .policy(policy),
            )
            .map_err(|e| e.to_string())?;
        views.push(view);
    }
    Ok(views)
}

/// Compares the store and every view with `expected` (uid and resourceVersion by key) at
/// resourceVersion `rv`, adding what differs to `problems`; the merged latency histogram and
/// each view's notification count.
pub(super) fn verify<L: ListerWatcher>(
    informer: &Informer<L>,
    views: &[Arc<Mutex<View>>],
    expected: &BTreeMap<ObjectKey, (String, String)>,
    rv: u64,
    problems: &mut Vec<String>,
) -> Result<(Histogram<u64>, Vec<u64>), String> {
    let snapshot = informer.store().snapshot();
    let in_store: BTreeMap<ObjectKey, (String, String)> = snapshot
        .iter()
        .map(|(k, o)| {
            (
                k.clone(),
                (o.uid().to_owned(), o.resource_version().to_owned()),
            )
        })
        .collect();
    if let Some(d) = diff_views(expected, &in_store, rv) {
        problems.push(format!("store: {d}"));
    }
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut per_handler = Vec::new();
    for (i, view) in views.iter().enumerate() {
        let v = view.lock().unwrap_or_else(PoisonError::into_inner);
        let got: BTreeMap<ObjectKey, (String, String)> = v
            .objects
            .iter()
            .map(|(k, x)| (k.clone(), x.clone()))
            .collect();
        if let Some(d) = diff_views(expected, &got, rv) {
            problems.push(format!("handler-{i}: {d}"));
        }
        let _ = latency.add(&v.latency);
        per_handler.push(v.notifications);
    }
    Ok((latency, per_handler))
}
