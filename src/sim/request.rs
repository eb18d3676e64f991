//! [`SimRequest`]: the simulator's request log, so tests and tools can check what a client
//! asked for (which resourceVersion a relist used, when a retry came) and what it was answered.

use std::time::Duration;

use crate::reflector::{ApiError, ListOptions, WatchOptions};

/// What was requested.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A list page.
    List(ListOptions),
    /// A watch (streaming lists included: `send_initial_events`).
    Watch(WatchOptions),
}

/// One request the simulated server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRequest {
    /// When it arrived, on tokio's clock, since the server was built (exact under paused
    /// time).
    pub at: Duration,
    /// The request and its options.
    pub kind: RequestKind,
    /// `Ok(rv)`: served (a list page at resourceVersion `rv`, or a watch starting after `rv`);
    /// `Err`: the error answered (injected faults included).
    pub answer: Result<u64, ApiError>,
}

impl SimRequest {
    /// The list options, `None` for a watch.
    pub fn list(&self) -> Option<&ListOptions> {
        match &self.kind {
            RequestKind::List(o) => Some(o),
            RequestKind::Watch(_) => None,
        }
    }

    /// The watch options, `None` for a list.
    pub fn watch(&self) -> Option<&WatchOptions> {
        match &self.kind {
            RequestKind::Watch(o) => Some(o),
            RequestKind::List(_) => None,
        }
    }

    /// The `resourceVersion` asked for (`""` when unset).
    pub fn resource_version(&self) -> &str {
        match &self.kind {
            RequestKind::List(o) => o.resource_version.as_deref().unwrap_or(""),
            RequestKind::Watch(o) => &o.resource_version,
        }
    }

    /// `true` for a list's first page (no `continue` token).
    pub fn is_first_page(&self) -> bool {
        self.list()
            .is_some_and(|o| o.continue_token.as_deref().unwrap_or("").is_empty())
    }

    /// The HTTP status code answered: 200 when served, the `Status` code of an error, 0 for a
    /// transport error.
    pub fn code(&self) -> i32 {
        match &self.answer {
            Ok(_) => 200,
            Err(ApiError::Status(s)) => s.code,
            Err(_) => 0,
        }
    }
}
