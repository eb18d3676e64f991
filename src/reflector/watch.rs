//! The watch phase (client-go `Reflector.watch`, `handleAnyWatch`): open a watch, apply its
//! events batch by batch, and decide what its end or an ERROR event leads to.

use std::sync::Arc;
use std::time::Duration;

use crate::object::{ApiStatus, Str, WatchEvent};

use super::error::{
    ReflectorError, StoreClosed, is_too_many_requests, is_watch_retriable, retry_after,
};
use super::lister_watcher::{ListerWatcher, WatchOptions};
use super::machine::{Reflector, State};
use super::metrics::ReflectorMetrics;
use super::store::WatchChange;
use super::stream::{End, OpenWatch, Received};

impl<L: ListerWatcher> Reflector<L> {
    /// `timeoutSeconds` for a watch: whole seconds drawn from `[min, 2 × min)`, at least 1.
    fn watch_timeout(&mut self) -> Duration {
        let min = self.config.min_watch_timeout.as_secs_f64();
        let secs = (min * (1.0 + self.rng.f64())) as u64;
        Duration::from_secs(secs.max(1))
    }

    pub(super) fn watch_options(&mut self, rv: &str, send_initial_events: bool) -> WatchOptions {
        WatchOptions {
            resource_version: rv.to_owned(),
            allow_watch_bookmarks: true,
            timeout: Some(self.watch_timeout()),
            send_initial_events,
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        }
    }

    pub(super) async fn watch(&mut self, rv: String) -> State<L::Body> {
        let opts = self.watch_options(&rv, false);
        let timeout = opts.timeout.unwrap_or(self.config.min_watch_timeout);
        match self.lw.watch(&opts).await {
            Ok(resp) => {
                ReflectorMetrics::inc(&self.metrics.watches);
                State::Stream(Box::new(OpenWatch::new(
                    resp,
                    rv,
                    timeout,
                    self.config.frame_limit,
                    self.config.parallel_decode,
                )))
            }
            Err(source) => {
                let retriable = is_watch_retriable(&source);
                let wait = retry_after(&source);
                self.report(&ReflectorError::WatchStartFailed {
                    resource_version: rv.clone(),
                    source,
                });
                let next = if retriable {
                    State::Watch {
                        resource_version: rv,
                    }
                } else {
                    self.relist()
                };
                self.backoff_then(next, wait)
            }
        }
    }

    pub(super) async fn stream(
        &mut self,
        mut open: Box<OpenWatch<L::Body>>,
    ) -> Result<State<L::Body>, StoreClosed> {
        loop {
            let received = tokio::select! {
                // A request first: a flooding watch must not hold it back.
                biased;
                () = Self::relist_requested(self.relist_requests.as_deref()) => {
                    // The watch is dropped (its connection closed) with the state.
                    return Ok(self.relist_on_request());
                }
                r = open.next(&self.metrics) => r,
            };
            match received {
                Received::Events(events) => {
                    if let Some(status) = self.handle_events(events)? {
                        return Ok(self.after_error_event(status));
                    }
                }
                Received::Ended(end) => return Ok(self.after_end(end, &open)),
            }
        }
    }

    /// A watch stream ended without an ERROR event.
    fn after_end(&mut self, end: End, open: &OpenWatch<L::Body>) -> State<L::Body> {
        match end {
            End::Closed | End::TimedOut | End::Cut(_) => {
                if let End::TimedOut = end {
                    ReflectorMetrics::inc(&self.metrics.watch_timeouts);
                }
                if let End::Cut(e) = end {
                    self.report(&ReflectorError::WatchStreamFailed(e));
                }
                if open.was_very_short() {
                    // Reopened at once, such a watch would spin: client-go reports it, backs
                    // off and relists.
                    self.report(&ReflectorError::VeryShortWatch {
                        resource_version: open.resource_version.clone(),
                    });
                    let next = self.relist();
                    return self.backoff_then(next, None);
                }
                State::Watch {
                    resource_version: self.last_rv.clone(),
                }
            }
            End::Failed(e) => {
                // Bytes that do not decode leave the cache possibly behind: relist, after the
                // backoff so a server sending garbage is not hammered.
                self.report(&ReflectorError::WatchStreamFailed(e));
                let next = self.relist();
                self.backoff_then(next, None)
            }
        }
    }

    /// An ERROR event ends the watch: 429 → watch again after the backoff; anything else →
    /// relist at the last resourceVersion (never `""` first) after the backoff, as client-go's
    /// `BackoffUntil` around `ListAndWatch`: a server answering every watch with 410 is not
    /// relisted in a tight loop.
    pub(super) fn after_error_event(&mut self, status: ApiStatus) -> State<L::Body> {
        let too_many = is_too_many_requests(&status);
        let wait = status
            .retry_after_seconds
            .map(|r| Duration::from_secs(r.max(0) as u64));
        self.report(&ReflectorError::WatchErrorEvent(status));
        let next = if too_many {
            State::Watch {
                resource_version: self.last_rv.clone(),
            }
        } else {
            self.relist()
        };
        self.backoff_then(next, wait)
    }

    /// Applies decoded events to the store as one batch; returns the first ERROR's status
    /// (events after it are dropped: the server closes the stream after an ERROR).
    pub(super) fn handle_events(
        &mut self,
        events: Vec<WatchEvent>,
    ) -> Result<Option<ApiStatus>, StoreClosed> {
        let mut changes = Vec::with_capacity(events.len());
        let mut error = None;
        let mut bookmark: Option<Str> = None;
        // Whether the newest event is the bookmark (else it is the last change).
        let mut bookmark_last = false;
        for ev in events {
            let change = match ev {
                WatchEvent::Added(o) => WatchChange::Added(Arc::new(o)),
                WatchEvent::Modified(o) => WatchChange::Modified(Arc::new(o)),
                WatchEvent::Deleted(o) => WatchChange::Deleted(Arc::new(o)),
                WatchEvent::Bookmark(o) => {
                    ReflectorMetrics::inc(&self.metrics.bookmarks);
                    bookmark = Some(o.meta().resource_version().into());
                    bookmark_last = true;
                    continue;
                }
                WatchEvent::Error(s) => {
                    error = Some(s);
                    break;
                }
            };
            bookmark_last = false;
            changes.push(change);
        }
        // The newest resourceVersion, taken once per batch (a slice of its frame, not a copy).
        let newest = if bookmark_last {
            bookmark.clone()
        } else {
            changes
                .last()
                .map(|c| Str::from(c.object().meta().resource_version()))
        };
        if !changes.is_empty() {
            self.store.apply(changes)?;
        }
        if let Some(rv) = newest {
            self.advance(&rv);
        }
        // A bookmark older than what was delivered (a server going back) is not passed on:
        // the store's resourceVersion never moves backwards (the `ReflectorStore` contract).
        if let Some(rv) = bookmark
            && !self.is_behind(&rv)
        {
            self.store.bookmark(&rv);
        }
        Ok(error)
    }
}
