//! Responses: documents with their media type, and errors as `Status` bodies with the HTTP
//! code (upstream `apiserver/pkg/endpoints/handlers/responsewriters/status.go`).

use std::convert::Infallible;
use std::io;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::object::{ApiStatus, Encoding};
use crate::reflector::ApiError;
use crate::sim::status::failure;

/// The response body type: whole documents or a streamed watch.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// Media type of protobuf documents.
pub(super) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// Media type of protobuf watch streams.
pub(super) const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// Media type of JSON documents and JSON watch streams.
pub(super) const JSON: &str = "application/json";

/// A whole-document response.
pub(super) fn response(
    code: StatusCode,
    content_type: &str,
    body: Bytes,
) -> Response<ResponseBody> {
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

/// A JSON document response.
pub(super) fn json_response(code: StatusCode, v: &Value) -> Response<ResponseBody> {
    response(code, JSON, Bytes::from(v.to_string()))
}

/// The media type of documents in `enc`.
pub(super) fn content_type(enc: Encoding) -> &'static str {
    match enc {
        Encoding::Protobuf => PROTOBUF,
        Encoding::Json => JSON,
    }
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

/// The 404 of a path that names nothing served, in `enc`.
pub(super) fn not_found(enc: Encoding) -> Response<ResponseBody> {
    error_response(
        &failure(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ),
        enc,
    )
}

/// Marks a response that must not be sent: the connection is closed instead (a simulated
/// connection failure, e.g. the `refused` fault answer).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropConnection;

/// The response for an error of the simulator: its `Status`; a transport error (the `refused`
/// fault answer) as a dropped connection; anything else as a 500.
pub(super) fn api_error_response(e: ApiError, enc: Encoding) -> Response<ResponseBody> {
    let s = match e {
        ApiError::Status(s) => s,
        ApiError::Transport(t) => {
            let mut r = error_response(&failure(503, "ServiceUnavailable", t.to_string()), enc);
            r.extensions_mut().insert(DropConnection);
            return r;
        }
        other => failure(500, "InternalError", other.to_string()),
    };
    error_response(&s, enc)
}
