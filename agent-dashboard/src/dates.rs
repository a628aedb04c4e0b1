//! UTC dates without a time-zone library: days since the Unix epoch and back
//! (the proleptic Gregorian calendar, Howard Hinnant's `days_from_civil`).

/// Milliseconds in a day.
pub(crate) const DAY_MS: u64 = 86_400_000;

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Days since 1970-01-01 of a calendar date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The calendar date of a day number.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `YYYY-MM-DD` as a day number (days since 1970-01-01); `Err` says what is wrong.
pub(crate) fn parse_day(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a date: use YYYY-MM-DD (UTC), for example 2026-12-03");
    let mut parts = text.trim().split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let num = |s: &str, len: usize| -> Result<i64, String> {
        if s.len() != len || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (y, m, d) = (num(y, 4)?, num(m, 2)?, num(d, 2)?);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || d < 1 {
        return Err(bad());
    }
    let days = days_from_civil(y, m, d);
    if civil_from_days(days) != (y, m, d) {
        return Err(format!("{text:?} is not a day of the calendar"));
    }
    Ok(days)
}

/// A day number as `YYYY-MM-DD`.
pub(crate) fn format_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Ms since the Unix epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub(crate) fn format_ms(ms: u64) -> String {
    let day = i64::try_from(ms / DAY_MS).unwrap_or(0);
    let secs = (ms % DAY_MS) / 1000;
    format!(
        "{} {:02}:{:02}:{:02}",
        format_day(day),
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The day number of ms since the Unix epoch.
pub(crate) fn day_of(ms: u64) -> i64 {
    i64::try_from(ms / DAY_MS).unwrap_or(i64::MAX)
}

/// The first ms of a day number.
pub(crate) fn day_start_ms(day: i64) -> u64 {
    u64::try_from(day).unwrap_or(0).saturating_mul(DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        assert_eq!(parse_day("1970-01-01"), Ok(0));
        assert_eq!(parse_day("2026-12-03"), Ok(20_790));
        assert_eq!(format_day(20_790), "2026-12-03");
        assert_eq!(
            format_day(parse_day("2024-02-29").unwrap_or(0)),
            "2024-02-29"
        );
        assert!(parse_day("2023-02-29").is_err());
        assert!(parse_day("2026-13-01").is_err());
        assert!(parse_day("yesterday").is_err());
        assert!(parse_day("2026-1-01").is_err());
        assert_eq!(
            format_ms(20_790 * DAY_MS + 3_723_000),
            "2026-12-03 01:02:03"
        );
    }
}
