//! The simulator's control endpoints, outside the Kubernetes API: `POST /informer/v1/flood`,
//! `POST /informer/v1/faults`, `POST /informer/v1/rate`, `POST /informer/v1/pause`,
//! `POST /informer/v1/resume`, `GET /informer/v1/stats`.

use std::sync::atomic::{AtomicU64, Ordering};

use http::{Response, StatusCode};
use serde_json::json;

use super::api::Api;
use super::response::{ResponseBody, error_response, json_response};
use crate::object::Encoding;
use crate::sim::Fault;
use crate::sim::status::{bad_request, failure};

impl Api {
    /// `POST /informer/v1/flood?events=N`: makes N changes (honouring flow control) and
    /// answers the resulting resourceVersion.
    pub(super) async fn flood(&self, query: &[(String, String)]) -> Response<ResponseBody> {
        let events = query
            .iter()
            .find(|(k, _)| k == "events")
            .and_then(|(_, v)| v.parse::<u64>().ok());
        let Some(events) = events.filter(|&n| n <= 100_000_000) else {
            return error_response(
                &bad_request("events=N (at most 100 million) is required"),
                Encoding::Json,
            );
        };
        match self.sim.flood(events).await {
            Ok(rv) => json_response(
                StatusCode::OK,
                &json!({"resourceVersion": rv.to_string(), "events": events}),
            ),
            Err(e) => error_response(
                &failure(500, "InternalError", e.to_string()),
                Encoding::Json,
            ),
        }
    }

    /// `POST /informer/v1/faults?fault=SPEC[&fault=SPEC...]`: arms one-shot faults
    /// ([`crate::sim::Fault`] text forms such as `list:410`, `watch:429:3`, `stream:reset@5`).
    pub(super) fn inject(&self, query: &[(String, String)]) -> Response<ResponseBody> {
        let mut armed = Vec::new();
        for (_, spec) in query.iter().filter(|(k, _)| k == "fault") {
            match spec.parse::<Fault>() {
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
            return error_response(&bad_request("fault=SPEC is required"), Encoding::Json);
        }
        let names: Vec<String> = armed.iter().map(ToString::to_string).collect();
        for f in armed {
            self.sim.inject(f);
        }
        json_response(StatusCode::OK, &json!({"armed": names}))
    }

    /// `POST /informer/v1/rate?rate=R`: sets the flood driver's rate (changes per second, 0 =
    /// none); answers the driver's state.
    pub(super) fn set_rate(&self, query: &[(String, String)]) -> Response<ResponseBody> {
        let rate = query
            .iter()
            .rev()
            .find(|(k, _)| k == "rate")
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .filter(|r| r.is_finite() && *r >= 0.0 && *r <= 100_000_000.0);
        let Some(rate) = rate else {
            return error_response(
                &bad_request("rate=R (changes per second, 0 to 100 million) is required"),
                Encoding::Json,
            );
        };
        self.sim.set_rate(rate);
        self.drive_doc()
    }

    /// `POST /informer/v1/pause` and `/resume`: stops or restarts the flood driver; answers
    /// its state.
    pub(super) fn pause(&self, paused: bool) -> Response<ResponseBody> {
        if paused {
            self.sim.pause();
        } else {
            self.sim.resume();
        }
        self.drive_doc()
    }

    fn drive_doc(&self) -> Response<ResponseBody> {
        let d = self.sim.drive_state();
        json_response(
            StatusCode::OK,
            &json!({"resource": self.resource.plural, "rate": d.rate, "paused": d.paused}),
        )
    }

    /// `GET /informer/v1/stats`: the simulator's and the server's counters.
    pub(super) fn stats_doc(&self) -> Response<ResponseBody> {
        let s = self.sim.stats();
        let d = self.sim.drive_state();
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
                "rate": d.rate,
                "paused": d.paused,
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
