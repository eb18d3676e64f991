//! Request handling: routes, list, get, watch and the simulator's control endpoints, on top
//! of [`SimServer`]'s [`ListerWatcher`] implementation. Upstream behaviour followed:
//! `apiserver/pkg/endpoints/handlers/get.go` (`ListResource`, `GetResource`),
//! `handlers/watch.go` (`serveWatch`: chunked body, one frame or line per event),
//! `handlers/responsewriters/status.go` (error `Status` bodies with the HTTP code).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::discovery::{self, ServedResource};
use super::filter::{Filter, bad_request, status};
use super::negotiate::{negotiate, partial_metadata};
use super::transcode::JsonTranscoder;
use crate::object::{
    ApiStatus, DEFAULT_FRAME_LIMIT, Encoding, GroupVersionKind, Object, ObjectKey, WatchDecoder,
    WatchEvent, decode_list, encode_list_protobuf, encode_watch_frame,
};
use crate::reflector::{ApiError, Body as _, ListOptions, ListerWatcher, WatchOptions};
use crate::sim::{SimServer, SimWatch};

/// The response body type: whole documents or a streamed watch.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Media type of protobuf documents.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// Media type of protobuf watch streams.
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// Media type of JSON documents and JSON watch streams.
const JSON: &str = "application/json";

/// Counters of one HTTP server (monotonic except `watches_open`).
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Requests received.
    pub requests: AtomicU64,
    /// List requests answered (pages).
    pub lists: AtomicU64,
    /// Watches opened.
    pub watches: AtomicU64,
    /// Watches open now (gauge).
    pub watches_open: AtomicU64,
    /// Bytes of watch streams sent.
    pub watch_bytes: AtomicU64,
    /// Error responses (4xx/5xx) sent.
    pub errors: AtomicU64,
}

/// One served resource: its simulator and how it is presented.
#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) sim: SimServer,
    pub(crate) resource: ServedResource,
    pub(crate) json: Option<JsonTranscoder>,
    /// `true` while new watch streams are held before their first byte (one flag per server).
    pub(crate) hold: watch::Sender<bool>,
    /// The server's counters (shared by its resources).
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) list_gvk: GroupVersionKind,
}

/// Everything a request handler needs: every resource of the server, in the order given.
#[derive(Debug)]
pub(crate) struct Router {
    /// At least one.
    pub(crate) apis: Vec<Api>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) addr: SocketAddr,
}

/// The resource part of a path.
#[derive(Debug, PartialEq, Eq)]
struct Target<'a> {
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    /// `/watch/` in the path (the legacy watch prefix).
    watch_prefix: bool,
}

fn response(code: StatusCode, content_type: &str, body: Bytes) -> Response<ResponseBody> {
    let mut r = Response::new(
        Full::new(body)
            .map_err(|e: Infallible| match e {})
            .boxed_unsync(),
    );
    *r.status_mut() = code;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

fn json_response(code: StatusCode, v: &Value) -> Response<ResponseBody> {
    response(code, JSON, Bytes::from(v.to_string()))
}

impl Router {
    /// Answers one request. Never fails: every problem is an error `Status` response.
    pub(crate) async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let accept = req
            .headers()
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let path = req.uri().path().to_owned();
        let query: Vec<(String, String)> = req
            .uri()
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let r = self
            .route(req.method(), &path, &query, accept.as_deref())
            .await;
        if r.status().is_client_error() || r.status().is_server_error() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    async fn route(
        &self,
        method: &Method,
        path: &str,
        query: &[(String, String)],
        accept: Option<&str>,
    ) -> Response<ResponseBody> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let served: Vec<&ServedResource> = self.apis.iter().map(|a| &a.resource).collect();
        let has_group = |g: &str| !g.is_empty() && served.iter().any(|r| r.group == g);
        let has_gv = |g: &str, v: &str| served.iter().any(|r| r.group == g && r.version == v);
        let read = *method == Method::GET || *method == Method::HEAD;
        let post = *method == Method::POST;
        match (segs.as_slice(), read) {
            (["version"], true) => json_response(StatusCode::OK, &discovery::version()),
            (["healthz" | "livez" | "readyz"], true) => {
                response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
            }
            (["api"], true) => json_response(StatusCode::OK, &discovery::api_versions(self.addr)),
            (["api", v], true) if *v == "v1" => {
                json_response(StatusCode::OK, &discovery::resource_list(v, &served))
            }
            (["apis"], true) => json_response(StatusCode::OK, &discovery::api_groups(&served)),
            (["apis", g], true) if has_group(g) => {
                json_response(StatusCode::OK, &discovery::api_group(g, &served))
            }
            (["apis", g, v], true) if has_group(g) && has_gv(g, v) => json_response(
                StatusCode::OK,
                &discovery::resource_list(&format!("{g}/{v}"), &served),
            ),
            (["informer", "v1", "flood"], _) if post => match self.control_target(query) {
                Ok(api) => api.flood(query).await,
                Err(r) => *r,
            },
            (["informer", "v1", "faults"], _) if post => match self.control_target(query) {
                Ok(api) => api.inject(query),
                Err(r) => *r,
            },
            (["informer", "v1", "stats"], true) => match self.control_target(query) {
                Ok(api) => api.stats_doc(),
                Err(r) => *r,
            },
            (["api", "v1", rest @ ..], _) => match self.find("", "v1", rest) {
                Some(api) => api.resource_request(method, rest, query, accept).await,
                None => not_found(),
            },
            (["apis", g, v, rest @ ..], _) if !g.is_empty() => match self.find(g, v, rest) {
                Some(api) => api.resource_request(method, rest, query, accept).await,
                None => not_found(),
            },
            _ => not_found(),
        }
    }

    /// The resource of `group`/`version` that `rest` (the path after the group version)
    /// names; else the first of that group version (it answers 404 in the encoding the
    /// client accepts); `None` when nothing of that group version is served.
    fn find(&self, group: &str, version: &str, rest: &[&str]) -> Option<&Api> {
        let mut in_gv = self
            .apis
            .iter()
            .filter(|a| a.resource.group == group && a.resource.version == version)
            .peekable();
        let first = in_gv.peek().copied();
        in_gv.find(|a| a.target(rest).is_some()).or(first)
    }

    /// The resource a control request is about: `resource=<plural>` in the query, or the
    /// first one served; a 404 when no served resource has that plural.
    fn control_target(
        &self,
        query: &[(String, String)],
    ) -> Result<&Api, Box<Response<ResponseBody>>> {
        let Some((_, plural)) = query.iter().rev().find(|(k, _)| k == "resource") else {
            return Ok(&self.apis[0]);
        };
        self.apis
            .iter()
            .find(|a| a.resource.plural == *plural)
            .ok_or_else(|| {
                let served: Vec<&str> = self
                    .apis
                    .iter()
                    .map(|a| a.resource.plural.as_str())
                    .collect();
                Box::new(error_response(
                    &status(
                        404,
                        "NotFound",
                        format!("resource {plural:?} is not served (served: {served:?})"),
                    ),
                    Encoding::Json,
                ))
            })
    }
}

/// The 404 of a path that names nothing served.
fn not_found() -> Response<ResponseBody> {
    error_response(
        &status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ),
        Encoding::Json,
    )
}

impl Api {
    /// The encoding of this request's answer, or a 406 response.
    fn encoding(&self, accept: Option<&str>) -> Result<Encoding, Box<Response<ResponseBody>>> {
        negotiate(accept, self.sim.encoding(), self.json.is_some()).ok_or_else(|| {
            let s = status(
                406,
                "NotAcceptable",
                format!(
                    "only the following media types are accepted: {}",
                    match (self.sim.encoding(), self.json.is_some()) {
                        (Encoding::Protobuf, true) =>
                            "application/json, application/vnd.kubernetes.protobuf",
                        (Encoding::Protobuf, false) => "application/vnd.kubernetes.protobuf",
                        (Encoding::Json, _) => "application/json",
                    }
                ),
            );
            Box::new(error_response(&s, Encoding::Json))
        })
    }

    /// Parses `[watch/][namespaces/<ns>/]<plural>[/<name>]`.
    fn target<'a>(&self, rest: &[&'a str]) -> Option<Target<'a>> {
        let (watch_prefix, rest) = match rest {
            ["watch", tail @ ..] => (true, tail),
            _ => (false, rest),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, tail @ ..] if !tail.is_empty() && self.resource.namespaced => {
                (Some(*ns), tail)
            }
            _ => (None, rest),
        };
        match rest {
            [plural] if *plural == self.resource.plural => Some(Target {
                namespace,
                name: None,
                watch_prefix,
            }),
            [plural, name] if *plural == self.resource.plural => Some(Target {
                namespace,
                name: Some(*name),
                watch_prefix,
            }),
            _ => None,
        }
    }

    async fn resource_request(
        &self,
        method: &Method,
        rest: &[&str],
        query: &[(String, String)],
        accept: Option<&str>,
    ) -> Response<ResponseBody> {
        // A metadata-only request (`as=PartialObjectMetadata`): every object has that form.
        let meta_only = partial_metadata(accept);
        let enc = match meta_only {
            Some(e) => e,
            None => match self.encoding(accept) {
                Ok(e) => e,
                Err(r) => return *r,
            },
        };
        let meta_only = meta_only.is_some();
        let Some(target) = self.target(rest) else {
            return error_response(
                &status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource".into(),
                ),
                enc,
            );
        };
        if *method != Method::GET && *method != Method::HEAD {
            return error_response(
                &status(
                    405,
                    "MethodNotAllowed",
                    format!(
                        "the server does not allow this method on the requested resource ({method})"
                    ),
                ),
                enc,
            );
        }
        let q = |k: &str| {
            query
                .iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        let watch = target.watch_prefix || matches!(q("watch"), Some("true" | "1"));
        // A named watch is a watch on the collection with metadata.name=<name>.
        let mut field_selector = q("fieldSelector").unwrap_or("").to_owned();
        if let (true, Some(name)) = (watch, target.name) {
            if !field_selector.is_empty() {
                field_selector.push(',');
            }
            field_selector.push_str(&format!("metadata.name={name}"));
        }
        let filter = match Filter::new(target.namespace, Some(&field_selector)) {
            Ok(f) => f,
            Err(s) => return error_response(&s, enc),
        };
        let label_selector = q("labelSelector")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if watch {
            let send_initial_events = q("sendInitialEvents") == Some("true");
            if send_initial_events && q("resourceVersionMatch") != Some("NotOlderThan") {
                return error_response(
                    &status(
                        422,
                        "Invalid",
                        "resourceVersionMatch: Required value: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
                    ),
                    enc,
                );
            }
            let timeout = match q("timeoutSeconds").map(str::parse::<u64>) {
                None => None,
                Some(Ok(s)) => Some(Duration::from_secs(s)),
                Some(Err(_)) => {
                    return error_response(&bad_request("invalid timeoutSeconds".into()), enc);
                }
            };
            let opts = WatchOptions {
                resource_version: q("resourceVersion").unwrap_or("").to_owned(),
                allow_watch_bookmarks: q("allowWatchBookmarks") == Some("true"),
                timeout,
                send_initial_events,
                label_selector,
                field_selector: None,
            };
            return self.watch(opts, filter, enc, meta_only).await;
        }
        if let Some(name) = target.name {
            return self.get(target.namespace, name, enc, meta_only);
        }
        let limit = match q("limit").filter(|l| !l.is_empty()).map(str::parse::<u32>) {
            None => None,
            Some(Ok(l)) => Some(l),
            Some(Err(_)) => return error_response(&bad_request("invalid limit".into()), enc),
        };
        let opts = ListOptions {
            resource_version: q("resourceVersion").map(str::to_owned),
            resource_version_match: q("resourceVersionMatch")
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            limit,
            continue_token: q("continue").filter(|s| !s.is_empty()).map(str::to_owned),
            label_selector,
            field_selector: None,
        };
        self.stats.lists.fetch_add(1, Ordering::Relaxed);
        let page = if filter.is_empty() {
            self.list_page(&opts, enc, meta_only).await
        } else {
            self.filtered_list_page(&opts, &filter, enc, meta_only)
                .await
        };
        match page {
            Ok(body) => response(StatusCode::OK, content_type(enc), body),
            Err(e) => api_error_response(e, enc),
        }
    }

    /// A list page straight from the simulator, re-encoded when the client asked for the other
    /// encoding.
    async fn list_page(
        &self,
        opts: &ListOptions,
        enc: Encoding,
        meta_only: bool,
    ) -> Result<Bytes, ApiError> {
        let body = self.sim.list(opts).await?;
        if enc == self.sim.encoding() && !meta_only {
            return Ok(body);
        }
        let list = decode_list(body)?;
        let items: Vec<&Object> = list.items.iter().collect();
        self.encode_list(
            enc,
            meta_only,
            &list.resource_version,
            &list.continue_token,
            list.remaining_item_count,
            &items,
        )
    }

    /// A list page restricted by namespace or field selector. The simulator lists everything
    /// at one resourceVersion (the first page) or exactly at the token's resourceVersion (later
    /// pages); this layer filters and pages with its own `continue` token,
    /// `f.<resourceVersion>.<hex of the last key>`.
    async fn filtered_list_page(
        &self,
        opts: &ListOptions,
        filter: &Filter,
        enc: Encoding,
        meta_only: bool,
    ) -> Result<Bytes, ApiError> {
        let (full, after) = match opts.continue_token.as_deref() {
            Some(token) => {
                let (rv, after) = parse_filtered_continue(token).ok_or_else(|| {
                    ApiError::Status(bad_request(format!("invalid continue token {token:?}")))
                })?;
                let full = ListOptions {
                    resource_version: Some(rv.to_string()),
                    resource_version_match: Some("Exact".into()),
                    label_selector: opts.label_selector.clone(),
                    ..Default::default()
                };
                (full, Some(after))
            }
            None => (
                ListOptions {
                    limit: None,
                    continue_token: None,
                    ..opts.clone()
                },
                None,
            ),
        };
        let body = match self.sim.list(&full).await {
            Err(ApiError::Status(s)) if after.is_some() && s.code == 410 => {
                return Err(ApiError::Status(status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
                )));
            }
            r => r?,
        };
        let list = decode_list(body)?;
        let mut items: Vec<&Object> = list
            .items
            .iter()
            .filter(|o| filter.matches(o))
            .filter(|o| after.as_ref().is_none_or(|a| o.key().as_str() > a.as_str()))
            .collect();
        items.sort_by_key(|o| o.key());
        let limit = opts
            .limit
            .filter(|&l| l > 0)
            .map_or(usize::MAX, |l| l as usize);
        let (token, remaining) = if items.len() > limit {
            let remaining = (items.len() - limit) as i64;
            items.truncate(limit);
            let rv = list.resource_version.parse::<u64>().unwrap_or(0);
            let last = items
                .last()
                .map(|o| o.key())
                .unwrap_or_else(|| ObjectKey::from_raw(""));
            (make_filtered_continue(rv, &last), Some(remaining))
        } else {
            (String::new(), None)
        };
        self.encode_list(
            enc,
            meta_only,
            &list.resource_version,
            &token,
            remaining,
            &items,
        )
    }

    fn encode_list(
        &self,
        enc: Encoding,
        meta_only: bool,
        rv: &str,
        token: &str,
        remaining: Option<i64>,
        items: &[&Object],
    ) -> Result<Bytes, ApiError> {
        if meta_only {
            let partial = items
                .iter()
                .map(|o| o.to_partial_object_metadata(enc))
                .collect::<Result<Vec<Object>, _>>()?;
            let refs: Vec<&Object> = partial.iter().collect();
            let gvk = crate::object::partial_gvk(crate::object::PARTIAL_OBJECT_METADATA_LIST);
            return Ok(match enc {
                Encoding::Protobuf => encode_list_protobuf(&gvk, rv, token, remaining, &refs),
                Encoding::Json => {
                    crate::object::encode_list_json(&gvk, rv, token, remaining, &refs)?
                }
            });
        }
        match enc {
            Encoding::Protobuf => {
                if items.iter().any(|o| o.encoding() != Encoding::Protobuf) {
                    return Err(ApiError::Status(status(
                        406,
                        "NotAcceptable",
                        "objects of this resource have no protobuf form".into(),
                    )));
                }
                Ok(encode_list_protobuf(
                    &self.list_gvk,
                    rv,
                    token,
                    remaining,
                    items,
                ))
            }
            Encoding::Json => {
                let mut meta = json!({ "resourceVersion": rv });
                if !token.is_empty() {
                    meta["continue"] = token.into();
                }
                if let Some(n) = remaining {
                    meta["remainingItemCount"] = n.into();
                }
                let mut out = Vec::with_capacity(
                    items.iter().map(|o| o.raw().len() + 64).sum::<usize>() + 128,
                );
                out.extend_from_slice(
                    format!(
                        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
                        Value::from(self.list_gvk.kind.as_str()),
                        Value::from(self.list_gvk.api_version()),
                        meta
                    )
                    .as_bytes(),
                );
                for (i, o) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&self.object_json(o)?);
                }
                out.extend_from_slice(b"]}");
                Ok(Bytes::from(out))
            }
        }
    }

    fn object_json(&self, o: &Object) -> Result<Bytes, ApiError> {
        match (&self.json, o.encoding()) {
            (_, Encoding::Json) => Ok(o.raw().clone()),
            (Some(t), _) => t
                .to_json(o)
                .map_err(|e| ApiError::Status(status(500, "InternalError", e.to_string()))),
            (None, _) => Err(ApiError::Status(status(
                406,
                "NotAcceptable",
                "objects of this resource have no JSON form".into(),
            ))),
        }
    }

    fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        let key = ObjectKey::new(namespace.unwrap_or(""), name);
        let not_found = || {
            status(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", self.resource.plural),
            )
        };
        let Some(obj) = self.sim.get(&key) else {
            return error_response(&not_found(), enc);
        };
        let body = match enc {
            _ if meta_only => obj
                .to_partial_object_metadata(enc)
                .map(|p| p.to_wire())
                .map_err(ApiError::from),
            Encoding::Protobuf if obj.encoding() == Encoding::Protobuf => Ok(obj.to_wire()),
            Encoding::Protobuf => Err(ApiError::Status(status(
                406,
                "NotAcceptable",
                "no protobuf form".into(),
            ))),
            Encoding::Json => self.object_json(&obj),
        };
        match body {
            Ok(b) => response(StatusCode::OK, content_type(enc), b),
            Err(e) => api_error_response(e, enc),
        }
    }

    async fn watch(
        &self,
        opts: WatchOptions,
        filter: Filter,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        let resp = match self.sim.watch(&opts).await {
            Ok(r) => r,
            Err(e) => return api_error_response(e, enc),
        };
        let pass = filter.is_empty() && enc == self.sim.encoding() && !meta_only;
        let mode = if pass {
            Mode::Pass
        } else {
            Mode::Transform(Box::new(Transform {
                decoder: WatchDecoder::new(resp.format, DEFAULT_FRAME_LIMIT).with_compaction(0),
                filter,
                target: enc,
                json: self.json.clone(),
                meta_only,
            }))
        };
        self.stats.watches.fetch_add(1, Ordering::Relaxed);
        self.stats.watches_open.fetch_add(1, Ordering::Relaxed);
        let stream = WatchStream {
            watch: resp.body,
            hold: Some(self.hold.subscribe()),
            mode,
            stats: self.stats.clone(),
            done: false,
        };
        let body = futures_util::stream::unfold(stream, |mut s| async move {
            let item = s.next().await?;
            Some((item.map(Frame::data), s))
        })
        .boxed();
        let ct = match enc {
            Encoding::Protobuf => PROTOBUF_WATCH,
            Encoding::Json => JSON,
        };
        let mut r = Response::new(StreamBody::new(body).boxed_unsync());
        if let Ok(v) = ct.parse() {
            r.headers_mut().insert(CONTENT_TYPE, v);
        }
        r
    }

    async fn flood(&self, query: &[(String, String)]) -> Response<ResponseBody> {
        let events = query
            .iter()
            .find(|(k, _)| k == "events")
            .and_then(|(_, v)| v.parse::<u64>().ok());
        let Some(events) = events.filter(|&n| n <= 100_000_000) else {
            return error_response(
                &bad_request("events=N (at most 100 million) is required".into()),
                Encoding::Json,
            );
        };
        match self.sim.flood(events).await {
            Ok(rv) => json_response(
                StatusCode::OK,
                &json!({"resourceVersion": rv.to_string(), "events": events}),
            ),
            Err(e) => error_response(&status(500, "InternalError", e.to_string()), Encoding::Json),
        }
    }

    /// `POST /informer/v1/faults?fault=SPEC[&fault=SPEC...]`: arms one-shot faults
    /// ([`crate::sim::Fault`] text forms such as `list:410`, `watch:429:3`, `stream:reset@5`).
    fn inject(&self, query: &[(String, String)]) -> Response<ResponseBody> {
        let mut armed = Vec::new();
        for (_, spec) in query.iter().filter(|(k, _)| k == "fault") {
            match spec.parse::<crate::sim::Fault>() {
                Ok(f) => armed.push(f),
                Err(e) => {
                    return error_response(
                        &bad_request(format!("fault {spec:?}: {e}")),
                        Encoding::Json,
                    );
                }
            }
        }
        if armed.is_empty() {
            return error_response(
                &bad_request("fault=SPEC is required".into()),
                Encoding::Json,
            );
        }
        let names: Vec<String> = armed.iter().map(ToString::to_string).collect();
        for f in armed {
            self.sim.inject(f);
        }
        json_response(StatusCode::OK, &json!({"armed": names}))
    }

    fn stats_doc(&self) -> Response<ResponseBody> {
        let s = self.sim.stats();
        let h = &self.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        json_response(
            StatusCode::OK,
            &json!({
                "resource": self.resource.plural,
                "resourceVersion": s.resource_version.to_string(),
                "objects": s.objects,
                "events": s.events,
                "history": s.history,
                "oldestResourceVersion": s.oldest_resource_version.to_string(),
                "simWatchers": s.watchers,
                "requests": l(&h.requests),
                "lists": l(&h.lists),
                "watches": l(&h.watches),
                "watchesOpen": l(&h.watches_open),
                "watchBytes": l(&h.watch_bytes),
                "errors": l(&h.errors),
            }),
        )
    }
}

fn content_type(enc: Encoding) -> &'static str {
    match enc {
        Encoding::Protobuf => PROTOBUF,
        Encoding::Json => JSON,
    }
}

fn make_filtered_continue(rv: u64, last: &ObjectKey) -> String {
    let mut s = format!("f.{rv}.");
    for b in last.as_str().bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_filtered_continue(token: &str) -> Option<(u64, String)> {
    let rest = token.strip_prefix("f.")?;
    let (rv, hex) = rest.split_once('.')?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    Some((rv.parse().ok()?, String::from_utf8(bytes?).ok()?))
}

/// An error `Status` as a response in `enc`, with the status's HTTP code and, for a
/// `retryAfterSeconds`, the `Retry-After` header.
pub(crate) fn error_response(s: &ApiStatus, enc: Encoding) -> Response<ResponseBody> {
    let code = u16::try_from(s.code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .filter(|c| c.as_u16() >= 400)
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match enc {
        Encoding::Protobuf => s.encode_protobuf(),
        Encoding::Json => s.encode_json(),
    };
    let mut r = response(code, content_type(enc), body);
    if let Some(secs) = s.retry_after_seconds
        && let Ok(v) = secs.to_string().parse()
    {
        r.headers_mut().insert(RETRY_AFTER, v);
    }
    r
}

/// Marks a response that must not be sent: the connection is closed instead (a simulated
/// connection failure, e.g. the `refused` fault answer).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropConnection;

fn api_error_response(e: ApiError, enc: Encoding) -> Response<ResponseBody> {
    let s = match e {
        ApiError::Status(s) => s,
        ApiError::Transport(t) => {
            let mut r = error_response(&status(503, "ServiceUnavailable", t.to_string()), enc);
            r.extensions_mut().insert(DropConnection);
            return r;
        }
        other => status(500, "InternalError", other.to_string()),
    };
    error_response(&s, enc)
}

/// How a watch's chunks reach the client.
enum Mode {
    /// The simulator's chunks as they are (same encoding, nothing filtered): no decode.
    Pass,
    /// Decode, filter, and encode each event in the target encoding.
    Transform(Box<Transform>),
}

/// The state of a transformed watch.
struct Transform {
    decoder: WatchDecoder,
    filter: Filter,
    target: Encoding,
    json: Option<JsonTranscoder>,
    /// Send each object's `PartialObjectMetadata` (a metadata-only watch).
    meta_only: bool,
}

/// One watch response body.
struct WatchStream {
    watch: SimWatch,
    /// Until released, the stream sends nothing (see `ServerHandle::hold_watches`).
    hold: Option<watch::Receiver<bool>>,
    mode: Mode,
    stats: Arc<ServerStats>,
    done: bool,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.stats.watches_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl WatchStream {
    async fn next(&mut self) -> Option<Result<Bytes, io::Error>> {
        if self.done {
            return None;
        }
        if let Some(mut rx) = self.hold.take() {
            // An error means the server is gone: go on, the connection closes soon.
            let _ = rx.wait_for(|held| !held).await;
        }
        let r = self.next_inner().await;
        match &r {
            Some(Ok(b)) => {
                self.stats
                    .watch_bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
            }
            Some(Err(_)) | None => self.done = true,
        }
        r
    }

    async fn next_inner(&mut self) -> Option<Result<Bytes, io::Error>> {
        loop {
            let chunk = match self.watch.next_chunk().await {
                Some(Ok(c)) => Some(c),
                Some(Err(e)) => {
                    // A body error makes hyper drop the connection at once, discarding what it
                    // has buffered: let the bytes already yielded reach the socket first, as
                    // they would have before a real connection reset.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Some(Err(io::Error::other(e)));
                }
                None => None,
            };
            let Mode::Transform(t) = &mut self.mode else {
                return chunk.map(Ok);
            };
            let Transform {
                decoder,
                filter,
                target,
                json,
                meta_only,
            } = &mut **t;
            let mut events = Vec::new();
            match chunk {
                Some(c) => {
                    decoder.push(c);
                    loop {
                        match decoder.next_event() {
                            Ok(Some(ev)) => events.push(ev),
                            Ok(None) => break,
                            Err(e) => return Some(Err(io::Error::other(e))),
                        }
                    }
                }
                None => match decoder.finish() {
                    Ok(Some(ev)) => events.push(ev),
                    Ok(None) => return None,
                    Err(e) => return Some(Err(io::Error::other(e))),
                },
            }
            let mut out = Vec::new();
            for ev in &events {
                let keep = match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        filter.matches(o)
                    }
                    WatchEvent::Bookmark(_) | WatchEvent::Error(_) => true,
                };
                if !keep {
                    continue;
                }
                if *meta_only {
                    let partial = |o: &Object| o.to_partial_object_metadata(*target);
                    let ev = match ev {
                        WatchEvent::Added(o) => partial(o).map(WatchEvent::Added),
                        WatchEvent::Modified(o) => partial(o).map(WatchEvent::Modified),
                        WatchEvent::Deleted(o) => partial(o).map(WatchEvent::Deleted),
                        other => Ok(other.clone()),
                    };
                    let r = ev.map_err(io::Error::other).and_then(|ev| match *target {
                        Encoding::Protobuf => {
                            encode_watch_frame(&ev, &mut out);
                            Ok(())
                        }
                        Encoding::Json => crate::object::encode_watch_line(&ev, &mut out)
                            .map_err(io::Error::other),
                    });
                    if let Err(e) = r {
                        return Some(Err(e));
                    }
                    continue;
                }
                let r = match (*target, json.as_ref()) {
                    (Encoding::Protobuf, _) => {
                        encode_watch_frame(ev, &mut out);
                        Ok(())
                    }
                    (Encoding::Json, Some(t)) => {
                        t.watch_line(ev, &mut out).map_err(io::Error::other)
                    }
                    (Encoding::Json, None) => {
                        crate::object::encode_watch_line(ev, &mut out).map_err(io::Error::other)
                    }
                };
                if let Err(e) = r {
                    return Some(Err(e));
                }
            }
            if !out.is_empty() {
                return Some(Ok(Bytes::from(out)));
            }
        }
    }
}
