//! [`CacheSyncError`]: which informers a sync wait gave up on.

use std::fmt;

/// A cache sync wait ended before every informer it waited for had synced (client-go's
/// `WaitForCacheSync` returns `false`; this says which ones and why).
///
/// # Examples
/// ```
/// # async fn demo(informer: informer::Informer<informer::HttpListerWatcher>) {
/// use std::time::Duration;
/// if let Err(e) = informer.wait_for_cache_sync(Duration::from_secs(30)).await {
///     eprintln!("{e}"); // "not synced after the wait: v1/pods"
///     assert_eq!(e.not_synced(), [informer.name()]);
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CacheSyncError {
    not_synced: Vec<String>,
    stopped: bool,
}

impl CacheSyncError {
    pub(crate) fn new(mut not_synced: Vec<String>, stopped: bool) -> Self {
        not_synced.sort();
        CacheSyncError {
            not_synced,
            stopped,
        }
    }

    /// The names of the informers that had not synced, sorted.
    pub fn not_synced(&self) -> &[String] {
        &self.not_synced
    }

    /// `true` when an informer waited for had been shut down (so it never will sync), `false`
    /// when the wait timed out.
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

impl fmt::Display for CacheSyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.stopped {
            "shut down before syncing"
        } else {
            "not synced after the wait"
        };
        write!(f, "{why}: {}", self.not_synced.join(", "))
    }
}
