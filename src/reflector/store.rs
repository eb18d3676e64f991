//! [`ReflectorStore`]: what the reflector writes into (client-go's `Store` interface as the
//! reflector uses it, `tools/cache/store.go` and `reflector.go`).

use std::sync::Arc;

use crate::object::Object;

use super::error::StoreClosed;

/// One change observed on a watch, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchChange {
    /// ADDED.
    Added(Arc<Object>),
    /// MODIFIED.
    Modified(Arc<Object>),
    /// DELETED (the object's last state).
    Deleted(Arc<Object>),
}

impl WatchChange {
    /// The object carried.
    pub fn object(&self) -> &Arc<Object> {
        match self {
            WatchChange::Added(o) | WatchChange::Modified(o) | WatchChange::Deleted(o) => o,
        }
    }
}

/// The store a reflector writes into: `replace` after a (re)list, `apply` per decoded batch of
/// watch events, `bookmark` when only the resourceVersion moved. The DeltaFIFO implements it;
/// so can anything else (a plain store, a test recorder).
///
/// The reflector guarantees that the resourceVersions it passes never go backwards: a list
/// served at an older version than the reflector already delivered is not passed on (see
/// [`super::ReflectorError::StaleList`]).
pub trait ReflectorStore: Send + Sync {
    /// The complete state at `resource_version`, replacing everything (relist).
    ///
    /// # Errors
    /// [`StoreClosed`] when the consumer has gone: the reflector stops.
    fn replace(&self, items: Vec<Arc<Object>>, resource_version: &str) -> Result<(), StoreClosed>;

    /// Watch changes, oldest first, as one batch (one decoded chunk of the stream).
    ///
    /// # Errors
    /// [`StoreClosed`] when the consumer has gone.
    fn apply(&self, changes: Vec<WatchChange>) -> Result<(), StoreClosed>;

    /// A list begins: its objects come through [`listed`](Self::listed), then
    /// [`replace`](Self::replace) ends it. A list that fails first is abandoned: the next one
    /// begins again. `paged` is `true` for a list read page by page (every object final once
    /// listed, the version checked before any is passed on), `false` for a streaming list
    /// (a later event may remove an object listed before). Default: nothing.
    fn list_begins(&self, paged: bool) {
        let _ = paged;
    }

    /// Objects of a list as they arrive (a batch of a page, or of a streaming list's events),
    /// before the whole list goes to [`replace`](Self::replace): returns them in the form the
    /// store will keep, so that what a page's buffer holds can be released before the next
    /// page arrives (an informer transforms them and a compressing one compacts them here).
    /// It may leave out objects the store will not keep (an informer's filter). The reflector
    /// passes every object it lists through here (or through
    /// [`listed_unchecked`](Self::listed_unchecked)), and only what these return to `replace`.
    ///
    /// During a paged list (see [`list_begins`](Self::list_begins)) a store may also take
    /// them at once and return none: an informer's DeltaFIFO queues a relist's objects as
    /// they come, then `replace` (with what is left) queues the deletions. Default: as they
    /// are.
    fn listed(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        items
    }

    /// Objects of a list whose version the reflector cannot check yet (a JSON list that
    /// names its `metadata` after its items, as the API server writes a custom resource's
    /// list): returned in the form the store will keep, as [`listed`](Self::listed) does, but
    /// never taken. The reflector hands what this returns to [`replace`](Self::replace) once
    /// the list's version is checked (or drops it with a stale list), and sends every later
    /// object of the page this way too, so that the list's order is kept. Default: as they
    /// are.
    fn listed_unchecked(&self, items: Vec<Arc<Object>>) -> Vec<Arc<Object>> {
        items
    }

    /// A bookmark: nothing changed up to `resource_version`. Default: ignored.
    fn bookmark(&self, resource_version: &str) {
        let _ = resource_version;
    }
}
