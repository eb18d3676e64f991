//! Error responses: the `Status` body of a non-2xx answer (protobuf or JSON) turned into the
//! reflector's [`ApiError::Status`], with the `Retry-After` header folded in. Upstream:
//! `client-go/rest/request.go` (`transformResponse`, `newUnstructuredResponseError`,
//! `checkWait`), `apimachinery/pkg/api/errors/errors.go` (reasons per code).

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::object::ApiStatus;

/// The `Status` of an error response. A body that decodes as a `Status` (either encoding) is
/// used as it is; anything else (an HTML page from a proxy, an empty body) becomes a `Status`
/// with the HTTP code, the reason upstream assigns to that code, and the start of the body as
/// the message. A `Retry-After: <seconds>` header sets `retry_after_seconds` when the body
/// did not.
pub(crate) fn status_of(code: StatusCode, headers: &HeaderMap, body: &Bytes) -> ApiStatus {
    let mut status = match ApiStatus::decode(body) {
        Ok(s) if s.code != 0 || !s.reason.is_empty() || !s.message.is_empty() => s,
        _ => ApiStatus {
            code: 0,
            status: "Failure".to_owned(),
            reason: reason_for(code).to_owned(),
            message: message_from(code, body),
            cause_reasons: Vec::new(),
            retry_after_seconds: None,
        },
    };
    if status.code == 0 {
        status.code = i32::from(code.as_u16());
    }
    if status.reason.is_empty() {
        status.reason = reason_for(code).to_owned();
    }
    if status.retry_after_seconds.is_none() {
        status.retry_after_seconds = retry_after(headers);
    }
    status
}

/// `Retry-After` in whole seconds (the HTTP-date form is not used by API servers).
fn retry_after(headers: &HeaderMap) -> Option<i32> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim()
        .parse::<u32>()
        .ok()
        .map(|s| s.min(i32::MAX as u32) as i32)
}

/// The `StatusReason` upstream reports for an HTTP code without a `Status` body
/// (`errors.NewGenericServerResponse`).
fn reason_for(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// The first 512 bytes of a non-Status body, as text.
fn message_from(code: StatusCode, body: &Bytes) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(512)]);
    let text = text.trim();
    if text.is_empty() {
        format!("the server responded with HTTP {code} and no body")
    } else {
        format!("the server responded with HTTP {code}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn plain_429_with_retry_after() {
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("7"));
        let s = status_of(
            StatusCode::TOO_MANY_REQUESTS,
            &h,
            &Bytes::from_static(b"slow down"),
        );
        assert_eq!(s.code, 429);
        assert_eq!(s.reason, "TooManyRequests");
        assert_eq!(s.retry_after_seconds, Some(7));
        assert!(s.message.contains("slow down"), "{}", s.message);
    }

    #[test]
    fn protobuf_status_body_wins() {
        let st = ApiStatus {
            code: 410,
            status: "Failure".into(),
            reason: "Expired".into(),
            message: "too old resource version: 1 (5)".into(),
            cause_reasons: vec![],
            retry_after_seconds: None,
        };
        let s = status_of(StatusCode::GONE, &HeaderMap::new(), &st.encode_protobuf());
        assert_eq!(s, st);
    }
}
