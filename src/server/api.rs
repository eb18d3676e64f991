//! [`Api`]: one served resource, its simulator and how it is presented (encodings, the JSON
//! twins of a protobuf simulator).

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use tokio::sync::watch;

use super::discovery::ServedResource;
use super::negotiate::negotiate;
use super::response::{ResponseBody, error_response};
use super::stats::ServerStats;
use super::transcode::{JsonTranscoder, TranscodeError};
use crate::object::{Encoding, GroupVersionKind, Object};
use crate::reflector::ApiError;
use crate::sim::SimServer;
use crate::sim::status::failure;

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
    /// The server's `namespaces` (creates into a namespace that does not exist are refused).
    pub(crate) namespaces: Option<SimServer>,
}

impl Api {
    /// Whether the kind has a `scale` subresource here (the scalable apps kinds).
    pub(super) fn scalable(&self) -> bool {
        self.resource.group == "apps"
            && matches!(
                self.resource.plural.as_str(),
                "deployments" | "replicasets" | "statefulsets"
            )
    }

    /// The encoding of this request's answer, or a 406 response.
    pub(super) fn encoding(
        &self,
        accept: Option<&str>,
    ) -> Result<Encoding, Box<Response<ResponseBody>>> {
        negotiate(accept, self.sim.encoding(), self.json.is_some()).ok_or_else(|| {
            let s = failure(
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

    /// An object as a JSON document: as it is, or through the transcoder (the JSON twins, or
    /// the Kubernetes schema); a 406 `Status` for a protobuf simulator without one.
    pub(super) fn object_json(&self, o: &Object) -> Result<Bytes, ApiError> {
        let internal =
            |e: TranscodeError| ApiError::Status(failure(500, "InternalError", e.to_string()));
        match (&self.json, o.encoding()) {
            (_, Encoding::Json) => Ok(o.raw()?),
            (Some(t), _) => t.to_json(o).map_err(internal),
            (None, _) => Err(ApiError::Status(failure(
                406,
                "NotAcceptable",
                "objects of this resource have no JSON form".into(),
            ))),
        }
    }
}
