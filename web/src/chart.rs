//! Charts as inline SVG, drawn here from the samples: no script and no
//! front-end build. The samples are put in per-minute buckets, and a chart
//! has a value axis with its unit, a time axis in UTC, and each line's
//! current value and peak said in its legend (chart.html draws it).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::samples::Sample;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 210.0;
/// Room for the value labels (left) and the time labels (below).
const LEFT: f64 = 52.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 22.0;
const BOTTOM: f64 = 34.0;

/// One value per minute: (minutes since the Unix epoch, value).
pub type Buckets = Vec<(i64, f64)>;

/// One line to draw: its label, its colour, its buckets.
pub type Series = (&'static str, &'static str, Buckets);

#[derive(Serialize)]
pub struct Tick {
    pub at: f64,
    pub label: String,
}

#[derive(Serialize)]
pub struct Line {
    pub label: &'static str,
    pub color: &'static str,
    /// "x,y x,y ..." for a polyline
    pub points: String,
    /// The last minute's value, and the highest and its minute.
    pub now: String,
    pub peak: String,
    pub peak_at: String,
    /// Where the peak is drawn.
    pub peak_x: f64,
    pub peak_y: f64,
    pub last_x: f64,
    pub last_y: f64,
    /// Whether the peak and the current value are written on the plot too:
    /// for the line with the highest peak only, so that labels do not
    /// pile up; and where their text is centred (kept inside the plot).
    pub marked: bool,
    pub peak_label_x: f64,
    pub now_label_x: f64,
}

#[derive(Serialize)]
pub struct Chart {
    pub title: &'static str,
    /// The values' unit, as the axis and the legend say it.
    pub unit: &'static str,
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub lines: Vec<Line>,
    pub y_ticks: Vec<Tick>,
    pub x_ticks: Vec<Tick>,
    /// How far back the time axis reaches.
    pub span: String,
    /// No bucket yet: nothing to draw.
    pub empty: bool,
}

fn minute(at: f64) -> i64 {
    (at / 60.0).floor() as i64
}

/// The last sample of each minute, in order.
fn last_of_each_minute(samples: &[Sample]) -> Vec<(i64, &Sample)> {
    let mut lasts: Vec<(i64, &Sample)> = Vec::new();
    for sample in samples {
        let m = minute(sample.at);
        match lasts.last_mut() {
            Some((last_m, last)) if *last_m == m => *last = sample,
            _ => lasts.push((m, sample)),
        }
    }
    lasts
}

/// A cumulative counter's rate per minute in each minute: from the last
/// sample of the minute before (or the first sample) to the minute's last,
/// over the time between them, so a gap in the samples does not inflate it.
pub fn rate_per_minute(samples: &[Sample], counter: fn(&Sample) -> i64) -> Buckets {
    let Some(first) = samples.first() else {
        return Vec::new();
    };
    let mut from = first;
    let mut rates = Vec::new();
    for (m, last) in last_of_each_minute(samples) {
        if std::ptr::eq(last, from) {
            continue;
        }
        let seconds = (last.at - from.at).max(0.001);
        let delta = (counter(last) - counter(from)).max(0) as f64;
        rates.push((m, delta / seconds * 60.0));
        from = last;
    }
    rates
}

/// A level (the backlog) at the end of each minute.
pub fn level_per_minute(samples: &[Sample], level: fn(&Sample) -> i64) -> Buckets {
    last_of_each_minute(samples)
        .into_iter()
        .map(|(m, last)| (m, level(last) as f64))
        .collect()
}

/// Buckets of several queues added minute by minute (the cluster's chart).
pub fn sum(all: impl IntoIterator<Item = Buckets>) -> Buckets {
    let mut total: BTreeMap<i64, f64> = BTreeMap::new();
    for buckets in all {
        for (m, v) in buckets {
            *total.entry(m).or_default() += v;
        }
    }
    total.into_iter().collect()
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) that cuts `max` in at most
/// four parts.
fn nice_step(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let rough = max / 4.0;
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power)
        .max(if max < 4.0 { 1.0 } else { 0.0 })
}

/// The minute `m` as a UTC clock time, "13:05".
pub fn clock(m: i64) -> String {
    let of_day = m.rem_euclid(24 * 60);
    format!("{:02}:{:02}", of_day / 60, of_day % 60)
}

pub fn chart(title: &'static str, unit: &'static str, series: Vec<Series>) -> Chart {
    let all = || series.iter().flat_map(|(_, _, buckets)| buckets.iter());
    let empty = all().next().is_none();
    let m_min = all().map(|p| p.0).min().unwrap_or(0);
    let m_max = all().map(|p| p.0).max().unwrap_or(0);
    let y_max = all().map(|p| p.1).fold(0.0, f64::max);
    let step = nice_step(y_max);
    let y_top = (y_max / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |m: i64| {
        if m_max == m_min {
            LEFT + plot_w / 2.0
        } else {
            LEFT + (m - m_min) as f64 / (m_max - m_min) as f64 * plot_w
        }
    };
    let y = |v: f64| TOP + plot_h - v / y_top * plot_h;
    let y_ticks = (0..)
        .map(|i| i as f64 * step)
        .take_while(|v| *v <= y_top + step / 1000.0)
        .map(|v| Tick {
            at: y(v),
            label: number(v),
        })
        .collect();
    let span = m_max - m_min;
    let every = [1, 2, 5, 10, 15, 30, 60]
        .into_iter()
        .find(|every| span / every <= 5)
        .unwrap_or(120);
    let x_ticks = if empty {
        Vec::new()
    } else {
        (m_min..=m_max)
            .filter(|m| m.rem_euclid(every) == 0 || m_min == m_max)
            .map(|m| Tick {
                at: x(m),
                label: clock(m),
            })
            .collect()
    };
    let lines = series
        .iter()
        .filter(|(_, _, buckets)| !buckets.is_empty())
        .map(|(label, color, buckets)| {
            let (peak_m, peak) =
                buckets
                    .iter()
                    .copied()
                    .fold((buckets[0].0, f64::MIN), |best, p| {
                        if p.1 > best.1 {
                            p
                        } else {
                            best
                        }
                    });
            let (last_m, last) = *buckets.last().expect("not empty");
            Line {
                label,
                color,
                points: buckets
                    .iter()
                    .map(|(m, v)| format!("{:.1},{:.1}", x(*m), y(*v)))
                    .collect::<Vec<_>>()
                    .join(" "),
                now: number(last),
                peak: number(peak),
                peak_at: clock(peak_m),
                peak_x: x(peak_m),
                peak_y: y(peak),
                last_x: x(last_m),
                last_y: y(last),
                marked: false,
                peak_label_x: x(peak_m).clamp(LEFT + 30.0, WIDTH - RIGHT - 30.0),
                now_label_x: x(last_m).clamp(LEFT + 30.0, WIDTH - RIGHT - 30.0),
            }
        })
        .collect::<Vec<Line>>();
    let mut lines = lines;
    let highest = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.peak_y < TOP + plot_h)
        .min_by(|a, b| a.1.peak_y.total_cmp(&b.1.peak_y))
        .map(|(i, _)| i);
    if let Some(i) = highest {
        lines[i].marked = true;
    }
    Chart {
        title,
        unit,
        width: WIDTH,
        height: HEIGHT,
        left: LEFT,
        right: WIDTH - RIGHT,
        top: TOP,
        bottom: HEIGHT - BOTTOM,
        lines,
        y_ticks,
        x_ticks,
        span: if empty {
            String::new()
        } else {
            crate::stats::age((span + 1) as f64 * 60.0)
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
            backlog: enqueued,
        }
    }

    #[test]
    fn rates_are_per_minute_in_minute_buckets() {
        // minute 10: 30 jobs in 30 s; minute 11: 120 jobs in the 60 s from
        // the last sample of minute 10; minute 13 after a gap: 60 in 120 s
        let samples = [
            sample(600.0, 0),
            sample(630.0, 30),
            sample(660.0, 60),
            sample(690.0, 150),
            sample(810.0, 210),
        ];
        let rates = rate_per_minute(&samples, |s| s.enqueued);
        assert_eq!(rates, vec![(10, 60.0), (11, 120.0), (13, 30.0)]);
        let levels = level_per_minute(&samples, |s| s.backlog);
        assert_eq!(levels, vec![(10, 30.0), (11, 150.0), (13, 210.0)]);
        // one sample: no rate yet, but a level
        assert!(rate_per_minute(&samples[..1], |s| s.enqueued).is_empty());
        assert_eq!(level_per_minute(&samples[..1], |s| s.backlog).len(), 1);
    }

    #[test]
    fn the_cluster_adds_the_queues_minute_by_minute() {
        let total = sum([vec![(1, 2.0), (2, 3.0)], vec![(2, 10.0), (3, 1.0)]]);
        assert_eq!(total, vec![(1, 2.0), (2, 13.0), (3, 1.0)]);
    }

    #[test]
    fn axes_have_round_ticks_and_clock_times() {
        let c = chart(
            "t",
            "jobs/min",
            vec![("a", "red", vec![(600, 0.0), (630, 87.0), (660, 40.0)])],
        );
        assert!(!c.empty);
        let labels: Vec<&str> = c.y_ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["0", "25", "50", "75", "100"]);
        let times: Vec<&str> = c.x_ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(times, ["10:00", "10:15", "10:30", "10:45", "11:00"]);
        let line = &c.lines[0];
        assert_eq!((line.now.as_str(), line.peak.as_str()), ("40", "87"));
        assert_eq!(line.peak_at, "10:30");
        // the first point at the left of the plot, at 0; the last at the right
        assert!(line
            .points
            .starts_with(&format!("{LEFT:.1},{:.1}", HEIGHT - BOTTOM)));
        assert_eq!(line.last_x, WIDTH - RIGHT);
    }

    #[test]
    fn small_and_empty_charts() {
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(3.0), 1.0);
        assert_eq!(nice_step(1000.0), 250.0);
        assert_eq!(nice_step(0.5), 1.0);
        let c = chart("t", "jobs", vec![("a", "red", vec![(5, 3.0)])]);
        assert_eq!(c.x_ticks.len(), 1);
        assert_eq!(c.lines[0].now, "3");
        assert!(chart("t", "jobs", vec![("a", "red", vec![])]).empty);
        assert_eq!(clock(-1), "23:59");
    }
}
