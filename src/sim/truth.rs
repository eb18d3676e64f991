//! [`Truth`]: the simulator's state at one resourceVersion, and [`diff_views`], to check a
//! client's view against it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::object::{Object, ObjectKey};

/// The server's state at one resourceVersion, for verifying a client's view.
#[derive(Clone)]
pub struct Truth {
    /// The resourceVersion this state is at (of the last change).
    pub resource_version: u64,
    /// Every object, by key.
    pub objects: BTreeMap<ObjectKey, Arc<Object>>,
}

impl Truth {
    /// `key → (uid, resourceVersion)`: enough to compare with a cache.
    pub fn versions(&self) -> BTreeMap<ObjectKey, (String, String)> {
        self.objects
            .iter()
            .map(|(k, o)| {
                (
                    k.clone(),
                    (o.uid().to_owned(), o.resource_version().to_owned()),
                )
            })
            .collect()
    }

    /// Compares a client's view (`key → (uid, resourceVersion)`, e.g. a store or a handler's
    /// rebuilt state) with this truth. `None` when equal; otherwise a one-line description:
    /// counts of missing, extra and stale keys with one example of each.
    pub fn diff(&self, got: &BTreeMap<ObjectKey, (String, String)>) -> Option<String> {
        diff_views(&self.versions(), got, self.resource_version)
    }
}

/// Compares two views `key → (uid, resourceVersion)`: `None` when `got` equals `expected`;
/// otherwise a one-line description (sizes, `rv` the expected view reflects, counts of
/// missing, extra and stale keys with one example of each). [`Truth::diff`] uses it; so can
/// a client that computed its expected view another way (e.g. from a recorded trace).
pub fn diff_views(
    expected: &BTreeMap<ObjectKey, (String, String)>,
    got: &BTreeMap<ObjectKey, (String, String)>,
    rv: u64,
) -> Option<String> {
    if got == expected {
        return None;
    }
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(*k)).collect();
    let stale: Vec<_> = expected
        .iter()
        .filter_map(|(k, v)| got.get(k).filter(|g| *g != v).map(|g| (k, g, v)))
        .collect();
    Some(format!(
        "{} objects, expected {} at resourceVersion {rv}; {} missing (e.g. {:?}), {} extra \
         (e.g. {:?}), {} stale (e.g. {:?})",
        got.len(),
        expected.len(),
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first(),
        stale.len(),
        stale.first()
    ))
}

impl fmt::Debug for Truth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Truth")
            .field("resource_version", &self.resource_version)
            .field("objects", &self.objects.len())
            .finish()
    }
}
