//! The reflector's errors, one variant per phase, and the predicates on API `Status`es its
//! recovery rules depend on. Upstream: `client-go/tools/cache/reflector.go`
//! (`isExpiredError`, `isTooLargeResourceVersionError`, `isWatchErrorRetriable`) and
//! `apimachinery/pkg/api/errors/errors.go` (`IsResourceExpired`, `IsGone`, `IsTimeout`,
//! `IsTooManyRequests`, `IsInternalError`, `HasStatusCause`).

use crate::object::ApiStatus;

use super::lister_watcher::{ApiError, TransportErrorKind};

/// The store a reflector writes into was closed; the reflector stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the reflector's store is closed")]
pub struct StoreClosed;

/// Reflector errors, named by the phase they happened in. Each is reported to the watch error
/// handler ([`super::Reflector::with_error_handler`]) and counted in
/// [`super::ReflectorMetrics::errors`]; the reflector then recovers by itself (retry, re-watch
/// or relist, as the variant's docs say). None of them stops it: only [`StoreClosed`] does.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A list request (any page) failed. Expired or "too large resource version" answers make
    /// the reflector list again at once with `resourceVersion=""`; anything else waits for the
    /// backoff (at least `retryAfterSeconds` for 429) and lists again.
    #[error("list with resourceVersion={resource_version:?} failed")]
    ListFailed {
        /// The resourceVersion the list asked for.
        resource_version: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// A list answered at a resourceVersion older than the one asked for, or older than what
    /// the reflector already delivered (a lagging cache serving stale data). It is not applied,
    /// so the store never goes back in time; the reflector lists again with
    /// `resourceVersion=""` (a consistent read), at once the first time, after the backoff if
    /// that is stale too.
    #[error(
        "list with resourceVersion={requested:?} answered at resourceVersion {served}, older than {synced:?} (not applied)"
    )]
    StaleList {
        /// The resourceVersion the list asked for.
        requested: String,
        /// The resourceVersion the list was served at.
        served: String,
        /// The newest resourceVersion the reflector had delivered before.
        synced: String,
    },
    /// A streaming initial list (`sendInitialEvents=true`) could not be opened or failed before
    /// its `k8s.io/initial-events-end` bookmark. Connection refused and 429 are retried after the
    /// backoff; Expired and "too large resource version" at once with `resourceVersion=""`;
    /// anything else (for instance 422 from a server without the WatchList feature) falls back
    /// to list + watch at once.
    #[error("streaming list from resourceVersion={resource_version:?} failed")]
    WatchListFailed {
        /// The resourceVersion the stream started from.
        resource_version: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// A streaming initial list ended (closed, cut or timed out) before its
    /// `k8s.io/initial-events-end` bookmark: the reflector falls back to list + watch.
    #[error(
        "streaming list from resourceVersion={resource_version:?} ended after {events} events without the initial-events-end bookmark"
    )]
    WatchListIncomplete {
        /// The resourceVersion the stream started from.
        resource_version: String,
        /// Events received before it ended.
        events: u64,
    },
    /// Opening a watch failed. Connection refused and 429 (after at least
    /// `retryAfterSeconds`) are retried after the backoff without relisting; anything else
    /// waits for the backoff and relists.
    #[error("starting a watch from resourceVersion {resource_version} failed")]
    WatchStartFailed {
        /// The resourceVersion the watch started from.
        resource_version: String,
        /// Why.
        #[source]
        source: ApiError,
    },
    /// The server sent an ERROR event (e.g. 410 Expired: the resourceVersion is too old). After
    /// the backoff the reflector relists at its last resourceVersion, except for 429 (watch
    /// again).
    #[error("watch ended with an error event: {} {} ({})", .0.code, .0.reason, .0.message)]
    WatchErrorEvent(ApiStatus),
    /// The server closed a watch within a second of opening it with no event: after the
    /// backoff the reflector relists (client-go "very short watch").
    #[error(
        "very short watch from resourceVersion {resource_version}: closed within a second with no event"
    )]
    VeryShortWatch {
        /// The resourceVersion the watch started from.
        resource_version: String,
    },
    /// The watch stream broke. A cut connection (reset, timeout) is watched again at once from
    /// the last resourceVersion; bytes that do not decode, and any other failure, wait for the
    /// backoff and relist.
    #[error("watch stream failed")]
    WatchStreamFailed(#[source] ApiError),
}

impl ReflectorError {
    /// The server's `Status` behind this error, when the server answered with one.
    pub fn status(&self) -> Option<&ApiStatus> {
        match self {
            ReflectorError::ListFailed { source, .. }
            | ReflectorError::WatchListFailed { source, .. }
            | ReflectorError::WatchStartFailed { source, .. }
            | ReflectorError::WatchStreamFailed(source) => source.status(),
            ReflectorError::WatchErrorEvent(s) => Some(s),
            ReflectorError::StaleList { .. }
            | ReflectorError::WatchListIncomplete { .. }
            | ReflectorError::VeryShortWatch { .. } => None,
        }
    }
}

/// Known `Status.reason` values: a status with one of these is judged by its reason only, any
/// other by its HTTP code (`apimachinery/pkg/api/errors/errors.go`, `knownReasons`).
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

fn reason_or_code(s: &ApiStatus, reason: &str, code: i32) -> bool {
    s.reason == reason || (!KNOWN_REASONS.contains(&s.reason.as_str()) && s.code == code)
}

/// 410 Gone / Expired: the requested resourceVersion (or continue token) is no longer
/// available. Reason `Expired`, reason `Gone`, or code 410 with no other known reason
/// (client-go `isExpiredError` = `IsResourceExpired || IsGone`).
pub fn is_expired(s: &ApiStatus) -> bool {
    s.reason == "Expired" || reason_or_code(s, "Gone", 410)
}

/// "Too large resource version": the server has not reached the requested resourceVersion.
/// Recognised in all three forms servers have sent (client-go `isTooLargeResourceVersionError`):
/// the `ResourceVersionTooLarge` cause (1.18.6 and later); or, from older servers, a Timeout
/// status (reason `Timeout`, or 504 with no other known reason) whose message says
/// `Too large resource version` (1.17.0–1.18.5, where it is also the cause's message) or
/// `Too large non-consistent resource version` (before 1.17).
pub fn is_too_large_resource_version(s: &ApiStatus) -> bool {
    if s.cause_reasons
        .iter()
        .any(|c| c == "ResourceVersionTooLarge")
    {
        return true;
    }
    reason_or_code(s, "Timeout", 504)
        && (s.message.contains("Too large resource version")
            || s.message
                .contains("Too large non-consistent resource version"))
}

/// 429 Too Many Requests (reason `TooManyRequests` or code 429; client-go `IsTooManyRequests`).
pub fn is_too_many_requests(s: &ApiStatus) -> bool {
    s.reason == "TooManyRequests" || s.code == 429
}

/// 500 Internal Error (client-go `IsInternalError`).
pub fn is_internal_error(s: &ApiStatus) -> bool {
    reason_or_code(s, "InternalError", 500)
}

/// An error opening a watch after which client-go watches again (after the backoff) instead of
/// relisting: connection refused (the server is most likely restarting; the watch can resume
/// where it was) and 429 (client-go `isWatchErrorRetriable`).
pub(crate) fn is_watch_retriable(e: &ApiError) -> bool {
    match e {
        ApiError::Transport(t) => t.kind == TransportErrorKind::ConnectionRefused,
        ApiError::Status(s) => is_too_many_requests(s),
        ApiError::Decode(_) => false,
    }
}

/// Expired or "too large resource version": the resourceVersion asked for cannot be served;
/// the next request asks for `""`.
pub(crate) fn is_version_unavailable(e: &ApiError) -> bool {
    e.status()
        .is_some_and(|s| is_expired(s) || is_too_large_resource_version(s))
}

/// The `retryAfterSeconds` of a 429 (or any status that carries one), as a duration.
pub(crate) fn retry_after(e: &ApiError) -> Option<std::time::Duration> {
    e.status()
        .and_then(|s| s.retry_after_seconds)
        .map(|r| std::time::Duration::from_secs(r.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: i32, reason: &str, message: &str, causes: &[&str]) -> ApiStatus {
        ApiStatus {
            code,
            status: "Failure".into(),
            reason: reason.into(),
            message: message.into(),
            cause_reasons: causes.iter().map(|c| (*c).to_owned()).collect(),
            retry_after_seconds: None,
        }
    }

    #[test]
    fn expired_by_reason_or_bare_code() {
        assert!(is_expired(&status(410, "Expired", "too old", &[])));
        assert!(is_expired(&status(410, "Gone", "", &[])));
        assert!(is_expired(&status(410, "", "", &[])));
        assert!(is_expired(&status(0, "Expired", "", &[])));
        // A known, different reason wins over the code.
        assert!(!is_expired(&status(410, "Conflict", "", &[])));
        assert!(!is_expired(&status(500, "InternalError", "", &[])));
    }

    #[test]
    fn too_large_in_every_form() {
        // 1.18.6+: the cause.
        assert!(is_too_large_resource_version(&status(
            504,
            "Timeout",
            "Too large resource version: 9, current: 5",
            &["ResourceVersionTooLarge"]
        )));
        // 1.17.0–1.18.5: Timeout with the message, no cause type.
        assert!(is_too_large_resource_version(&status(
            504,
            "Timeout",
            "Too large resource version: 9, current: 5",
            &[]
        )));
        // Before 1.17.
        assert!(is_too_large_resource_version(&status(
            504,
            "",
            "Too large non-consistent resource version",
            &[]
        )));
        // The message alone, on something that is not a timeout, is not it.
        assert!(!is_too_large_resource_version(&status(
            500,
            "InternalError",
            "Too large resource version",
            &[]
        )));
        assert!(!is_too_large_resource_version(&status(
            504,
            "Timeout",
            "request timed out",
            &[]
        )));
    }

    #[test]
    fn watch_retriable_is_refused_or_429() {
        assert!(is_watch_retriable(&ApiError::connection_refused("dial")));
        assert!(!is_watch_retriable(&ApiError::connection_reset("rst")));
        assert!(is_watch_retriable(&ApiError::Status(status(
            429,
            "TooManyRequests",
            "",
            &[]
        ))));
        assert!(!is_watch_retriable(&ApiError::Status(status(
            500,
            "InternalError",
            "",
            &[]
        ))));
    }
}
