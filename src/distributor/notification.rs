//! [`Notification`]: what a listener's handler is told (client-go `addNotification`,
//! `updateNotification`, `deleteNotification` in `tools/cache/shared_informer.go`).

use std::fmt;
use std::sync::Arc;

use crate::fifo::DeltaObject;
use crate::object::{Object, ObjectKey};

/// One event for a handler.
#[derive(Clone, PartialEq, Eq)]
pub enum Notification {
    /// An object appeared in the store (or, for a listener added late, was already there).
    Add {
        /// The object.
        obj: Arc<Object>,
        /// `true` while delivering the initial state: the informer's first list, or the cached
        /// objects replayed to a listener added after start.
        is_in_initial_list: bool,
    },
    /// An object changed; a *sync* update (resync, or a relist that found it unchanged) has
    /// equal resourceVersions on both sides.
    Update {
        /// The state the store held before.
        old: Arc<Object>,
        /// The state it holds now.
        new: Arc<Object>,
    },
    /// An object was deleted; a [`DeltaObject::Tombstone`] when the deletion was only detected by
    /// a relist (its object is the last known state).
    Delete {
        /// The deleted object or its tombstone.
        obj: DeltaObject,
    },
}

impl Notification {
    /// The key of the object concerned (for updates, of the new state).
    pub fn key(&self) -> ObjectKey {
        match self {
            Notification::Add { obj, .. } => obj.key(),
            Notification::Update { new, .. } => new.key(),
            Notification::Delete { obj } => obj.key(),
        }
    }
}

impl fmt::Debug for Notification {
    // Objects can be large: show keys and resourceVersions only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notification::Add {
                obj,
                is_in_initial_list,
            } => f
                .debug_struct("Add")
                .field("key", &obj.key())
                .field("resource_version", &obj.resource_version())
                .field("is_in_initial_list", is_in_initial_list)
                .finish(),
            Notification::Update { old, new } => f
                .debug_struct("Update")
                .field("key", &new.key())
                .field("old_resource_version", &old.resource_version())
                .field("new_resource_version", &new.resource_version())
                .finish(),
            Notification::Delete { obj } => f.debug_struct("Delete").field("obj", obj).finish(),
        }
    }
}
