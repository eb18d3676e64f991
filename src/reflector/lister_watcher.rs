//! The `ListerWatcher` contract: how the reflector lists and watches one resource, whatever is
//! on the other side (a real API server over HTTP, or the embedded simulator). Upstream:
//! `client-go/tools/cache/listwatch.go`, list/watch options from
//! `apimachinery/pkg/apis/meta/v1/types.go` (`ListOptions`).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::object::{ApiStatus, WatchFormat};

/// Options of one list request (one page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `resourceVersion`: `Some("0")` = any version (served from the API server's cache),
    /// `Some("")`/`None` = most recent (quorum read from etcd), `Some(rv)` = at least `rv` (with
    /// `resourceVersionMatch=NotOlderThan`) or exactly `rv` (continuing a paginated list).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`, when set.
    pub resource_version_match: Option<String>,
    /// `limit`: page size; `None` = everything in one response.
    pub limit: Option<u32>,
    /// `continue`: token from the previous page.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
}

/// Options of one watch request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// Watch changes after this `resourceVersion` (`""` = from now, with the current state
    /// first when `send_initial_events` is set).
    pub resource_version: String,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds`: the server closes the stream cleanly after this long. The reflector
    /// also stops reading after this long itself (client-go sets the same value as the HTTP
    /// request's timeout), so a stalled connection cannot hold it forever.
    pub timeout: Option<Duration>,
    /// `sendInitialEvents=true&resourceVersionMatch=NotOlderThan` (streaming initial list): the
    /// state at `resource_version` or newer (`""`: the most recent, read consistently) arrives
    /// as ADDED events, ended by a bookmark annotated `k8s.io/initial-events-end: "true"`, then
    /// the stream goes on live. A transport sends `resourceVersionMatch=NotOlderThan` whenever
    /// this is set. Servers without the WatchList feature reject it (422 Invalid).
    pub send_initial_events: bool,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
}

/// Why a list or watch request failed, as a transport sees it. The reflector maps these to its
/// phase-named errors and decides between retry, re-watch and relist.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The server answered with an error `Status` (HTTP 4xx/5xx, e.g. 410 Expired, 429).
    #[error("API error {}: {} ({})", .0.code, .0.reason, .0.message)]
    Status(ApiStatus),
    /// The connection failed or broke (refused, reset, TLS, timeout); see
    /// [`TransportErrorKind`] for the distinctions the reflector makes.
    #[error("transport: {0}")]
    Transport(TransportError),
    /// The response body could not be decoded.
    #[error("decode: {0}")]
    Decode(#[from] crate::object::DecodeError),
}

impl ApiError {
    /// A [`TransportErrorKind::ConnectionRefused`] error with `message`.
    pub fn connection_refused(message: impl Into<String>) -> Self {
        ApiError::Transport(TransportError::new(
            TransportErrorKind::ConnectionRefused,
            message,
        ))
    }

    /// A [`TransportErrorKind::ConnectionReset`] error with `message`.
    pub fn connection_reset(message: impl Into<String>) -> Self {
        ApiError::Transport(TransportError::new(
            TransportErrorKind::ConnectionReset,
            message,
        ))
    }

    /// The `Status` of an [`ApiError::Status`], `None` otherwise.
    pub fn status(&self) -> Option<&ApiStatus> {
        match self {
            ApiError::Status(s) => Some(s),
            _ => None,
        }
    }

    /// The transport error kind of an [`ApiError::Transport`], `None` otherwise.
    pub fn transport_kind(&self) -> Option<TransportErrorKind> {
        match self {
            ApiError::Transport(t) => Some(t.kind),
            _ => None,
        }
    }
}

/// How a connection failed. client-go tells these apart
/// (`apimachinery/pkg/util/net/util.go`: `IsConnectionRefused`, `IsProbableEOF`, `IsTimeout`;
/// `apimachinery/pkg/watch/streamwatcher.go`), and so does the reflector:
///
/// | kind | opening a watch | in the middle of a watch stream |
/// |---|---|---|
/// | `ConnectionRefused` | back off, watch again (no relist) | as `ConnectionReset` |
/// | `ConnectionReset` | back off, relist | the stream ended: watch again from the last resourceVersion |
/// | `Timeout` | back off, relist | the stream ended: watch again from the last resourceVersion |
/// | `Other` | back off, relist | back off, relist |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportErrorKind {
    /// Nothing listens at the address (`ECONNREFUSED`): the API server is most likely down or
    /// restarting.
    ConnectionRefused,
    /// The connection was cut: reset by peer, broken pipe, unexpected EOF, an HTTP/2 stream
    /// reset (what client-go calls a "probable EOF").
    ConnectionReset,
    /// A read or connect deadline passed.
    Timeout,
    /// Anything else (TLS, DNS, protocol errors).
    Other,
}

impl std::fmt::Display for TransportErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TransportErrorKind::ConnectionRefused => "connection refused",
            TransportErrorKind::ConnectionReset => "connection reset",
            TransportErrorKind::Timeout => "timeout",
            TransportErrorKind::Other => "transport error",
        })
    }
}

/// A failed connection: its [`TransportErrorKind`] and the underlying error's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct TransportError {
    /// What kind of failure.
    pub kind: TransportErrorKind,
    /// The underlying error's text (for logs).
    pub message: String,
}

impl TransportError {
    /// A transport error of `kind`.
    pub fn new(kind: TransportErrorKind, message: impl Into<String>) -> Self {
        TransportError {
            kind,
            message: message.into(),
        }
    }
}

/// A streamed response body: chunks of bytes as they arrive, cut anywhere.
pub trait Body: Send {
    /// The next chunk; `None` when the server closed the stream cleanly.
    ///
    /// # Cancel safety
    /// Implementations must be cancel safe: dropping the future loses no bytes.
    fn next_chunk(&mut self) -> impl Future<Output = Option<Result<Bytes, ApiError>>> + Send;
}

/// A list page's body as [`ListerWatcher::list_chunks`] hands it over: whole, or as it
/// arrives.
#[derive(Debug)]
pub enum ListBody<B> {
    /// The whole body at once (what [`ListerWatcher::list`] returned).
    Whole(Bytes),
    /// The body's chunks as they arrive.
    Chunks(B),
}

impl<B: Body> Body for ListBody<B> {
    /// The whole body once, or the next received chunk.
    ///
    /// # Errors
    /// As the chunked body's.
    ///
    /// # Cancel safety
    /// As the chunked body's; the whole body is only taken when it is returned.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        match self {
            ListBody::Whole(b) if b.is_empty() => None,
            ListBody::Whole(b) => Some(Ok(std::mem::take(b))),
            ListBody::Chunks(body) => body.next_chunk().await,
        }
    }
}

/// An open watch: the framing announced by the response's `Content-Type`, and its body.
#[derive(Debug)]
pub struct WatchResponse<B> {
    /// Protobuf frames or JSON lines.
    pub format: WatchFormat,
    /// The streamed body.
    pub body: B,
}

/// Lists and watches one resource. Implemented over HTTP for real clusters and by the
/// embedded simulator; the reflector is generic over it.
///
/// `list` returns one page's raw response body (a protobuf envelope or JSON list document);
/// the reflector reads pages through [`list_chunks`](Self::list_chunks) (by default `list`'s
/// body as one chunk) and decodes them as they arrive with [`crate::object::ListStream`]:
/// items are zero-copy slices of the chunks.
pub trait ListerWatcher: Send + Sync + 'static {
    /// The watch body type.
    type Body: Body + 'static;

    /// Fetches one list page.
    ///
    /// # Errors
    /// [`ApiError::Status`] for error responses (410 for an expired `continue` token or a
    /// too-old `resourceVersion`), [`ApiError::Transport`] for connection failures.
    fn list(&self, opts: &ListOptions) -> impl Future<Output = Result<Bytes, ApiError>> + Send;

    /// Fetches one list page as its body arrives, so that the reflector decodes it (and an
    /// informer compacts its objects) chunk by chunk instead of holding it whole: an API
    /// server's watch cache answers a relist at a resourceVersion with every object in one
    /// response. The status is checked before the body is handed over; a failure after that
    /// comes as an error chunk. Default: [`list`](Self::list), as one chunk.
    ///
    /// # Errors
    /// As [`ListerWatcher::list`].
    fn list_chunks(
        &self,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListBody<Self::Body>, ApiError>> + Send {
        async move { self.list(opts).await.map(ListBody::Whole) }
    }

    /// Opens a watch.
    ///
    /// # Errors
    /// As [`ListerWatcher::list`]; an expired `resourceVersion` may instead arrive as an
    /// `ERROR` event on the stream.
    fn watch(
        &self,
        opts: &WatchOptions,
    ) -> impl Future<Output = Result<WatchResponse<Self::Body>, ApiError>> + Send;

    /// What is listed and watched, for logs and the default informer name (e.g.
    /// `v1/pods in default`); the type's name unless overridden.
    fn describe(&self) -> String {
        std::any::type_name::<Self>().to_owned()
    }
}
