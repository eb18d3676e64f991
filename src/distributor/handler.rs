//! [`EventHandler`] and the closure-based [`HandlerFns`] (client-go `ResourceEventHandler`,
//! `ResourceEventHandlerFuncs` in `tools/cache/controller.go`).

use std::fmt;
use std::sync::Arc;

use super::Notification;
use crate::fifo::DeltaObject;
use crate::object::Object;

/// Receives a listener's notifications, one call at a time, in order, on the listener's own
/// thread and never under a lock of the distributor. A panic in a method is caught, counted
/// ([`ListenerStats::panics`](super::ListenerStats::panics)) and logged, and the next
/// notification is delivered as usual.
pub trait EventHandler: Send + 'static {
    /// An object was added; `is_in_initial_list` is `true` for the initial state.
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool);

    /// An object changed from `old` to `new` (equal resourceVersions: a sync).
    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>);

    /// An object was deleted; `obj` may be a tombstone.
    fn on_delete(&mut self, obj: &DeltaObject);

    /// Dispatches one notification to the method above that matches it.
    fn on_notification(&mut self, n: &Notification) {
        match n {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => self.on_add(obj, *is_in_initial_list),
            Notification::Update { old, new } => self.on_update(old, new),
            Notification::Delete { obj } => self.on_delete(obj),
        }
    }
}

impl<H: EventHandler + ?Sized> EventHandler for Box<H> {
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }

    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        (**self).on_update(old, new);
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        (**self).on_delete(obj);
    }

    fn on_notification(&mut self, n: &Notification) {
        (**self).on_notification(n);
    }
}

type AddFn = Box<dyn FnMut(&Arc<Object>, bool) + Send>;
type UpdateFn = Box<dyn FnMut(&Arc<Object>, &Arc<Object>) + Send>;
type DeleteFn = Box<dyn FnMut(&DeltaObject) + Send>;

/// An [`EventHandler`] made of closures; a missing closure ignores its events.
///
/// # Examples
/// ```
/// use informer::distributor::HandlerFns;
///
/// let handler = HandlerFns::new()
///     .with_add(|obj, initial| println!("add {} (initial: {initial})", obj.key()))
///     .with_delete(|obj| println!("delete {}", obj.key()));
/// # drop(handler);
/// ```
#[derive(Default)]
#[must_use]
pub struct HandlerFns {
    add: Option<AddFn>,
    update: Option<UpdateFn>,
    delete: Option<DeleteFn>,
}

impl HandlerFns {
    /// A handler that ignores everything until closures are set.
    pub fn new() -> Self {
        HandlerFns::default()
    }

    /// Called for adds: `(object, is_in_initial_list)`.
    pub fn with_add(mut self, f: impl FnMut(&Arc<Object>, bool) + Send + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Called for updates: `(old, new)`.
    pub fn with_update(
        mut self,
        f: impl FnMut(&Arc<Object>, &Arc<Object>) + Send + 'static,
    ) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Called for deletes: the object or its tombstone.
    pub fn with_delete(mut self, f: impl FnMut(&DeltaObject) + Send + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl EventHandler for HandlerFns {
    fn on_add(&mut self, obj: &Arc<Object>, is_in_initial_list: bool) {
        if let Some(f) = &mut self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&mut self, old: &Arc<Object>, new: &Arc<Object>) {
        if let Some(f) = &mut self.update {
            f(old, new);
        }
    }

    fn on_delete(&mut self, obj: &DeltaObject) {
        if let Some(f) = &mut self.delete {
            f(obj);
        }
    }
}

impl fmt::Debug for HandlerFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFns")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .finish()
    }
}
