//! RFC 3339 datetimes for `range` filters: parsed to seconds since the Unix epoch (UTC).
//!
//! Accepted (as Qdrant does): `2024-01-02`, `2024-01-02T03:04`, `2024-01-02T03:04:05`,
//! with `T` or a space before the time, optional fractional seconds, and an optional zone
//! `Z`, `+01:00` or `+0100`; no zone means UTC.

/// Seconds since 1970-01-01T00:00:00Z, or `None` when `text` is not such a datetime.
pub fn parse_timestamp(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut seconds = days_from_civil(year, month, day) * 86_400;
    let mut fraction = 0.0;
    let mut rest = &text[10..];
    if !rest.is_empty() {
        let separator = rest.as_bytes()[0];
        if separator != b'T' && separator != b't' && separator != b' ' {
            return None;
        }
        let time = &rest[1..];
        let clock_end = time
            .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
            .unwrap_or(time.len());
        let (clock, zone) = time.split_at(clock_end);
        let (clock, fraction_text) = match clock.split_once('.') {
            Some((_, "")) => return None,
            Some(parts) => parts,
            None => (clock, ""),
        };
        let fields: Vec<&str> = clock.split(':').collect();
        let field = |index: usize| -> Option<i64> {
            let part = fields.get(index)?;
            (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        };
        let (hour, minute) = (field(0)?, field(1)?);
        let second = if fields.len() > 2 { field(2)? } else { 0 };
        if fields.len() > 3 || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        if !fraction_text.is_empty() {
            if fields.len() < 3 || !fraction_text.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            fraction = format!("0.{fraction_text}").parse().ok()?;
        }
        seconds += hour * 3600 + minute * 60 + second;
        rest = zone;
    }
    seconds -= zone_offset_seconds(rest)?;
    #[allow(clippy::cast_precision_loss)]
    Some(seconds as f64 + fraction)
}

fn zone_offset_seconds(zone: &str) -> Option<i64> {
    match zone {
        "" | "Z" | "z" => Some(0),
        _ => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
            if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let hours: i64 = digits[..2].parse().ok()?;
            let minutes: i64 = digits[2..].parse().ok()?;
            (hours <= 23 && minutes <= 59).then_some(sign * (hours * 3600 + minutes * 60))
        }
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_timestamp;

    #[test]
    fn known_instants() {
        assert_eq!(parse_timestamp("1970-01-01"), Some(0.0));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_timestamp("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        assert_eq!(
            parse_timestamp("2024-01-02T06:00:00Z"),
            Some(1_704_175_200.0)
        );
        assert_eq!(
            parse_timestamp("2024-01-02T07:00:00+01:00"),
            parse_timestamp("2024-01-02T06:00:00Z")
        );
        assert_eq!(
            parse_timestamp("2024-01-02 05:30-0030"),
            parse_timestamp("2024-01-02T06:00Z")
        );
        assert_eq!(
            parse_timestamp("2024-01-02T06:00:00.25Z"),
            Some(1_704_175_200.25)
        );
        assert_eq!(parse_timestamp("1969-12-31T23:59:59Z"), Some(-1.0));
    }

    #[test]
    fn malformed_text_is_not_a_datetime() {
        for text in [
            "",
            "2024",
            "2024-13-01",
            "2024-02-30",
            "2023-02-29",
            "2024-01-02X",
            "2024-01-02T6:00",
            "2024-01-02T06:00:00+1",
            "hello world",
            "2024-01-02T06:00:00.Z",
            "2024-01-02T25:00",
        ] {
            assert_eq!(parse_timestamp(text), None, "{text}");
        }
        assert!(parse_timestamp("2024-02-29").is_some());
    }
}
