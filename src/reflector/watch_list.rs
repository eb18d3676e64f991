//! The streaming-list phase (client-go `Reflector.watchList`): a watch with
//! `sendInitialEvents=true` whose events build the state up to the bookmark that ends the
//! initial list, delivered as one `replace`; the same watch then goes on live.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::object::{Object, ObjectKey, WatchEvent};

use super::error::{
    ReflectorError, StoreClosed, is_version_unavailable, is_watch_retriable, retry_after,
};
use super::lister_watcher::{ApiError, ListerWatcher};
use super::machine::{Reflector, State};
use super::metrics::ReflectorMetrics;
use super::stream::{End, OpenWatch, Received};

/// The annotation on the bookmark that ends a streaming initial list
/// (`metav1.InitialEventsAnnotationKey`).
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

impl<L: ListerWatcher> Reflector<L> {
    /// Recovery from a failed streaming list (client-go `isErrorRetriableWithSideEffectsFn`):
    /// refused/429 → backoff and stream again; Expired/TooLarge → stream again at once from
    /// `""`; anything else → list + watch at once.
    fn after_watch_list_failure(&mut self, rv: String, source: ApiError) -> State<L::Body> {
        let retriable = is_watch_retriable(&source);
        let unavailable = is_version_unavailable(&source);
        let wait = retry_after(&source);
        self.report(&ReflectorError::WatchListFailed {
            resource_version: rv.clone(),
            source,
        });
        if retriable {
            let next = State::WatchList {
                resource_version: rv,
            };
            return self.backoff_then(next, wait);
        }
        if unavailable && !rv.is_empty() {
            self.last_rv_unavailable = true;
            return State::WatchList {
                resource_version: String::new(),
            };
        }
        self.fall_back_to_list()
    }

    fn fall_back_to_list(&mut self) -> State<L::Body> {
        ReflectorMetrics::inc(&self.metrics.watch_list_fallbacks);
        State::List {
            resource_version: self.relist_resource_version(),
        }
    }

    pub(super) async fn watch_list(&mut self, rv: String) -> Result<State<L::Body>, StoreClosed> {
        // Not paged: a later event may remove an object already listed, so the store must
        // not queue them as they come.
        self.store.list_begins(false);
        let opts = self.watch_options(&rv, true);
        let timeout = opts.timeout.unwrap_or(self.config.min_watch_timeout);
        let resp = match self.lw.watch(&opts).await {
            Ok(r) => r,
            Err(source) => return Ok(self.after_watch_list_failure(rv, source)),
        };
        ReflectorMetrics::inc(&self.metrics.watches);
        let mut open = Box::new(OpenWatch::new(
            resp,
            rv.clone(),
            timeout,
            self.config.frame_limit,
            self.config.parallel_decode,
        ));
        let mut state: BTreeMap<ObjectKey, Arc<Object>> = BTreeMap::new();
        loop {
            let events = match open.next(&self.metrics).await {
                Received::Events(events) => events,
                Received::Ended(end) => {
                    if let End::TimedOut = end {
                        ReflectorMetrics::inc(&self.metrics.watch_timeouts);
                    }
                    let events = open.events;
                    return Ok(match end {
                        End::Failed(source) | End::Cut(source) => {
                            self.after_watch_list_failure(rv, source)
                        }
                        End::Closed | End::TimedOut => {
                            self.report(&if open.was_very_short() {
                                ReflectorError::VeryShortWatch {
                                    resource_version: rv,
                                }
                            } else {
                                ReflectorError::WatchListIncomplete {
                                    resource_version: rv,
                                    events,
                                }
                            });
                            self.fall_back_to_list()
                        }
                    });
                }
            };
            let mut events = events.into_iter();
            let mut end_rv = None;
            for ev in events.by_ref() {
                match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        let key = o.key();
                        // The store may leave it out (a filter): then an older state goes too.
                        match self.store.listed(vec![Arc::new(o)]).pop() {
                            Some(o) => state.insert(key, o),
                            None => state.remove(&key),
                        };
                    }
                    WatchEvent::Deleted(o) => {
                        state.remove(&o.key());
                    }
                    WatchEvent::Bookmark(o) => {
                        ReflectorMetrics::inc(&self.metrics.bookmarks);
                        if o.meta()
                            .annotations()
                            .get(INITIAL_EVENTS_END)
                            .is_some_and(|v| v == "true")
                        {
                            end_rv = Some(o.resource_version().to_owned());
                            break;
                        }
                    }
                    WatchEvent::Error(status) => {
                        return Ok(self.after_watch_list_failure(rv, ApiError::Status(status)));
                    }
                }
            }
            let Some(served) = end_rv else { continue };
            if self.goes_back(&rv, &served) {
                ReflectorMetrics::inc(&self.metrics.stale_lists);
                self.report(&ReflectorError::StaleList {
                    requested: rv.clone(),
                    served,
                    synced: self.last_rv.clone(),
                });
                self.last_rv_unavailable = true;
                return Ok(if rv.is_empty() {
                    let next = self.relist();
                    self.backoff_then(next, None)
                } else {
                    State::WatchList {
                        resource_version: String::new(),
                    }
                });
            }
            // Counted before the store publishes (see `list`).
            self.set_listed(&served);
            ReflectorMetrics::inc(&self.metrics.watch_lists);
            self.store.replace(state.into_values().collect(), &served)?;
            // The same watch goes on live: events that came after the bookmark in this chunk
            // first.
            let rest: Vec<WatchEvent> = events.collect();
            if !rest.is_empty()
                && let Some(status) = self.handle_events(rest)?
            {
                return Ok(self.after_error_event(status));
            }
            return Ok(State::Stream(open));
        }
    }
}
