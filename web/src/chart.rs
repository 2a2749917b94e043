//! Line charts as inline SVG, drawn here from the samples: no script and no
//! front-end build. The template (chart.html) draws what this computes.

use serde::Serialize;

use crate::samples::Sample;

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 160.0;

#[derive(Serialize)]
pub struct Line {
    pub label: &'static str,
    pub color: &'static str,
    /// "x,y x,y ..." for a polyline
    pub points: String,
    pub last: String,
}

#[derive(Serialize)]
pub struct Chart {
    pub title: &'static str,
    pub width: f64,
    pub height: f64,
    pub lines: Vec<Line>,
    pub y_max: String,
    /// How far back the x axis reaches.
    pub span: String,
    /// Fewer than two samples: nothing to draw yet.
    pub empty: bool,
}

/// Per-minute rates between successive samples of a cumulative counter.
pub fn per_minute(samples: &[Sample], counter: fn(&Sample) -> i64) -> Vec<(f64, f64)> {
    samples
        .windows(2)
        .map(|pair| {
            let seconds = (pair[1].at - pair[0].at).max(0.001);
            let delta = (counter(&pair[1]) - counter(&pair[0])).max(0) as f64;
            (pair[1].at, delta / seconds * 60.0)
        })
        .collect()
}

/// One line to draw: its label, its colour, its (time, value) points.
pub type Series = (&'static str, &'static str, Vec<(f64, f64)>);

pub fn chart(title: &'static str, series: Vec<Series>) -> Chart {
    let all = || series.iter().flat_map(|(_, _, points)| points.iter());
    let t_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let t_max = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let empty = series.iter().all(|(_, _, points)| points.len() < 2);
    let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let t_span = (t_max - t_min).max(1.0);
    let lines = series
        .iter()
        .map(|(label, color, points)| Line {
            label,
            color,
            points: points
                .iter()
                .map(|(t, v)| {
                    let x = (t - t_min) / t_span * WIDTH;
                    let y = HEIGHT - v / y_top * HEIGHT;
                    format!("{x:.1},{y:.1}")
                })
                .collect::<Vec<_>>()
                .join(" "),
            last: points.last().map(|p| number(p.1)).unwrap_or_default(),
        })
        .collect();
    Chart {
        title,
        width: WIDTH,
        height: HEIGHT,
        lines,
        y_max: number(y_top),
        span: if empty {
            String::new()
        } else {
            crate::stats::age(t_span)
        },
        empty,
    }
}

fn number(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: f64, enqueued: i64) -> Sample {
        Sample {
            at,
            enqueued,
            succeeded: 0,
            failed: 0,
            backlog: 0,
        }
    }

    #[test]
    fn rates_are_per_minute_between_samples() {
        let samples = [sample(0.0, 0), sample(10.0, 5), sample(20.0, 5)];
        let rates = per_minute(&samples, |s| s.enqueued);
        assert_eq!(rates, vec![(10.0, 30.0), (20.0, 0.0)]);
    }

    #[test]
    fn points_fill_the_box() {
        let c = chart("t", vec![("a", "red", vec![(0.0, 0.0), (10.0, 10.0)])]);
        assert!(!c.empty);
        assert_eq!(
            c.lines[0].points,
            format!("0.0,{HEIGHT:.1} {WIDTH:.1},14.5")
        );
    }
}
