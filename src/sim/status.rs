//! The error `Status`es a real API server answers with, worded as upstream words them
//! (`apiserver/pkg/storage/errors.go`, `storage/cacher/watch_cache.go`,
//! `storage/etcd3/store.go`), so clients can be tested on the real text.

use crate::object::ApiStatus;

/// A failure `Status` with `code`, `reason` and `message`.
pub(crate) fn failure(code: i32, reason: &str, message: String) -> ApiStatus {
    ApiStatus {
        code,
        status: "Failure".to_owned(),
        reason: reason.to_owned(),
        message,
        cause_reasons: Vec::new(),
        retry_after_seconds: None,
    }
}

/// 410 Expired: a watch or exact list from a resourceVersion older than the history window.
pub(crate) fn too_old(requested: u64, oldest: u64) -> ApiStatus {
    failure(
        410,
        "Expired",
        format!("too old resource version: {requested} ({oldest})"),
    )
}

/// 410 Expired: a `continue` token whose list can no longer be continued consistently.
pub(crate) fn continue_expired() -> ApiStatus {
    failure(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You \
         can start a new list without the continue parameter, or use the continue token in this \
         response to retrieve the remainder of the results. Continuing with the provided token \
         results in an inconsistent list - objects that were created, modified, or deleted \
         between the time the first chunk was returned and now may show up in the list."
            .to_owned(),
    )
}

/// 504 Timeout with cause `ResourceVersionTooLarge`: a resourceVersion the server has not
/// reached.
pub(crate) fn too_large(requested: u64, current: u64, retry_after: u32) -> ApiStatus {
    let mut s = failure(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
    );
    s.cause_reasons.push("ResourceVersionTooLarge".to_owned());
    s.retry_after_seconds = retry_after_seconds(retry_after);
    s
}

/// 400 BadRequest.
pub(crate) fn bad_request(message: impl Into<String>) -> ApiStatus {
    failure(400, "BadRequest", message.into())
}

/// 400 for a request with a label or field selector, which the simulator does not evaluate;
/// `None` when neither is set.
pub(crate) fn reject_selectors(label: Option<&str>, field: Option<&str>) -> Option<ApiStatus> {
    let set = |s: Option<&str>| s.is_some_and(|s| !s.is_empty());
    (set(label) || set(field))
        .then(|| bad_request("the simulator does not implement label or field selectors"))
}

/// 422 Invalid (request validation).
pub(crate) fn invalid(message: impl Into<String>) -> ApiStatus {
    failure(422, "Invalid", message.into())
}

/// 504 Timeout saying `Too large resource version` without the `ResourceVersionTooLarge` cause
/// type, as servers 1.17.0–1.18.5 answered (the cause there carried only a message).
pub(crate) fn too_large_legacy(requested: u64, current: u64, retry_after: u32) -> ApiStatus {
    let mut s = failure(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
    );
    s.retry_after_seconds = retry_after_seconds(retry_after);
    s
}

/// `details.retryAfterSeconds` for `secs` (none for 0: no suggestion).
fn retry_after_seconds(secs: u32) -> Option<i32> {
    (secs > 0).then(|| i32::try_from(secs).unwrap_or(i32::MAX))
}

/// 429 TooManyRequests as a client sees it (API Priority and Fairness answers with a
/// `Retry-After` header, which clients turn into `retryAfterSeconds`).
pub(crate) fn too_many_requests(retry_after_seconds: u32) -> ApiStatus {
    let mut s = failure(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later".to_owned(),
    );
    s.retry_after_seconds = Some(i32::try_from(retry_after_seconds).unwrap_or(i32::MAX));
    s
}

/// 500 InternalError (`errors.NewInternalError`).
pub(crate) fn internal_error() -> ApiStatus {
    failure(
        500,
        "InternalError",
        "Internal error occurred: etcdserver: request timed out (simulated)".to_owned(),
    )
}

/// 404 NotFound for `name` of resource `qualified` (`pods`, `deployments.apps`).
pub(crate) fn not_found(qualified: &str, name: &str) -> ApiStatus {
    failure(404, "NotFound", format!("{qualified} \"{name}\" not found"))
}

/// 409 AlreadyExists: a create of a name that exists.
pub(crate) fn already_exists(qualified: &str, name: &str) -> ApiStatus {
    failure(
        409,
        "AlreadyExists",
        format!("{qualified} \"{name}\" already exists"),
    )
}

/// 409 Conflict: a write whose resourceVersion (or uid) precondition no longer holds.
pub(crate) fn conflict(qualified: &str, name: &str, why: &str) -> ApiStatus {
    failure(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
    )
}

/// The text of a 409 Conflict on a stale resourceVersion.
pub(crate) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";
