//! The counters sampled over time, in this process's memory only (no table
//! in any database): enqueued, succeeded and failed totals and the backlog
//! of each queue, from which the charts draw rates per minute.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::stats::QueueRow;
use crate::stuck::Stuck;

/// Samples kept per queue: an hour at the default interval of 10 s.
const KEPT: usize = 360;

#[derive(Clone, Copy)]
pub struct Sample {
    /// Unix time in seconds.
    pub at: f64,
    pub enqueued: i64,
    pub succeeded: i64,
    pub failed: i64,
    /// Jobs waiting: pending (due) and scheduled (due later).
    pub backlog: i64,
}

pub struct Samples {
    pub interval: Duration,
    series: Mutex<HashMap<(String, String), VecDeque<Sample>>>,
    /// Each database's latest reading, and when it was taken, for the
    /// cluster page.
    latest: Mutex<HashMap<String, (f64, Vec<QueueRow>)>>,
    /// What each database's latest reading found stuck (stuck.rs).
    stuck: Mutex<HashMap<String, (f64, Stuck)>>,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Samples {
    pub fn new(interval: Duration) -> Samples {
        Samples {
            interval,
            series: Mutex::new(HashMap::new()),
            latest: Mutex::new(HashMap::new()),
            stuck: Mutex::new(HashMap::new()),
        }
    }

    /// `database`'s latest reading and its age in seconds, if it is younger
    /// than two intervals (so the sampler keeps it fresh).
    pub fn latest(&self, database: &str) -> Option<(f64, Vec<QueueRow>)> {
        let latest = self.latest.lock().unwrap();
        let (at, rows) = latest.get(database)?;
        let age = now() - at;
        (age < 2.0 * self.interval.as_secs_f64()).then(|| (age, rows.clone()))
    }

    /// What `database`'s latest reading found stuck, if it is younger than
    /// two intervals.
    pub fn stuck(&self, database: &str) -> Option<Stuck> {
        let stuck = self.stuck.lock().unwrap();
        let (at, found) = stuck.get(database)?;
        (now() - at < 2.0 * self.interval.as_secs_f64()).then(|| found.clone())
    }

    pub fn record_stuck(&self, database: &str, found: &Stuck) {
        self.stuck
            .lock()
            .unwrap()
            .insert(database.to_string(), (now(), found.clone()));
    }

    /// Keeps a reading of `database`'s queues; a page's reading counts too,
    /// unless the last sample is younger than half the interval.
    pub fn record(&self, database: &str, rows: &[QueueRow]) {
        let at = now();
        self.latest
            .lock()
            .unwrap()
            .insert(database.to_string(), (at, rows.to_vec()));
        let mut series = self.series.lock().unwrap();
        for row in rows {
            let kept = series
                .entry((database.to_string(), row.queue.clone()))
                .or_default();
            if kept
                .back()
                .is_some_and(|last| at - last.at < self.interval.as_secs_f64() / 2.0)
            {
                continue;
            }
            if kept.len() == KEPT {
                kept.pop_front();
            }
            kept.push_back(Sample {
                at,
                enqueued: row.enqueued_total,
                succeeded: row.succeeded_total,
                failed: row.failed_total,
                backlog: row.pending + row.scheduled,
            });
        }
    }

    /// Every queue's samples, of every database (the cluster's charts).
    pub fn all(&self) -> Vec<Vec<Sample>> {
        let series = self.series.lock().unwrap();
        series
            .values()
            .map(|kept| kept.iter().copied().collect())
            .collect()
    }

    pub fn of(&self, database: &str, queue: &str) -> Vec<Sample> {
        let series = self.series.lock().unwrap();
        series
            .get(&(database.to_string(), queue.to_string()))
            .map(|kept| kept.iter().copied().collect())
            .unwrap_or_default()
    }
}
