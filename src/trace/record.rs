//! How a record stores what is not bytes: an API error in its `error_*` fields, a watch
//! stream's format in `format`; both ways.

use crate::object::{ApiStatus, WatchFormat};
use crate::reflector::{ApiError, TransportErrorKind};

use super::error::TraceError;
use super::format::TraceRecord;

/// The `error_*` fields of a record for `err`.
pub(super) fn error_fields(record: &mut TraceRecord, err: &ApiError) {
    record.error_message = err.to_string();
    record.error_kind = match err {
        ApiError::Status(s) => {
            record.error_status = s.encode_json();
            "status"
        }
        ApiError::Transport(t) => match t.kind {
            TransportErrorKind::ConnectionRefused => "refused",
            TransportErrorKind::ConnectionReset => "reset",
            TransportErrorKind::Timeout => "timeout",
            TransportErrorKind::Other => "transport",
        },
        ApiError::Decode(_) => "decode",
    }
    .to_owned();
}

/// The error a record's `error_*` fields describe. A recorded decode error comes back as a
/// transport error of kind `Other` carrying its text (the reflector treats both by relisting).
pub(super) fn error_of(record: &TraceRecord, offset: u64) -> Result<ApiError, TraceError> {
    let transport = |kind| {
        ApiError::Transport(crate::reflector::TransportError::new(
            kind,
            record.error_message.clone(),
        ))
    };
    Ok(match record.error_kind.as_str() {
        "status" => ApiError::Status(ApiStatus::decode(&record.error_status).map_err(|e| {
            TraceError::Invalid {
                offset,
                message: format!("bad Status: {e}"),
            }
        })?),
        "refused" => transport(TransportErrorKind::ConnectionRefused),
        "reset" => transport(TransportErrorKind::ConnectionReset),
        "timeout" => transport(TransportErrorKind::Timeout),
        "transport" | "decode" => transport(TransportErrorKind::Other),
        other => {
            return Err(TraceError::Invalid {
                offset,
                message: format!("unknown error kind {other:?}"),
            });
        }
    })
}

pub(super) fn format_name(f: WatchFormat) -> &'static str {
    match f {
        WatchFormat::Protobuf => "protobuf",
        WatchFormat::Json => "json",
    }
}

pub(super) fn parse_format(s: &str, offset: u64) -> Result<WatchFormat, TraceError> {
    match s {
        "protobuf" => Ok(WatchFormat::Protobuf),
        "json" => Ok(WatchFormat::Json),
        other => Err(TraceError::Invalid {
            offset,
            message: format!("unknown watch format {other:?}"),
        }),
    }
}
