//! RFC 3339 timestamps of JSON Pods: parsed, shifted, written back in the same form.

use serde_json::Value;

/// Shifts an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SSZ`, fraction allowed) by `by`
/// seconds; other values are left alone.
pub(super) fn shift_json_time(v: Option<&mut Value>, by: i64) {
    if let Some(Value::String(s)) = v
        && let Some(t) = parse_utc(s)
    {
        *s = format_utc(t + by, &s[19..]);
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS...`.
pub(super) fn parse_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + se)
}

/// `t` as `YYYY-MM-DDTHH:MM:SS` followed by `rest` (the original's fraction and zone).
fn format_utc(t: i64, rest: &str) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{rest}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_shift() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2017-06-27T16:35:34Z",
            "2024-02-29T23:59:59Z",
        ] {
            let t = parse_utc(s).unwrap();
            assert_eq!(format_utc(t, &s[19..]), s);
        }
        assert_eq!(parse_utc("2017-06-27T16:35:34Z"), Some(1_498_581_334));
        let mut v = Value::from("2024-02-28T23:00:00.5Z");
        shift_json_time(Some(&mut v), 2 * 3600);
        assert_eq!(v, "2024-02-29T01:00:00.5Z");
        let mut not_time = Value::from("yesterday");
        shift_json_time(Some(&mut not_time), 60);
        assert_eq!(not_time, "yesterday");
    }
}
