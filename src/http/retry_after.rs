//! Reading an upstream's `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, in
//! any of the three date formats a recipient must accept (IMF-fixdate, RFC 850, asctime).

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wait a `Retry-After` value asks for, seen at `now` (wall-clock time, what an HTTP-date
/// is in): `None` if the value is neither form; zero for a date already past.
pub(crate) fn delay(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for a u64 is still "a very long wait".
        return Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let at = http_date(v)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Seconds since the Unix epoch of an HTTP-date in any of its three formats.
fn http_date(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_ascii_whitespace().collect();
    let (day, month, year, time) = match parts.as_slice() {
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
        [wd, d, m, y, t, "GMT"] if wd.ends_with(',') && y.len() == 4 => {
            (d.parse().ok()?, month(m)?, y.parse().ok()?, *t)
        }
        // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" (two-digit years: 1970..=2069)
        [wd, dmy, t, "GMT"] if wd.ends_with(',') => {
            let mut f = dmy.split('-');
            let (d, m, y) = (f.next()?, f.next()?, f.next()?);
            if f.next().is_some() || y.len() != 2 {
                return None;
            }
            let yy: u64 = y.parse().ok()?;
            (
                d.parse().ok()?,
                month(m)?,
                if yy < 70 { 2000 + yy } else { 1900 + yy },
                *t,
            )
        }
        // asctime: "Sun Nov  6 08:49:37 1994"
        [_, m, d, t, y] if y.len() == 4 => (d.parse().ok()?, month(m)?, y.parse().ok()?, *t),
        _ => return None,
    };
    let mut hms = time.split(':');
    let (h, mi, sec): (u64, u64, u64) = (
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
    );
    if hms.next().is_some() || h > 23 || mi > 59 || sec > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    Some(days * 86_400 + h * 3_600 + mi * 60 + sec)
}

fn month(m: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.iter().position(|x| *x == m).map(|i| i as u64 + 1)
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (dates before 1970: `None`).
fn days_from_civil(y: u64, m: u64, d: u64) -> Option<u64> {
    let y = if m <= 2 { y.checked_sub(1)? } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// RFC 9110's own example date, in its three formats, is 784111777 s after the epoch.
    #[test]
    fn the_three_date_formats_and_delay_seconds() {
        let t = 784_111_777;
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(http_date(v), Some(t), "{v}");
            assert_eq!(delay(v, at(t - 120)), Some(Duration::from_secs(120)), "{v}");
            assert_eq!(
                delay(v, at(t + 5)),
                Some(Duration::ZERO),
                "{v}: already past"
            );
        }
        assert_eq!(delay(" 30 ", at(0)), Some(Duration::from_secs(30)));
        assert_eq!(delay("0", at(0)), Some(Duration::ZERO));
        assert_eq!(
            delay("99999999999999999999999", at(0)),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599)
        );
    }

    #[test]
    fn malformed_values_are_not_delays() {
        for v in [
            "",
            "-5",
            "1.5",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
        ] {
            assert_eq!(delay(v, at(0)), None, "{v:?}");
        }
    }
}
