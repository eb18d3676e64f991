//! Subcommands of the `informer` binary.

pub(crate) mod decode;
pub(crate) mod flood;
pub(crate) mod serve;
pub(crate) mod sim_args;
pub(crate) mod watch;

/// Most seconds a time flag takes: about 31 years, far below what `Duration` holds, so that a
/// flag value never overflows a deadline computed from it.
const MAX_FLAG_SECONDS: f64 = 1e9;

/// clap value parser of a flag in seconds (fractional allowed): a finite number from 0 to
/// [`MAX_FLAG_SECONDS`]. `inf`, `NaN`, negative and huge values are refused with a message
/// (they would panic in `Duration::from_secs_f64`).
pub(crate) fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && (0.0..=MAX_FLAG_SECONDS).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s:?}: seconds from 0 to {MAX_FLAG_SECONDS}"))
    }
}
