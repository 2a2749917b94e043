//! One database's queues as queue_stats gives them: what the cluster page
//! lists, and what the sampler keeps for the charts.

use serde::Serialize;

use crate::databases::Client;
use crate::failure::Failure;

const STATS: &str = include_str!("../queries/stats.sql");

#[derive(Clone, Debug, Serialize)]
pub struct QueueRow {
    pub queue: String,
    pub paused: bool,
    pub sender: Option<String>,
    pub pending: i64,
    pub scheduled: i64,
    pub processing: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub cancelled: i64,
    /// Pending jobs waiting for their parents (0.4).
    pub blocked: i64,
    pub oldest_due_secs: Option<f64>,
    pub enqueued_total: i64,
    pub succeeded_total: i64,
    pub failed_total: i64,
}

pub async fn fetch(client: &Client) -> Result<Vec<QueueRow>, Failure> {
    let rows = client.query(STATS, &[]).await?;
    Ok(rows
        .iter()
        .map(|row| QueueRow {
            queue: row.get("queue"),
            paused: row.get("paused"),
            // (a webhook's is `POST <url>`: shown by the URL rule whatever
            // the extension left of its path)
            sender: row
                .get::<_, Option<String>>("sender")
                .map(|sender| crate::urls::shown_in(&sender)),
            pending: row.get("pending"),
            scheduled: row.get("scheduled"),
            processing: row.get("processing"),
            succeeded: row.get("succeeded"),
            failed: row.get("failed"),
            cancelled: row.get("cancelled"),
            blocked: row.get("blocked"),
            oldest_due_secs: row.get("oldest_due_secs"),
            enqueued_total: row.get("enqueued_total"),
            succeeded_total: row.get("succeeded_total"),
            failed_total: row.get("failed_total"),
        })
        .collect())
}

/// An age for people: "4 s", "3 min", "2 h 5 min", "3 d 4 h".
pub fn age(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        3600..=86399 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}
