//! What one request's result means for its job. Pure, unit-tested.

use std::time::{Duration, SystemTime};

/// The outcome of one attempt.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A 2xx status, with the reply that becomes the job's result.
    Delivered(Reply),
    /// A failed attempt: `permanent` ends the job `failed` at once;
    /// otherwise the queue's retry policy decides, or `retry_after_us` (a
    /// Retry-After header) when given.
    Failed {
        message: String,
        permanent: bool,
        retry_after_us: Option<i64>,
    },
}

/// What a 2xx response said: its status, and its body up to
/// contract::WEBHOOK_RESULT_BODY_BYTES (`truncated`: there was more).
#[derive(Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub truncated: bool,
}

impl Reply {
    /// The job's result, as JSON text: `{"status": 200, "body": ...}`, the
    /// body as the JSON it is (written as it came, so numbers stay exact)
    /// when it was read whole and parses, else as a string (with
    /// `"truncated": true` when it was cut). JSON that PostgreSQL's jsonb
    /// refuses (a `\u0000`) is kept as a string too.
    pub fn result_json(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let json = !self.truncated
            && !text.contains("\\u0000")
            && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        let body = if json {
            text.trim().to_string()
        } else {
            serde_json::to_string(&text.replace('\0', "\u{fffd}")).expect("a string encodes")
        };
        let truncated = if self.truncated {
            r#", "truncated": true"#
        } else {
            ""
        };
        format!(
            r#"{{"status": {}, "body": {body}{truncated}}}"#,
            self.status
        )
    }
}

/// How much of a response body last_error keeps.
pub const BODY_CHARS: usize = 200;

/// The outcome of a response with `status` (and its reason phrase), the
/// start of its `body` and its Retry-After header, if any, at `now`.
pub fn of_response(
    status: u16,
    reason: &str,
    body: Vec<u8>,
    truncated: bool,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Outcome {
    if (200..300).contains(&status) {
        return Outcome::Delivered(Reply {
            status,
            body,
            truncated,
        });
    }
    let body: String = String::from_utf8_lossy(&body)
        .chars()
        .take(BODY_CHARS)
        .collect();
    let message = if body.is_empty() {
        format!("HTTP {status} {reason}")
    } else {
        format!("HTTP {status} {reason}: {body}")
    };
    let retried = matches!(status, 408 | 425 | 429) || (500..600).contains(&status);
    Outcome::Failed {
        message,
        permanent: !retried,
        retry_after_us: retried
            .then(|| retry_after.and_then(|v| retry_after_us(v, now)))
            .flatten(),
    }
}

/// A Retry-After value, delay-seconds or an HTTP date, as a delay from
/// `now` (a date in the past: no delay). None when it is neither.
pub fn retry_after_us(value: &str, now: SystemTime) -> Option<i64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds.saturating_mul(1_000_000).min(i64::MAX as u64) as i64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let delay = at.duration_since(now).unwrap_or(Duration::ZERO);
    Some(delay.as_micros().min(i64::MAX as u128) as i64)
}

/// A request that got no response (a timeout, or a connection, DNS or TLS
/// error): a failed attempt, retried by the policy.
pub fn of_error(message: String) -> Outcome {
    Outcome::Failed {
        message,
        permanent: false,
        retry_after_us: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SystemTime {
        httpdate::parse_http_date(s).unwrap()
    }

    #[test]
    fn statuses_fall_into_their_classes() {
        let now = SystemTime::now();
        for ok in [200, 201, 204, 299] {
            assert!(matches!(
                of_response(ok, "OK", Vec::new(), false, None, now),
                Outcome::Delivered(Reply { status, .. }) if status == ok
            ));
        }
        for retried in [408, 425, 429, 500, 502, 503, 599] {
            let Outcome::Failed { permanent, .. } =
                of_response(retried, "x", "".into(), false, None, now)
            else {
                panic!("{retried} delivered")
            };
            assert!(!permanent, "{retried}");
        }
        for permanent_status in [100, 301, 302, 400, 401, 404, 410, 422] {
            let Outcome::Failed { permanent, .. } =
                of_response(permanent_status, "x", "".into(), false, None, now)
            else {
                panic!("{permanent_status} delivered")
            };
            assert!(permanent, "{permanent_status}");
        }
    }

    #[test]
    fn the_message_keeps_the_start_of_the_body() {
        let body = "x".repeat(500);
        let Outcome::Failed { message, .. } = of_response(
            503,
            "Service Unavailable",
            body.into_bytes(),
            false,
            None,
            SystemTime::now(),
        ) else {
            panic!()
        };
        assert_eq!(
            message,
            format!("HTTP 503 Service Unavailable: {}", "x".repeat(200))
        );
    }

    #[test]
    fn a_reply_becomes_a_result() {
        let reply = |body: &str, truncated| Reply {
            status: 201,
            body: body.as_bytes().to_vec(),
            truncated,
        };
        let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        assert_eq!(
            json(&reply(r#"{"ok": true, "n": 12345678901234567890}"#, false).result_json()),
            json(r#"{"status": 201, "body": {"ok": true, "n": 12345678901234567890}}"#)
        );
        // Written as it came: the number keeps its digits.
        assert!(reply("[1.10]", false).result_json().contains("[1.10]"));
        assert_eq!(
            json(&reply("accepted", false).result_json()),
            json(r#"{"status": 201, "body": "accepted"}"#)
        );
        assert_eq!(
            json(&reply(r#"{"cut": "#, true).result_json()),
            json(r#"{"status": 201, "body": "{\"cut\": ", "truncated": true}"#)
        );
        assert_eq!(
            json(&reply("", false).result_json()),
            json(r#"{"status": 201, "body": ""}"#)
        );
        // A jsonb value takes no \u0000: such a body is kept as text, and a
        // NUL byte in text is replaced.
        assert_eq!(
            json(&reply(r#"{"a": "\u0000"}"#, false).result_json()),
            json(r#"{"status": 201, "body": "{\"a\": \"\\u0000\"}"}"#)
        );
        assert!(!reply("a\0b", false).result_json().contains("\\u0000"));
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = at("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(retry_after_us("120", now), Some(120_000_000));
        assert_eq!(
            retry_after_us("Wed, 21 Oct 2015 07:29:30 GMT", now),
            Some(90_000_000)
        );
        assert_eq!(
            retry_after_us("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(0)
        );
        assert_eq!(retry_after_us("soon", now), None);
        let Outcome::Failed {
            retry_after_us: r, ..
        } = of_response(429, "Too Many Requests", "".into(), false, Some("7"), now)
        else {
            panic!()
        };
        assert_eq!(r, Some(7_000_000));
        // only a retried status takes it
        let Outcome::Failed {
            retry_after_us: r, ..
        } = of_response(404, "Not Found", "".into(), false, Some("7"), now)
        else {
            panic!()
        };
        assert_eq!(r, None);
    }
}
