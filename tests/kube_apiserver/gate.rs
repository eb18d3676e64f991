//! [`Gate`]: a [`ListerWatcher`] around the HTTP one that a test can cut off from the real
//! server, and pause between list pages.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use informer::client::{HttpListerWatcher, HttpWatchBody};
use informer::reflector::{
    ApiError, Body, ListOptions, ListerWatcher, WatchOptions, WatchResponse,
};

/// Announces a paused request (first) and resumes it (second).
pub type Pause = (
    tokio::sync::oneshot::Sender<()>,
    tokio::sync::oneshot::Receiver<()>,
);

/// A [`ListerWatcher`] around the HTTP one that a test can cut off: while `blocked`, requests
/// fail as refused connections and open watch streams end as reset (the API server looks
/// down to the reflector). Every list request's options are recorded.
#[derive(Clone)]
pub struct Gate {
    inner: HttpListerWatcher,
    blocked: tokio::sync::watch::Sender<bool>,
    /// Every list request's options, in order.
    pub lists: Arc<Mutex<Vec<ListOptions>>>,
    /// When set, the first request for a second page waits here (the test compacts etcd
    /// meanwhile) after announcing itself on `paused`.
    pub pause_second_page: Arc<Mutex<Option<Pause>>>,
}

impl Gate {
    /// Around `inner`, open.
    pub fn new(inner: HttpListerWatcher) -> Self {
        Gate {
            inner,
            blocked: tokio::sync::watch::Sender::new(false),
            lists: Arc::default(),
            pause_second_page: Arc::default(),
        }
    }

    /// Cuts the server off (`true`) or lets it through again.
    pub fn block(&self, on: bool) {
        self.blocked.send_replace(on);
    }

    fn refused(&self) -> Option<ApiError> {
        (*self.blocked.borrow()).then(|| ApiError::connection_refused("gate closed by the test"))
    }
}

/// A watch body that ends as reset when the gate closes.
pub struct GateBody {
    inner: HttpWatchBody,
    blocked: tokio::sync::watch::Receiver<bool>,
}

impl Body for GateBody {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        if *self.blocked.borrow() {
            return Some(Err(ApiError::connection_reset("gate closed by the test")));
        }
        tokio::select! {
            chunk = self.inner.next_chunk() => chunk,
            _ = self.blocked.wait_for(|b| *b) => {
                Some(Err(ApiError::connection_reset("gate closed by the test")))
            }
        }
    }
}

impl ListerWatcher for Gate {
    type Body = GateBody;

    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        self.lists.lock().unwrap().push(opts.clone());
        if let Some(e) = self.refused() {
            return Err(e);
        }
        if opts.continue_token.is_some() {
            let pause = self.pause_second_page.lock().unwrap().take();
            if let Some((paused, resume)) = pause {
                let _ = paused.send(());
                let _ = resume.await;
            }
        }
        self.inner.list(opts).await
    }

    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<GateBody>, ApiError> {
        if let Some(e) = self.refused() {
            return Err(e);
        }
        let w = self.inner.watch(opts).await?;
        Ok(WatchResponse {
            format: w.format,
            body: GateBody {
                inner: w.body,
                blocked: self.blocked.subscribe(),
            },
        })
    }
}
