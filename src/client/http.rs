//! [`HttpListerWatcher`]: list and watch one resource of a real API server over HTTP, through
//! the `kube` crate's client (kubeconfig, in-cluster config, TLS, tokens and exec plugins come
//! from there). Upstream: `client-go/tools/cache/listwatch.go` over `client-go/rest`.

use std::error::Error as StdError;
use std::fmt;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use kube::client::Body as KubeBody;

use super::ApiResource;
use super::status::status_of;
use crate::object::{DecodeError, WatchFormat};
use crate::reflector::{
    ApiError, Body, ListBody, ListOptions, ListerWatcher, TransportError, TransportErrorKind,
    WatchOptions, WatchResponse,
};

/// Largest error body read to decode its `Status` (1 MiB); the rest is dropped.
const MAX_ERROR_BODY: usize = 1 << 20;

/// Default cap on one list page's body: 2 GiB. A page over it fails with
/// [`DecodeError::FrameTooLarge`] after that many bytes, before more is buffered.
pub const DEFAULT_MAX_LIST_BYTES: usize = 2 << 30;

/// A [`ListerWatcher`] over HTTP for one [`ApiResource`].
///
/// - `list` sends `GET <collection>?resourceVersion=&limit=&continue=&labelSelector=&...` and
///   returns the page's body as received (protobuf envelope or JSON document, whichever the
///   server chose), for [`crate::object::decode_list`].
/// - `watch` sends `GET <collection>?watch=1&resourceVersion=&allowWatchBookmarks=true&
///   timeoutSeconds=...` and hands back the body as the chunks hyper receives them (`Bytes`,
///   no copy), with the framing taken from the answer's `Content-Type`
///   (`application/vnd.kubernetes.protobuf;stream=watch` or `application/json`).
/// - Non-2xx answers become [`ApiError::Status`] with the server's `Status` (410 Expired, 429
///   with `retryAfterSeconds` from the body or the `Retry-After` header, 504 with the
///   `ResourceVersionTooLarge` cause, 5xx); connection failures (refused, reset, TLS, auth
///   plugin) become [`ApiError::Transport`] with the [`TransportErrorKind`] the reflector
///   acts on (refused, reset or cut mid-stream, timeout, other).
///
/// Requests go through the `kube::Client` given; build it with [`super::ClientOptions`] or
/// turn off its own retry layer (`Config::default_retry = false`) so that 429s reach the
/// reflector, which owns backoff and retries.
#[derive(Clone)]
pub struct HttpListerWatcher {
    client: kube::Client,
    resource: ApiResource,
    max_list_bytes: usize,
}

impl fmt::Debug for HttpListerWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpListerWatcher")
            .field("resource", &self.resource)
            .field("max_list_bytes", &self.max_list_bytes)
            .finish_non_exhaustive()
    }
}

impl HttpListerWatcher {
    /// Lists and watches `resource` through `client`.
    pub fn new(client: kube::Client, resource: ApiResource) -> Self {
        HttpListerWatcher {
            client,
            resource,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
        }
    }

    /// Sets the cap on one list page's body (default [`DEFAULT_MAX_LIST_BYTES`]).
    #[must_use]
    pub fn max_list_bytes(mut self, bytes: usize) -> Self {
        self.max_list_bytes = bytes;
        self
    }

    /// The resource listed and watched.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// The `kube` client used.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Sends a GET for `uri`; a non-2xx answer is read (up to 1 MiB) and returned as its
    /// `Status`.
    async fn get(&self, uri: &str, accept: &str) -> Result<Response<KubeBody>, ApiError> {
        let req = Request::get(uri)
            .header(ACCEPT, accept)
            .body(KubeBody::empty())
            .map_err(|e| {
                ApiError::Transport(TransportError::new(
                    TransportErrorKind::Other,
                    format!("building request {uri}: {e}"),
                ))
            })?;
        let resp = self.client.send(req).await.map_err(|e| transport(&e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let (parts, body) = resp.into_parts();
        let bytes = read_body(body, MAX_ERROR_BODY, true).await?;
        Err(ApiError::Status(status_of(
            parts.status,
            &parts.headers,
            &bytes,
        )))
    }
}

/// The text of an error and all its sources, `a: b: c`.
pub(crate) fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

fn transport(e: &kube::Error) -> ApiError {
    ApiError::Transport(TransportError::new(transport_kind(e), chain(e)))
}

/// How a connection failed, from the error's source chain (client-go's `IsConnectionRefused`,
/// `IsProbableEOF`, `IsTimeout` in `apimachinery/pkg/util/net/util.go`): an `io::Error` of
/// kind refused, reset/aborted/broken pipe/unexpected EOF or timed out; a hyper error for an
/// incomplete message, a closed or canceled connection, or a timeout.
pub(crate) fn transport_kind(e: &(dyn StdError + 'static)) -> TransportErrorKind {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            match io.kind() {
                K::ConnectionRefused => return TransportErrorKind::ConnectionRefused,
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                    return TransportErrorKind::ConnectionReset;
                }
                K::TimedOut => return TransportErrorKind::Timeout,
                _ => {}
            }
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_timeout() {
                return TransportErrorKind::Timeout;
            }
            if h.is_incomplete_message() || h.is_closed() || h.is_canceled() {
                return TransportErrorKind::ConnectionReset;
            }
        }
        if err.is::<tokio::time::error::Elapsed>() {
            return TransportErrorKind::Timeout;
        }
        cur = err.source();
    }
    TransportErrorKind::Other
}

/// Reads a whole body, up to `limit` bytes. With `truncate`, bytes past the limit are dropped
/// (error bodies); without, a body over the limit is an error. A body of one chunk is returned
/// as that chunk (no copy).
async fn read_body(mut body: KubeBody, limit: usize, truncate: bool) -> Result<Bytes, ApiError> {
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| transport(&e))?;
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        let over = total + data.len() > limit;
        if over {
            if !truncate {
                return Err(ApiError::Decode(DecodeError::FrameTooLarge {
                    offset: 0,
                    len: (total + data.len()) as u64,
                    limit,
                }));
            }
            data.truncate(limit - total);
        }
        total += data.len();
        if first.is_none() && buf.is_empty() {
            first = Some(data);
        } else {
            if let Some(f) = first.take() {
                // Capacity from what was received, never from an announced length.
                buf.reserve(f.len() + data.len());
                buf.extend_from_slice(&f);
            }
            buf.extend_from_slice(&data);
        }
        if over {
            break;
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}

/// The watch framing named by a `Content-Type` header.
///
/// # Errors
/// [`DecodeError::UnknownEncoding`] (carrying the header's first bytes) for anything but
/// protobuf or JSON.
pub fn watch_format(headers: &HeaderMap) -> Result<WatchFormat, DecodeError> {
    let ct = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/vnd.kubernetes.protobuf") {
        Ok(WatchFormat::Protobuf)
    } else if mime.eq_ignore_ascii_case("application/json") || mime.is_empty() {
        // A missing Content-Type is taken as JSON, as client-go's default content type.
        Ok(WatchFormat::Json)
    } else {
        Err(DecodeError::UnknownEncoding {
            start: ct.bytes().take(4).collect(),
        })
    }
}

impl ListerWatcher for HttpListerWatcher {
    type Body = HttpWatchBody;

    /// `group/version/resource`, then ` in <namespace>` when restricted to one.
    fn describe(&self) -> String {
        let r = &self.resource;
        let mut d = format!("{}/{}", r.api_version(), r.resource);
        if let Some(ns) = &r.namespace {
            d.push_str(" in ");
            d.push_str(ns);
        }
        if r.metadata_only {
            d.push_str(" (metadata)");
        }
        d
    }

    /// One list page. The body is returned whole (a page of several chunks is gathered into
    /// one buffer; a single-chunk page is not copied).
    ///
    /// # Errors
    /// [`ApiError::Status`] for non-2xx answers, [`ApiError::Transport`] for connection
    /// failures, [`ApiError::Decode`] for a page over [`HttpListerWatcher::max_list_bytes`].
    async fn list(&self, opts: &ListOptions) -> Result<Bytes, ApiError> {
        let resp = self
            .get(&self.resource.list_uri(opts), &self.resource.list_accept())
            .await?;
        read_body(resp.into_body(), self.max_list_bytes, false).await
    }

    /// One list page as its chunks arrive; more than [`HttpListerWatcher::max_list_bytes`]
    /// ends it with an error chunk.
    ///
    /// # Errors
    /// As [`HttpListerWatcher::list`] (a page over the cap: as a chunk).
    async fn list_chunks(&self, opts: &ListOptions) -> Result<ListBody<HttpWatchBody>, ApiError> {
        let resp = self
            .get(&self.resource.list_uri(opts), &self.resource.list_accept())
            .await?;
        Ok(ListBody::Chunks(HttpWatchBody {
            body: resp.into_body(),
            done: false,
            left: self.max_list_bytes,
            limit: self.max_list_bytes,
        }))
    }

    /// Opens a watch; the body streams until the server ends it (`timeoutSeconds`, an ERROR
    /// event) or the connection breaks.
    ///
    /// # Errors
    /// As [`HttpListerWatcher::list`]; an unknown `Content-Type` is [`ApiError::Decode`].
    async fn watch(&self, opts: &WatchOptions) -> Result<WatchResponse<HttpWatchBody>, ApiError> {
        let resp = self
            .get(
                &self.resource.watch_uri(opts),
                &self.resource.watch_accept(),
            )
            .await?;
        let format = watch_format(resp.headers())?;
        Ok(WatchResponse {
            format,
            body: HttpWatchBody {
                body: resp.into_body(),
                done: false,
                left: usize::MAX,
                limit: usize::MAX,
            },
        })
    }
}

/// The body of an HTTP watch, or of a list page read as it arrives
/// ([`ListerWatcher::list_chunks`]): hyper's received chunks, handed on as they are.
pub struct HttpWatchBody {
    body: KubeBody,
    done: bool,
    /// Bytes the body may still bring (a list page's cap; unbounded for a watch, whose
    /// frames the decoder limits).
    left: usize,
    limit: usize,
}

impl fmt::Debug for HttpWatchBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpWatchBody")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Body for HttpWatchBody {
    /// The next received chunk; `None` when the server ended the response.
    ///
    /// # Errors
    /// [`ApiError::Transport`] when the connection broke mid-stream.
    ///
    /// # Cancel safety
    /// Cancel safe: a chunk is only taken from hyper when it is returned.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        while !self.done {
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(transport(&e)));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        if data.len() > self.left {
                            self.done = true;
                            return Some(Err(ApiError::Decode(DecodeError::FrameTooLarge {
                                // Where the chunk that crosses the cap starts.
                                offset: (self.limit - self.left) as u64,
                                len: (self.limit - self.left + data.len()) as u64,
                                limit: self.limit,
                            })));
                        }
                        self.left -= data.len();
                        return Some(Ok(data));
                    }
                }
            }
        }
        None
    }
}
