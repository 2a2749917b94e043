//! Retry and lease arithmetic, kept pure so that it can be unit-tested
//! without a server. Durations are whole microseconds (`i64`), the unit of
//! PostgreSQL's `interval` and `timestamptz`.

/// Microseconds in a day and in a month, as PostgreSQL counts them when it
/// compares intervals (`interval_cmp`): a month is 30 days, a day 24 hours.
const DAY_US: i128 = 86_400_000_000;
const MONTH_US: i128 = 30 * DAY_US;

/// The largest delay we ever compute: far beyond any sensible retry, and far
/// from overflowing a timestamp when added to `now()`.
pub const MAX_DELAY_US: i64 = 100 * 365 * DAY_US as i64;

/// Jitter adds at most this fraction (in percent) of the delay.
pub const JITTER_PERCENT: i64 = 10;

/// How the delay before retry *n* grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    Fixed,
    Linear,
    Exponential,
}

impl Backoff {
    pub const WORDS: &'static str = "'fixed', 'linear' or 'exponential'";

    pub fn parse(word: &str) -> Option<Backoff> {
        match word {
            "fixed" => Some(Backoff::Fixed),
            "linear" => Some(Backoff::Linear),
            "exponential" => Some(Backoff::Exponential),
            _ => None,
        }
    }
}

/// An interval's length in microseconds, months and days counted as
/// `interval_cmp` counts them. Saturates instead of overflowing.
pub fn interval_micros(months: i32, days: i32, micros: i64) -> i64 {
    let total = months as i128 * MONTH_US + days as i128 * DAY_US + micros as i128;
    total.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// The delay before retry `n` (n = attempts so far, at least 1), capped at
/// `max_us`, before jitter. Never overflows, whatever `n`.
pub fn backoff_delay(policy: Backoff, base_us: i64, max_us: i64, n: i32) -> i64 {
    let base = base_us.max(0);
    let cap = max_us.clamp(0, MAX_DELAY_US);
    let n = n.max(1) as u32;
    let delay = match policy {
        Backoff::Fixed => base,
        Backoff::Linear => base.saturating_mul(n as i64),
        Backoff::Exponential => {
            // base * 2^(n-1): past 62 doublings every non-zero base exceeds the cap.
            let shift = n - 1;
            if base == 0 {
                0
            } else if shift >= 62 {
                i64::MAX
            } else {
                base.saturating_mul(1i64 << shift)
            }
        }
    };
    delay.min(cap)
}

/// Adds a jitter of at most +10% to `delay_us`. `random` is uniform in
/// [0, 1); taking it as an argument keeps this function pure.
pub fn with_jitter(delay_us: i64, random: f64) -> i64 {
    let span = delay_us / 100 * JITTER_PERCENT + delay_us % 100 * JITTER_PERCENT / 100;
    let r = random.clamp(0.0, 1.0);
    delay_us.saturating_add((span as f64 * r) as i64)
}

/// What a failed attempt leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOutcome {
    /// Try again after this many microseconds.
    Retry { delay_us: i64 },
    /// No more attempts: the job becomes `failed`.
    Dead,
}

/// The rules of `queue_fail`: a permanent error, or no attempts left, ends
/// the job; otherwise `retry_in` (exact) or the queue's backoff (with
/// jitter) says when it runs again.
#[allow(clippy::too_many_arguments)]
pub fn after_failure(
    attempts: i32,
    max_attempts: i32,
    permanent: bool,
    retry_in_us: Option<i64>,
    policy: Backoff,
    base_us: i64,
    max_us: i64,
    random: f64,
) -> FailOutcome {
    if permanent || attempts >= max_attempts {
        return FailOutcome::Dead;
    }
    let delay_us = match retry_in_us {
        Some(exact) => exact.min(MAX_DELAY_US),
        None => with_jitter(backoff_delay(policy, base_us, max_us, attempts), random),
    };
    FailOutcome::Retry { delay_us }
}

/// One past the last valid `timestamptz`, in microseconds since 2000-01-01
/// (PostgreSQL's `END_TIMESTAMP`).
pub const TIMESTAMP_END_US: i64 = 9_223_371_331_200_000_000;

/// `now + delay` as a timestamp that PostgreSQL accepts: a delay too long for
/// the calendar ends at the last valid timestamp instead of an overflow
/// error. Used for lease expiries and for when a job falls due.
pub fn add_delay(now_us: i64, delay_us: i64) -> i64 {
    now_us.saturating_add(delay_us).min(TIMESTAMP_END_US - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn interval_counts_months_and_days_like_postgres() {
        assert_eq!(interval_micros(0, 0, 5), 5);
        assert_eq!(interval_micros(0, 1, 0), 86_400 * S);
        assert_eq!(interval_micros(1, 0, 0), 30 * 86_400 * S);
        assert_eq!(interval_micros(0, 1, -86_400 * S), 0);
        assert_eq!(interval_micros(i32::MAX, i32::MAX, i64::MAX), i64::MAX);
        assert_eq!(interval_micros(i32::MIN, i32::MIN, i64::MIN), i64::MIN);
    }

    #[test]
    fn fixed_linear_exponential() {
        let max = 3_600 * S;
        assert_eq!(backoff_delay(Backoff::Fixed, S, max, 1), S);
        assert_eq!(backoff_delay(Backoff::Fixed, S, max, 7), S);
        assert_eq!(backoff_delay(Backoff::Linear, S, max, 1), S);
        assert_eq!(backoff_delay(Backoff::Linear, S, max, 7), 7 * S);
        assert_eq!(backoff_delay(Backoff::Exponential, S, max, 1), S);
        assert_eq!(backoff_delay(Backoff::Exponential, S, max, 2), 2 * S);
        assert_eq!(backoff_delay(Backoff::Exponential, S, max, 5), 16 * S);
    }

    #[test]
    fn capped_and_never_overflowing() {
        let max = 3_600 * S;
        assert_eq!(backoff_delay(Backoff::Exponential, S, max, 13), max);
        for n in [62, 63, 64, 1_000, i32::MAX] {
            assert_eq!(backoff_delay(Backoff::Exponential, S, max, n), max);
            assert_eq!(backoff_delay(Backoff::Linear, i64::MAX, max, n), max);
            assert_eq!(
                backoff_delay(Backoff::Exponential, i64::MAX, i64::MAX, n),
                MAX_DELAY_US
            );
        }
        assert_eq!(backoff_delay(Backoff::Exponential, 0, max, i32::MAX), 0);
        assert_eq!(backoff_delay(Backoff::Fixed, S, 0, 3), 0);
    }

    #[test]
    fn non_positive_attempt_counts_as_first() {
        assert_eq!(backoff_delay(Backoff::Exponential, S, 100 * S, 0), S);
        assert_eq!(backoff_delay(Backoff::Linear, S, 100 * S, -5), S);
    }

    #[test]
    fn jitter_adds_at_most_ten_percent() {
        assert_eq!(with_jitter(10 * S, 0.0), 10 * S);
        assert_eq!(with_jitter(10 * S, 0.999_999_9), 11 * S - 1);
        assert!(with_jitter(10 * S, 0.5) > 10 * S);
        assert_eq!(with_jitter(0, 0.7), 0);
        assert_eq!(with_jitter(i64::MAX, 1.0), i64::MAX);
        for d in [1, 9, 99, 101, 12_345_678] {
            for r in [0.0, 0.3, 0.99] {
                let j = with_jitter(d, r);
                assert!(j >= d && j <= d + d / 10 + 1, "{d} {r} {j}");
            }
        }
    }

    #[test]
    fn failure_outcomes() {
        let f = |attempts, max, permanent, retry_in| {
            after_failure(
                attempts,
                max,
                permanent,
                retry_in,
                Backoff::Exponential,
                S,
                60 * S,
                0.0,
            )
        };
        assert_eq!(f(1, 3, false, None), FailOutcome::Retry { delay_us: S });
        assert_eq!(f(2, 3, false, None), FailOutcome::Retry { delay_us: 2 * S });
        assert_eq!(f(3, 3, false, None), FailOutcome::Dead);
        assert_eq!(f(1, 3, true, None), FailOutcome::Dead);
        assert_eq!(f(1, 3, false, Some(0)), FailOutcome::Retry { delay_us: 0 });
        assert_eq!(
            f(2, 3, false, Some(7 * S)),
            FailOutcome::Retry { delay_us: 7 * S }
        );
        // retry_in cannot buy an attempt that is not left
        assert_eq!(f(3, 3, false, Some(S)), FailOutcome::Dead);
        // max_attempts lowered below the attempts already made
        assert_eq!(f(4, 2, false, None), FailOutcome::Dead);
    }

    #[test]
    fn retry_in_is_exact_and_backoff_is_jittered() {
        let jittered = after_failure(1, 5, false, None, Backoff::Fixed, 10 * S, 60 * S, 0.5);
        assert_eq!(
            jittered,
            FailOutcome::Retry {
                delay_us: 10 * S + S / 2
            }
        );
        let exact = after_failure(1, 5, false, Some(10 * S), Backoff::Fixed, S, 60 * S, 0.5);
        assert_eq!(exact, FailOutcome::Retry { delay_us: 10 * S });
    }

    #[test]
    fn delays_end_at_the_last_valid_timestamp() {
        assert_eq!(add_delay(10, 5), 15);
        assert_eq!(add_delay(10, 0), 10);
        assert_eq!(add_delay(10, MAX_DELAY_US), 10 + MAX_DELAY_US);
        assert_eq!(add_delay(0, i64::MAX), TIMESTAMP_END_US - 1);
        assert_eq!(add_delay(TIMESTAMP_END_US - 10, 100), TIMESTAMP_END_US - 1);
    }

    #[test]
    fn backoff_words() {
        assert_eq!(Backoff::parse("fixed"), Some(Backoff::Fixed));
        assert_eq!(Backoff::parse("linear"), Some(Backoff::Linear));
        assert_eq!(Backoff::parse("exponential"), Some(Backoff::Exponential));
        assert_eq!(Backoff::parse("Fixed"), None);
        assert_eq!(Backoff::parse("random"), None);
    }
}
