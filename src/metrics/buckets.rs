//! The histograms' buckets: upper bounds from half a millisecond to an
//! hour, roughly 1-2.5-5 per decade (Prometheus's usual spacing), and one
//! for everything longer.

/// Each bucket's upper bound, in microseconds; the last bucket has none.
pub const BOUNDS_US: [i64; 21] = [
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
    300_000_000,
    600_000_000,
    1_800_000_000,
    3_600_000_000,
];

/// How many buckets a histogram has (the bounds and +Inf).
pub const COUNT: usize = BOUNDS_US.len() + 1;

/// The bucket of a duration: the first whose bound it does not pass (a
/// negative duration, from clocks that disagree, counts as none).
pub fn of(us: i64) -> usize {
    BOUNDS_US.partition_point(|&bound| bound < us)
}

/// The bounds as Prometheus writes them: seconds, the last `+Inf`
/// (f64::INFINITY).
pub fn bounds_seconds() -> Vec<f64> {
    BOUNDS_US
        .iter()
        .map(|&us| us as f64 / 1e6)
        .chain(std::iter::once(f64::INFINITY))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_falls_in_the_first_bucket_it_does_not_pass() {
        assert_eq!(of(-5), 0);
        assert_eq!(of(0), 0);
        assert_eq!(of(500), 0);
        assert_eq!(of(501), 1);
        assert_eq!(of(1_000), 1);
        assert_eq!(of(3_600_000_000), COUNT - 2);
        assert_eq!(of(3_600_000_001), COUNT - 1);
        assert_eq!(of(i64::MAX), COUNT - 1);
    }

    #[test]
    fn bounds_ascend_and_end_at_infinity() {
        assert!(BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
        let seconds = bounds_seconds();
        assert_eq!(seconds.len(), COUNT);
        assert_eq!(seconds[0], 0.0005);
        assert_eq!(seconds[COUNT - 1], f64::INFINITY);
    }
}
