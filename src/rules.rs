//! The input rules of the API (names, ranges, limits), pure and unit-tested.

use crate::contract::{MAX_BATCH, MAX_RESULT_BYTES, STATUSES, WORKER_NAME};
use crate::errors::QueueError;
use crate::policy::Backoff;

pub fn check_name(name: &str) -> Result<(), QueueError> {
    let allowed = |c: char| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-' | '.' | ':');
    if (1..=63).contains(&name.len()) && name.chars().all(allowed) {
        Ok(())
    } else {
        Err(QueueError::InvalidName {
            name: name.to_string(),
        })
    }
}

/// A schedule's name follows the queue-name rule.
pub fn check_schedule_name(name: &str) -> Result<(), QueueError> {
    check_name(name).map_err(|_| QueueError::InvalidScheduleName {
        name: name.to_string(),
    })
}

/// How many ticks queue_schedule_ticks lists: 1 to 1,000.
pub fn check_tick_count(count: i32) -> Result<usize, QueueError> {
    if (1..=1_000).contains(&count) {
        Ok(count as usize)
    } else {
        Err(QueueError::OutOfRange {
            option: "count",
            value: count.to_string(),
            rule: "between 1 and 1000",
        })
    }
}

/// A duration argument, already reduced to microseconds, and its text for
/// error messages.
#[derive(Clone, Debug)]
pub struct Duration {
    pub micros: i64,
    pub text: String,
}

pub fn at_least_zero(option: &'static str, d: &Duration) -> Result<(), QueueError> {
    if d.micros >= 0 {
        Ok(())
    } else {
        Err(QueueError::OutOfRange {
            option,
            value: d.text.clone(),
            rule: "at least 0",
        })
    }
}

pub fn positive(option: &'static str, d: &Duration) -> Result<(), QueueError> {
    if d.micros > 0 {
        Ok(())
    } else {
        Err(QueueError::OutOfRange {
            option,
            value: d.text.clone(),
            rule: "greater than 0",
        })
    }
}

pub fn check_max_attempts(value: i32) -> Result<(), QueueError> {
    if value >= 1 {
        Ok(())
    } else {
        Err(QueueError::OutOfRange {
            option: "max_attempts",
            value: value.to_string(),
            rule: "at least 1",
        })
    }
}

pub fn parse_backoff(word: &str) -> Result<Backoff, QueueError> {
    Backoff::parse(word).ok_or_else(|| QueueError::UnknownBackoff {
        word: word.to_string(),
    })
}

pub fn check_max_jobs(value: i32) -> Result<usize, QueueError> {
    if value >= 1 && value as usize <= MAX_BATCH {
        Ok(value as usize)
    } else {
        Err(QueueError::OutOfRange {
            option: "max_jobs",
            value: value.to_string(),
            rule: "between 1 and 10000",
        })
    }
}

pub fn check_status(word: &str) -> Result<&str, QueueError> {
    if STATUSES.contains(&word) {
        Ok(word)
    } else {
        Err(QueueError::UnknownStatus {
            word: word.to_string(),
        })
    }
}

pub fn check_batch_size(value: i32) -> Result<i32, QueueError> {
    if value >= 1 && value as usize <= MAX_BATCH {
        Ok(value)
    } else {
        Err(QueueError::OutOfRange {
            option: "batch_size",
            value: value.to_string(),
            rule: "between 1 and 10000",
        })
    }
}

pub fn check_worker_name(worker: &str) -> Result<(), QueueError> {
    if worker == WORKER_NAME {
        Err(QueueError::ReservedWorkerName)
    } else {
        Ok(())
    }
}

pub fn check_batch_len(argument: &'static str, len: usize) -> Result<(), QueueError> {
    if len <= MAX_BATCH {
        Ok(())
    } else {
        Err(QueueError::BatchTooLarge { argument, len })
    }
}

/// on_parent_failure: 'cancel' (true: a parent's failure cancels the job)
/// or 'run'.
pub fn check_parent_failure(word: &str) -> Result<bool, QueueError> {
    match word {
        "cancel" => Ok(true),
        "run" => Ok(false),
        _ => Err(QueueError::UnknownParentFailure {
            word: word.to_string(),
        }),
    }
}

/// A job's result, of `bytes` bytes: at most MAX_RESULT_BYTES.
pub fn check_result_size(bytes: usize) -> Result<(), QueueError> {
    if bytes <= MAX_RESULT_BYTES {
        Ok(())
    } else {
        Err(QueueError::ResultTooLarge { bytes })
    }
}

/// A job's group key: 1 to 255 characters.
pub fn check_group_key(option: &'static str, key: &str) -> Result<(), QueueError> {
    if (1..=255).contains(&key.chars().count()) {
        Ok(())
    } else {
        Err(QueueError::OutOfRange {
            option,
            value: format!("\"{key}\""),
            rule: "1 to 255 characters",
        })
    }
}

/// `max_in_flight` or `group_max_in_flight`: 0 is no limit.
pub fn check_in_flight_limit(option: &'static str, value: i32) -> Result<i32, QueueError> {
    if value >= 0 {
        Ok(value)
    } else {
        Err(QueueError::OutOfRange {
            option,
            value: value.to_string(),
            rule: "at least 0 (0: no limit)",
        })
    }
}

/// A rate limit's window: at least a millisecond, at most a day.
pub const MAX_RATE_WINDOW_US: i64 = 86_400 * crate::time::SECOND_US;
const RATE_RULE: &str = "'<n>/<interval>' with n at least 1 and an interval from 1 millisecond \
                         to 1 day, or 'none'";

/// A rate limit as given: 'none', or how many jobs and the text of the
/// window, which the caller reads as an interval (`check_rate_window`).
pub fn split_rate<'a>(
    option: &'static str,
    text: &'a str,
) -> Result<Option<(i32, &'a str)>, QueueError> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let refused = || QueueError::OutOfRange {
        option,
        value: format!("'{text}'"),
        rule: RATE_RULE,
    };
    let (n, window) = text.split_once('/').ok_or_else(refused)?;
    match n.trim().parse::<i32>() {
        Ok(n) if n >= 1 && !window.trim().is_empty() => Ok(Some((n, window.trim()))),
        _ => Err(refused()),
    }
}

/// The window of rate limit `text`, in microseconds (None: not an interval).
pub fn check_rate_window(
    option: &'static str,
    text: &str,
    window_us: Option<i64>,
) -> Result<i64, QueueError> {
    match window_us {
        Some(us) if (1_000..=MAX_RATE_WINDOW_US).contains(&us) => Ok(us),
        _ => Err(QueueError::OutOfRange {
            option,
            value: format!("'{text}'"),
            rule: RATE_RULE,
        }),
    }
}

/// The longest a webhook request may take.
pub const MAX_WEBHOOK_TIMEOUT_US: i64 = 3_600 * crate::time::SECOND_US;

/// The longest a consumer may wait in one queue_wait.
pub const MAX_WAIT_US: i64 = 3_600 * crate::time::SECOND_US;

pub fn check_wait_timeout(d: &Duration) -> Result<i64, QueueError> {
    if d.micros >= 0 && d.micros <= MAX_WAIT_US {
        Ok(d.micros)
    } else {
        Err(QueueError::OutOfRange {
            option: "timeout",
            value: d.text.clone(),
            rule: "between 0 and 1 hour",
        })
    }
}

pub fn check_webhook_timeout(d: &Duration) -> Result<i64, QueueError> {
    if d.micros > 0 && d.micros <= MAX_WEBHOOK_TIMEOUT_US {
        Ok(d.micros)
    } else {
        Err(QueueError::OutOfRange {
            option: "timeout",
            value: d.text.clone(),
            rule: "more than 0 and at most 1 hour",
        })
    }
}

/// How many requests of one queue may be open at once, at most.
pub const MAX_IN_FLIGHT: i32 = 1_000;

pub fn check_max_in_flight(value: i32) -> Result<i32, QueueError> {
    if (1..=MAX_IN_FLIGHT).contains(&value) {
        Ok(value)
    } else {
        Err(QueueError::OutOfRange {
            option: "max_in_flight",
            value: value.to_string(),
            rule: "between 1 and 1000",
        })
    }
}

/// Headers the worker sets itself, which a registration may not name (in
/// any letter case), besides every `webhook-*` name.
const RESERVED_HEADERS: [&str; 5] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
];

/// Registered headers: a JSON object of valid header names and string
/// values that are valid header values. A problem names the header, never
/// its value (an Authorization header is a credential).
pub fn check_webhook_headers(
    headers: &serde_json::Value,
) -> Result<Vec<(String, String)>, QueueError> {
    let problem = |problem: String| QueueError::WebhookHeaders { problem };
    let serde_json::Value::Object(map) = headers else {
        return Err(problem("must be a JSON object of string values".into()));
    };
    map.iter()
        .map(|(name, value)| {
            let serde_json::Value::String(value) = value else {
                return Err(problem(format!("the value of \"{name}\" must be a string")));
            };
            let lower = name.to_ascii_lowercase();
            if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("webhook-") {
                return Err(problem(format!(
                    "\"{name}\" is set by the worker and cannot be registered"
                )));
            }
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(problem(format!("\"{name}\" is not a valid header name")));
            }
            if reqwest::header::HeaderValue::from_str(value).is_err() {
                return Err(problem(format!(
                    "the value of \"{name}\" is not a valid header value"
                )));
            }
            Ok((name.clone(), value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(micros: i64) -> Duration {
        Duration {
            micros,
            text: format!("{micros} us"),
        }
    }

    #[test]
    fn batch_sizes_and_worker_names() {
        assert_eq!(check_batch_size(1), Ok(1));
        assert_eq!(check_batch_size(10_000), Ok(10_000));
        assert!(check_batch_size(0).is_err());
        assert!(check_batch_size(10_001).is_err());
        assert!(check_worker_name("queue worker").is_err());
        assert!(check_worker_name("queue worker 2").is_ok());
    }

    #[test]
    fn names() {
        for ok in [
            "a",
            "emails",
            "tenant-1.jobs:high_prio",
            &"x".repeat(63),
            "0",
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Emails",
            "with space",
            "é",
            "semi;colon",
            "slash/",
            &"x".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges() {
        assert!(at_least_zero("retry_delay", &d(0)).is_ok());
        assert!(at_least_zero("retry_delay", &d(-1)).is_err());
        assert!(positive("lease", &d(1)).is_ok());
        assert!(positive("lease", &d(0)).is_err());
        assert!(check_max_attempts(1).is_ok());
        assert!(check_max_attempts(0).is_err());
        assert_eq!(check_max_jobs(10_000), Ok(10_000));
        assert!(check_max_jobs(10_001).is_err());
        assert!(check_max_jobs(0).is_err());
        assert!(check_batch_len("payloads", 10_000).is_ok());
        assert_eq!(
            check_batch_len("payloads", 10_001),
            Err(QueueError::BatchTooLarge {
                argument: "payloads",
                len: 10_001
            })
        );
    }

    #[test]
    fn out_of_range_names_option_value_and_rule() {
        let e = at_least_zero(
            "delay",
            &Duration {
                micros: -1,
                text: "-00:00:01".into(),
            },
        );
        assert_eq!(
            e.unwrap_err().message(),
            "delay must be at least 0, got -00:00:01"
        );
    }

    #[test]
    fn status_words_are_checked() {
        for word in STATUSES {
            assert_eq!(check_status(word), Ok(word));
        }
        assert_eq!(
            check_status("done").unwrap_err().message(),
            "unknown status \"done\": must be one of pending, processing, succeeded, failed, \
             cancelled"
        );
        assert!(check_status("Pending").is_err());
    }

    #[test]
    fn backoff_words_are_checked() {
        assert_eq!(parse_backoff("linear"), Ok(Backoff::Linear));
        assert_eq!(
            parse_backoff("random").unwrap_err().message(),
            "unknown backoff \"random\": must be 'fixed', 'linear' or 'exponential'"
        );
    }
}
