//! A request for the resource: the path parsed, the query turned into list, get or watch
//! options (upstream `apiserver/pkg/endpoints/handlers/get.go` `ListResource`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};

use super::api::Api;
use super::filter::Filter;
use super::negotiate::{partial_metadata, table};
use super::response::{
    ResponseBody, api_error_response, content_type, error_response, not_found, response,
};
use crate::object::Encoding;
use crate::reflector::{ApiError, ListOptions, WatchOptions};
use crate::sim::status::{bad_request, failure};

/// The resource part of a path.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target<'a> {
    pub(super) namespace: Option<&'a str>,
    pub(super) name: Option<&'a str>,
    /// A subresource of the named object: `status` or `scale`.
    pub(super) sub: Option<&'a str>,
    /// `/watch/` in the path (the legacy watch prefix).
    watch_prefix: bool,
}

impl Api {
    /// Parses `[watch/][namespaces/<ns>/]<plural>[/<name>]`.
    pub(super) fn target<'a>(&self, rest: &[&'a str]) -> Option<Target<'a>> {
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
                sub: None,
                watch_prefix,
            }),
            [plural, name] if *plural == self.resource.plural => Some(Target {
                namespace,
                name: Some(*name),
                sub: None,
                watch_prefix,
            }),
            [plural, name, sub @ ("status" | "scale")]
                if *plural == self.resource.plural && !watch_prefix =>
            {
                Some(Target {
                    namespace,
                    name: Some(*name),
                    sub: Some(*sub),
                    watch_prefix,
                })
            }
            _ => None,
        }
    }

    /// Answers a request for the resource: `rest` is the path after the group version,
    /// `body` the request body (empty for reads).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resource_request(
        &self,
        method: &Method,
        rest: &[&str],
        query: &[(String, String)],
        accept: Option<&str>,
        body_type: Option<&str>,
        body: &Bytes,
    ) -> Response<ResponseBody> {
        // A metadata-only request (`as=PartialObjectMetadata`): every object has that form.
        let meta_only = partial_metadata(accept);
        let enc = match meta_only {
            Some(e) => e,
            // A client that takes only Tables (no plain type after them) is answered in JSON.
            None if table(accept) => Encoding::Json,
            None => match self.encoding(accept) {
                Ok(e) => e,
                Err(r) => return *r,
            },
        };
        let meta_only = meta_only.is_some();
        let Some(target) = self.target(rest) else {
            return not_found(enc);
        };
        if *method != Method::GET && *method != Method::HEAD {
            if target.watch_prefix {
                return error_response(
                    &failure(
                        405,
                        "MethodNotAllowed",
                        format!(
                            "the server does not allow this method on the requested resource ({method})"
                        ),
                    ),
                    enc,
                );
            }
            return self
                .write(method, &target, query, body, body_type, enc, meta_only)
                .await;
        }
        match (target.name, target.sub) {
            (Some(name), Some("status")) => {
                return self.get(target.namespace, name, enc, meta_only);
            }
            (Some(_), Some(_)) if !self.scalable() => return not_found(enc),
            (Some(name), Some(_)) => {
                let key = crate::object::ObjectKey::new(target.namespace.unwrap_or(""), name);
                return match self.scale_doc(&key) {
                    Ok(doc) => super::response::json_response(StatusCode::OK, &doc),
                    Err(e) => api_error_response(e, Encoding::Json),
                };
            }
            _ => {}
        }
        let q = |k: &str| {
            query
                .iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        let watch = match q("watch") {
            None | Some("" | "false" | "0") => target.watch_prefix,
            Some("true" | "1") => true,
            Some(other) => {
                return error_response(
                    &bad_request(format!("invalid value for watch: {other:?}")),
                    enc,
                );
            }
        };
        // A named watch is a watch on the collection with metadata.name=<name>.
        let mut field_selector = q("fieldSelector").unwrap_or("").to_owned();
        if let (true, Some(name)) = (watch, target.name) {
            if !field_selector.is_empty() {
                field_selector.push(',');
            }
            field_selector.push_str(&format!("metadata.name={name}"));
        }
        // Selectors are evaluated here: the simulator serves whole collections.
        let filter = match Filter::new(
            &self.resource,
            target.namespace,
            Some(&field_selector),
            q("labelSelector"),
        ) {
            Ok(f) => f,
            Err(s) => return error_response(&s, enc),
        };
        let label_selector = None;
        if watch {
            let send_initial_events = q("sendInitialEvents") == Some("true");
            if send_initial_events && q("resourceVersionMatch") != Some("NotOlderThan") {
                return error_response(
                    &failure(
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
                    return error_response(&bad_request("invalid timeoutSeconds"), enc);
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
        // kubectl's `get` asks for a Table first (JSON only here).
        let as_table = table(accept) && self.encoding(Some("application/json")).is_ok();
        if let Some(name) = target.name {
            if as_table {
                let key = crate::object::ObjectKey::new(target.namespace.unwrap_or(""), name);
                if let Some(obj) = self.sim.get(&key) {
                    return match self.table(&[&obj], obj.resource_version(), "", None) {
                        Ok(b) => response(StatusCode::OK, content_type(Encoding::Json), b),
                        Err(e) => api_error_response(e, Encoding::Json),
                    };
                }
            }
            return self.get(target.namespace, name, enc, meta_only);
        }
        let limit = match q("limit").filter(|l| !l.is_empty()).map(str::parse::<u32>) {
            None => None,
            Some(Ok(l)) => Some(l),
            Some(Err(_)) => return error_response(&bad_request("invalid limit"), enc),
        };
        // ListOptions validation (upstream `ValidateListOptions`).
        let rv_match = q("resourceVersionMatch").filter(|s| !s.is_empty());
        let rv = q("resourceVersion").unwrap_or("");
        let rv_problem = match rv_match {
            None => None,
            Some("NotOlderThan" | "Exact") if rv.is_empty() => Some(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".to_owned(),
            ),
            Some("Exact") if rv == "0" => Some(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".to_owned(),
            ),
            Some("NotOlderThan" | "Exact") => None,
            Some(other) => Some(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            )),
        };
        if let Some(m) = rv_problem {
            return error_response(&failure(422, "Invalid", m), enc);
        }
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
        let enc = if as_table { Encoding::Json } else { enc };
        let page = if filter.is_empty() {
            self.list_page(&opts, enc, meta_only).await
        } else {
            self.filtered_list_page(&opts, &filter, enc, meta_only)
                .await
        };
        let page = match page {
            Ok(body) if as_table => crate::object::decode_list(body)
                .map_err(ApiError::from)
                .and_then(|l| {
                    let items: Vec<&crate::object::Object> = l.items.iter().collect();
                    self.table(
                        &items,
                        &l.resource_version,
                        &l.continue_token,
                        l.remaining_item_count,
                    )
                }),
            other => other,
        };
        match page {
            Ok(body) => response(StatusCode::OK, content_type(enc), body),
            Err(e) => api_error_response(e, enc),
        }
    }
}
