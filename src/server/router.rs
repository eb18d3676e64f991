//! [`Router`]: every request to the resource, discovery or control endpoint it names.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;

use super::api::Api;
use super::discovery::{self, ServedResource};
use super::response::{ResponseBody, error_response, json_response, not_found, response};
use super::stats::ServerStats;
use super::write::MAX_BODY;
use crate::object::Encoding;
use crate::sim::status::failure;

/// Everything a request handler needs: every resource of the server, in the order given.
#[derive(Debug)]
pub(crate) struct Router {
    /// At least one.
    pub(crate) apis: Vec<Api>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) addr: SocketAddr,
}

impl Router {
    /// Answers one request. Never fails: every problem is an error `Status` response.
    pub(crate) async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let header = |h| {
            req.headers()
                .get(h)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let accept = header(ACCEPT);
        let content_type = header(CONTENT_TYPE);
        let path = req.uri().path().to_owned();
        let query: Vec<(String, String)> = req
            .uri()
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let method = req.method().clone();
        // Bodies are read whole, up to the write limit, before anything is allocated for them.
        let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                let s = if e
                    .downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    failure(
                        413,
                        "RequestEntityTooLarge",
                        format!("the request body is larger than {MAX_BODY} bytes"),
                    )
                } else {
                    failure(400, "BadRequest", format!("reading the request body: {e}"))
                };
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                return error_response(&s, Encoding::Json);
            }
        };
        let r = self
            .route(
                &method,
                &path,
                &query,
                accept.as_deref(),
                content_type.as_deref(),
                &body,
            )
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
        content_type: Option<&str>,
        body: &Bytes,
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
            // Without `resource=`, the flood drivers of every resource.
            (["informer", "v1", "rate"], _) if post => {
                self.each_driver(query, |api| api.set_rate(query))
            }
            (["informer", "v1", action @ ("pause" | "resume")], _) if post => {
                self.each_driver(query, |api| api.pause(*action == "pause"))
            }
            (["informer", "v1", "stats"], true) => match self.control_target(query) {
                Ok(api) => api.stats_doc(),
                Err(r) => *r,
            },
            (["api", "v1", rest @ ..], _) => match self.find("", "v1", rest) {
                Some(api) => {
                    api.resource_request(method, rest, query, accept, content_type, body)
                        .await
                }
                None => not_found(Encoding::Json),
            },
            (["apis", g, v, rest @ ..], _) if !g.is_empty() => match self.find(g, v, rest) {
                Some(api) => {
                    api.resource_request(method, rest, query, accept, content_type, body)
                        .await
                }
                None => not_found(Encoding::Json),
            },
            _ => not_found(Encoding::Json),
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

    /// `f` on the resource `resource=<plural>` names, or on every resource when none is named
    /// (the answer then lists every driver's state, or is the first error).
    fn each_driver(
        &self,
        query: &[(String, String)],
        f: impl Fn(&Api) -> Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        if query.iter().any(|(k, _)| k == "resource") {
            return match self.control_target(query) {
                Ok(api) => f(api),
                Err(r) => *r,
            };
        }
        for api in &self.apis {
            let r = f(api);
            if !r.status().is_success() {
                return r;
            }
        }
        let drivers: Vec<serde_json::Value> = self
            .apis
            .iter()
            .map(|a| {
                let d = a.sim.drive_state();
                serde_json::json!({"resource": a.resource.plural, "rate": d.rate, "paused": d.paused})
            })
            .collect();
        json_response(StatusCode::OK, &serde_json::json!({ "drivers": drivers }))
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
                    &failure(
                        404,
                        "NotFound",
                        format!("resource {plural:?} is not served (served: {served:?})"),
                    ),
                    Encoding::Json,
                ))
            })
    }
}
