//! Parsers of the time flags: seconds (fractional allowed) and `NUMBER UNIT` delays, both
//! bounded so that a flag value never overflows a `Duration` or a deadline computed from it.

use std::time::Duration;

/// Most seconds a time flag takes: about 31 years, far below what `Duration` holds, so that a
/// flag value never overflows a deadline computed from it.
const MAX_FLAG_SECONDS: f64 = 1e9;

/// clap value parser of a flag in seconds (fractional allowed): a finite number from 0 to
/// [`MAX_FLAG_SECONDS`]. `inf`, `NaN`, negative and huge values are refused with a message
/// (they would panic in `Duration::from_secs_f64`).
pub(crate) fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    in_range(s, v)
}

/// [`seconds`] as a `Duration`.
pub(crate) fn seconds_duration(s: &str) -> Result<Duration, String> {
    seconds(s).map(Duration::from_secs_f64)
}

/// `NUMBER UNIT` with UNIT one of `ns`, `us`, `µs`, `ms`, `s` (`50us`, `2ms`, `0.5s`), in the
/// range of [`seconds`].
pub(crate) fn delay(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?}: a unit is needed (ns, us, ms, s)"))?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|e| format!("{s:?}: {e}"))?;
    let secs = match unit.trim() {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        other => return Err(format!("{s:?}: unknown unit {other:?} (ns, us, ms, s)")),
    };
    in_range(s, secs).map(Duration::from_secs_f64)
}

/// `v` (parsed from `s`) if it is a finite number of seconds from 0 to [`MAX_FLAG_SECONDS`].
fn in_range(s: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && (0.0..=MAX_FLAG_SECONDS).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s:?}: seconds from 0 to {MAX_FLAG_SECONDS}"))
    }
}
