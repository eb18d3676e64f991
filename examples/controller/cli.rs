//! Command-line value parsers of the controller example.

/// The longest span a seconds flag accepts: about 31 years (a longer wait means "never"
/// anyway, and `Duration::from_secs_f64` panics on values it cannot hold).
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// Parses a number of seconds: finite, at least 0, at most [`MAX_SECONDS`].
///
/// # Errors
/// A message for clap when `s` is not such a number.
pub(crate) fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a number of seconds: {e}"))?;
    if !v.is_finite() || !(0.0..=MAX_SECONDS).contains(&v) {
        return Err(format!(
            "{s:?} seconds is outside 0..={MAX_SECONDS:e} (finite, not negative)"
        ));
    }
    Ok(v)
}
