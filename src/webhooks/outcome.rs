//! What one request's result means for its job. Pure, unit-tested.

use std::time::{Duration, SystemTime};

/// The outcome of one attempt.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A 2xx status.
    Delivered,
    /// A failed attempt: `permanent` ends the job `failed` at once;
    /// otherwise the queue's retry policy decides, or `retry_after_us` (a
    /// Retry-After header) when given.
    Failed {
        message: String,
        permanent: bool,
        retry_after_us: Option<i64>,
    },
}

/// How much of a response body last_error keeps.
pub const BODY_CHARS: usize = 200;

/// The outcome of a response with `status` (and its reason phrase), the
/// start of its `body` and its Retry-After header, if any, at `now`.
pub fn of_response(
    status: u16,
    reason: &str,
    body: &str,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Outcome {
    if (200..300).contains(&status) {
        return Outcome::Delivered;
    }
    let body: String = body.chars().take(BODY_CHARS).collect();
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
            assert_eq!(of_response(ok, "OK", "", None, now), Outcome::Delivered);
        }
        for retried in [408, 425, 429, 500, 502, 503, 599] {
            let Outcome::Failed { permanent, .. } = of_response(retried, "x", "", None, now) else {
                panic!("{retried} delivered")
            };
            assert!(!permanent, "{retried}");
        }
        for permanent_status in [100, 301, 302, 400, 401, 404, 410, 422] {
            let Outcome::Failed { permanent, .. } =
                of_response(permanent_status, "x", "", None, now)
            else {
                panic!("{permanent_status} delivered")
            };
            assert!(permanent, "{permanent_status}");
        }
    }

    #[test]
    fn the_message_keeps_the_start_of_the_body() {
        let body = "x".repeat(500);
        let Outcome::Failed { message, .. } =
            of_response(503, "Service Unavailable", &body, None, SystemTime::now())
        else {
            panic!()
        };
        assert_eq!(
            message,
            format!("HTTP 503 Service Unavailable: {}", "x".repeat(200))
        );
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
        } = of_response(429, "Too Many Requests", "", Some("7"), now)
        else {
            panic!()
        };
        assert_eq!(r, Some(7_000_000));
        // only a retried status takes it
        let Outcome::Failed {
            retry_after_us: r, ..
        } = of_response(404, "Not Found", "", Some("7"), now)
        else {
            panic!()
        };
        assert_eq!(r, None);
    }
}
