//! Get: one object by name (upstream `apiserver/pkg/endpoints/handlers/get.go`
//! `GetResource`).

use http::{Response, StatusCode};

use super::api::Api;
use super::response::{ResponseBody, api_error_response, content_type, error_response, response};
use crate::object::{Encoding, Object, ObjectKey};
use crate::reflector::ApiError;
use crate::sim::status::failure;

impl Api {
    /// The object `namespace/name` in `enc` (its `PartialObjectMetadata` when `meta_only`), or a
    /// 404.
    pub(super) fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        let key = ObjectKey::new(namespace.unwrap_or(""), name);
        let not_found = || {
            failure(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", self.resource.plural),
            )
        };
        let Some(obj) = self.sim.get(&key) else {
            return error_response(&not_found(), enc);
        };
        self.object_response(StatusCode::OK, &obj, enc, meta_only)
    }

    /// `obj` as a response body in `enc` (its `PartialObjectMetadata` when `meta_only`).
    pub(super) fn object_response(
        &self,
        code: StatusCode,
        obj: &Object,
        enc: Encoding,
        meta_only: bool,
    ) -> Response<ResponseBody> {
        let body = match enc {
            _ if meta_only => obj
                .to_partial_object_metadata(enc)
                .and_then(|p| p.to_wire())
                .map_err(ApiError::from),
            Encoding::Protobuf if obj.encoding() == Encoding::Protobuf => {
                obj.to_wire().map_err(ApiError::from)
            }
            Encoding::Protobuf => Err(ApiError::Status(failure(
                406,
                "NotAcceptable",
                "no protobuf form".into(),
            ))),
            Encoding::Json => self.object_json(obj),
        };
        match body {
            Ok(b) => response(code, content_type(enc), b),
            Err(e) => api_error_response(e, enc),
        }
    }
}
