//! Cron expressions. croner parses them and finds their matches
//! (docs/development.md, "Dependencies"); this module decides which forms
//! the API takes (API.md: five fields, or six with seconds, `*`, lists,
//! ranges, steps, English names and five nicknames: not croner's `L`, `W`,
//! `#`, `?` or `+`) and names the field at fault when one is refused.

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use crate::errors::QueueError;

/// The fields of a six-field expression, in order; a five-field one has no
/// seconds field.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];

const NICKNAMES: [(&str, &str); 5] = [
    ("@yearly", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A cron expression the API accepts.
pub struct Pattern {
    cron: Cron,
}

impl Pattern {
    /// The next match strictly after `wall` (a wall-clock time, held as
    /// UTC so that no zone rule applies), at whole seconds.
    pub fn next_match(&self, wall: chrono::NaiveDateTime) -> Option<chrono::NaiveDateTime> {
        use chrono::{TimeZone, Timelike, Utc};
        let wall = wall.with_nanosecond(0)?;
        self.cron
            .find_next_occurrence(&Utc.from_utc_datetime(&wall), false)
            .ok()
            .map(|at| at.naive_utc())
    }
}

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

fn refused(cron: &str, field: &'static str, problem: String) -> QueueError {
    QueueError::InvalidCron {
        cron: cron.to_string(),
        field,
        problem,
    }
}

/// Parses `expr` as the API takes it, or says which field is at fault.
pub fn parse(expr: &str) -> Result<Pattern, QueueError> {
    let trimmed = expr.trim();
    let spelled = if trimmed.starts_with('@') {
        match NICKNAMES.iter().find(|(nick, _)| *nick == trimmed) {
            Some((_, fields)) => *fields,
            None => {
                return Err(refused(
                    expr,
                    "expression",
                    "unknown nickname: use @yearly, @monthly, @weekly, @daily or @hourly".into(),
                ))
            }
        }
    } else {
        trimmed
    };
    let fields: Vec<&str> = spelled.split_whitespace().collect();
    let names = match fields.len() {
        5 => &FIELDS[1..],
        6 => &FIELDS[..],
        n => {
            return Err(refused(
                expr,
                "expression",
                format!(
                    "it has {n} fields: give five (minute hour day-of-month month day-of-week) \
                     or six with a leading second field"
                ),
            ))
        }
    };
    for (at, (field, name)) in fields.iter().zip(names).enumerate() {
        check_atoms(expr, field, name)?;
        // the field alone among wildcards: croner's refusal is this field's
        let mut alone = vec!["*"; fields.len()];
        alone[at] = field;
        if let Err(e) = parser().parse(&alone.join(" ")) {
            return Err(refused(expr, name, croner_problem(e)));
        }
    }
    let cron = parser()
        .parse(&fields.join(" "))
        .map_err(|e| refused(expr, "expression", croner_problem(e)))?;
    // Croner looks until the year 5000 before it gives up: an error means that
    // no date ever matches.
    let epoch = chrono::DateTime::UNIX_EPOCH;
    if cron.find_next_occurrence(&epoch, false).is_err() {
        return Err(refused(
            expr,
            "day of month",
            "no date ever matches it (that day never occurs in the months given)".into(),
        ));
    }
    Ok(Pattern { cron })
}

/// Each item of a field is `*`, a number, or (month, day of week) an
/// English name, joined by `,`, `-` and `/`.
fn check_atoms(expr: &str, field: &str, name: &'static str) -> Result<(), QueueError> {
    let names: &[&str] = match name {
        "month" => &MONTHS,
        "day of week" => &DAYS,
        _ => &[],
    };
    for atom in field.split([',', '-', '/']) {
        let lower = atom.to_ascii_lowercase();
        let fits = atom == "*"
            || (!atom.is_empty() && atom.bytes().all(|b| b.is_ascii_digit()))
            || names.contains(&lower.as_str());
        if !fits {
            let named = if names.is_empty() {
                String::new()
            } else {
                format!(", English names ({}-{})", names[0], names[names.len() - 1])
            };
            return Err(refused(
                expr,
                name,
                format!(
                    "\"{atom}\" is not allowed: use *, numbers{named}, lists (,), ranges (-) \
                     and steps (/)"
                ),
            ));
        }
    }
    Ok(())
}

/// croner's words, without its prefix.
fn croner_problem(e: croner::errors::CronError) -> String {
    use croner::errors::CronError::*;
    match e {
        ComponentError(m) | InvalidPattern(m) | IllegalCharacters(m) => {
            m.trim_end_matches('.').to_lowercase()
        }
        other => other.to_string().trim_end_matches('.').to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(expr: &str) -> &'static str {
        match parse(expr) {
            Err(QueueError::InvalidCron { field, .. }) => field,
            Err(other) => panic!("{expr}: {other:?}"),
            Ok(_) => panic!("{expr} was taken"),
        }
    }

    #[test]
    fn takes_the_forms_of_the_contract() {
        for expr in [
            "* * * * *",
            "*/5 * * * * *",
            "0 9-17/2 * jan-mar,dec mon-FRI",
            "0 0 31 * *",
            "0 0 13 * fri",
            "@daily",
            "  @hourly ",
            "0 0 * * 7",
        ] {
            assert!(parse(expr).is_ok(), "{expr}");
        }
    }

    #[test]
    fn names_the_field_at_fault() {
        assert_eq!(field_of("61 * * * *"), "minute");
        assert_eq!(field_of("* 24 * * *"), "hour");
        assert_eq!(field_of("0 0 L * *"), "day of month");
        assert_eq!(field_of("0 0 ? * *"), "day of month");
        assert_eq!(field_of("0 0 * 13 *"), "month");
        assert_eq!(field_of("0 0 * foo *"), "month");
        assert_eq!(field_of("0 0 * * 5#2"), "day of week");
        assert_eq!(field_of("0 0 * * mon+"), "day of week");
        assert_eq!(field_of("0 0 * * jan"), "day of week");
        assert_eq!(field_of("60 * * * * *"), "second");
        assert_eq!(field_of("* * * *"), "expression");
        assert_eq!(field_of("* * * * * * *"), "expression");
        assert_eq!(field_of("@annually"), "expression");
        assert_eq!(field_of(""), "expression");
        assert_eq!(field_of("0 0 30 2 *"), "day of month");
        assert_eq!(field_of("*/0 * * * *"), "minute");
        assert_eq!(field_of("5-1 * * * *"), "minute");
    }
}
