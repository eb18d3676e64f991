//! [`Time`]: `meta.v1.Time`, a point in time as the API server encodes it.

/// A point in time as the API server encodes it (`meta.v1.Time`): seconds since the Unix epoch
/// plus nanoseconds. JSON carries it as an RFC 3339 string with second precision
/// (`2024-01-02T03:04:05Z`); protobuf as `{1 seconds, 2 nanos}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds since 1970-01-01T00:00:00Z; may be negative.
    pub seconds: i64,
    /// Nanoseconds within the second, `0..1_000_000_000` on well-formed input.
    pub nanos: i32,
}

impl Time {
    /// RFC 3339 in UTC with second precision, as Kubernetes writes times in JSON
    /// (`2008-01-01T01:01:01Z`). Out-of-range times print as `seconds=<n>`.
    pub fn to_rfc3339(&self) -> String {
        match jiff::Timestamp::from_second(self.seconds) {
            Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            Err(_) => format!("seconds={}", self.seconds),
        }
    }
}
