//! When ticks fall: a schedule's expression matches wall-clock times of its
//! zone, and each match becomes one instant (API.md): a wall time that a
//! daylight-saving change skips becomes the first instant after the gap
//! (all the skipped ones the same instant, so one tick); a wall time that
//! occurs twice becomes its first occurrence only. The zone rules are
//! chrono-tz's copy of the IANA database (docs/development.md).

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;

use super::cron::Pattern;
use crate::errors::QueueError;

/// 2000-01-01 (PostgreSQL's epoch) in Unix microseconds.
const PG_EPOCH_UNIX_US: i64 = 946_684_800_000_000;

/// An IANA zone by its name, as PostgreSQL spells it ('UTC',
/// 'Europe/Berlin').
pub fn zone(name: &str) -> Result<Tz, QueueError> {
    name.parse::<Tz>().map_err(|_| QueueError::UnknownTimeZone {
        name: name.to_string(),
    })
}

fn instant(pg_us: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(pg_us.checked_add(PG_EPOCH_UNIX_US)?)
}

fn pg_us(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros() - PG_EPOCH_UNIX_US
}

/// The first tick strictly after `after_us` (PostgreSQL microseconds); None
/// when there is none before croner's last year.
pub fn next_after(pattern: &Pattern, tz: Tz, after_us: i64) -> Option<i64> {
    let after = instant(after_us)?;
    let mut wall = after.with_timezone(&tz).naive_local();
    // A match in the second pass of a repeated hour maps to its first
    // occurrence, before `after`: the search goes on from that wall time, a
    // few steps at most.
    for _ in 0..10_000 {
        let next = pattern.next_match(wall)?;
        let at = match tz.from_local_datetime(&next) {
            LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => at.with_timezone(&Utc),
            LocalResult::None => end_of_gap(tz, next)?,
        };
        if at > after {
            return Some(pg_us(at));
        }
        wall = next;
    }
    None
}

/// The first instant after the daylight-saving gap that skips wall time
/// `skipped`: the instant the clock jumps, found by halving the day before
/// (gaps are never longer than a day, and never two in one).
fn end_of_gap(tz: Tz, skipped: NaiveDateTime) -> Option<DateTime<Utc>> {
    let exists = |wall: NaiveDateTime| !matches!(tz.from_local_datetime(&wall), LocalResult::None);
    let at = |seconds: i64| skipped + TimeDelta::seconds(seconds);
    // Seconds from `skipped`: `before` exists, `inside` is skipped; halve
    // until they are a second apart.
    let (mut before, mut inside) = (-86_400_i64, 0_i64);
    if !exists(at(before)) {
        return None;
    }
    while inside - before > 1 {
        let middle = before + (inside - before) / 2;
        if exists(at(middle)) {
            before = middle;
        } else {
            inside = middle;
        }
    }
    let before = at(before);
    // the last wall time before the gap, one second later in real time
    let last = tz.from_local_datetime(&before).latest()?;
    Some(last.with_timezone(&Utc) + TimeDelta::seconds(1))
}

/// The wall-clock time of `at_us` in `tz` and the offset from UTC, as
/// ISO 8601 ('2026-03-29T03:00:00+02:00'): a job's scheduled_for.
pub fn iso8601(tz: Tz, at_us: i64) -> String {
    match instant(at_us) {
        Some(at) => at
            .with_timezone(&tz)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::cron::parse;

    fn us(s: &str) -> i64 {
        pg_us(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
    }

    fn ticks(expr: &str, zone_name: &str, from: &str, n: usize) -> Vec<String> {
        let pattern = parse(expr).unwrap();
        let tz = zone(zone_name).unwrap();
        let mut at = us(from);
        (0..n)
            .map(|_| {
                at = next_after(&pattern, tz, at).unwrap();
                iso8601(tz, at)
            })
            .collect()
    }

    #[test]
    fn a_skipped_wall_time_fires_once_after_the_gap() {
        // Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST
        assert_eq!(
            ticks("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]
        );
        assert_eq!(
            ticks(
                "*/20 * * * *",
                "Europe/Berlin",
                "2026-03-29T01:30:00+01:00",
                4
            ),
            [
                "2026-03-29T01:40:00+01:00",
                "2026-03-29T03:00:00+02:00",
                "2026-03-29T03:20:00+02:00",
                "2026-03-29T03:40:00+02:00"
            ]
        );
    }

    #[test]
    fn a_repeated_wall_time_fires_once_at_its_first_occurrence() {
        // New York, 1 November 2026: 02:00 EDT becomes 01:00 EST
        assert_eq!(
            ticks("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
        );
        assert_eq!(
            ticks(
                "0 * * * *",
                "America/New_York",
                "2026-11-01T00:30:00-04:00",
                3
            ),
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T02:00:00-05:00",
                "2026-11-01T03:00:00-05:00"
            ]
        );
    }

    #[test]
    fn day_31_fires_in_months_that_have_it() {
        assert_eq!(
            ticks("0 0 31 * *", "UTC", "2026-01-01T00:00:00Z", 3),
            [
                "2026-01-31T00:00:00+00:00",
                "2026-03-31T00:00:00+00:00",
                "2026-05-31T00:00:00+00:00"
            ]
        );
    }

    #[test]
    fn seconds_and_a_fraction_of_one() {
        assert_eq!(
            ticks("*/10 * * * * *", "UTC", "2026-01-01T00:00:00.5Z", 2),
            ["2026-01-01T00:00:10+00:00", "2026-01-01T00:00:20+00:00"]
        );
    }

    #[test]
    fn unknown_zones_are_refused() {
        assert!(zone("Mars/Olympus").is_err());
        assert!(zone("").is_err());
    }
}
