//! What is stuck, found without being asked: a group of an ordered queue
//! whose head keeps failing, a queue with due jobs that nobody claims, a
//! schedule whose tick did not fire (and, from queue_workers, a database
//! waiting for a worker slot: pages/cluster.rs). The sampler reads the
//! first and the last in each database at each interval, beside its
//! counts, so the cluster page does not pay for them at every load.

use serde::Serialize;

use crate::databases::Client;
use crate::failure::Failure;
use crate::stats::{age, QueueRow};
use crate::urls::shown_in;

const STUCK_HEADS: &str = include_str!("../queries/stuck_heads.sql");
const LATE_SCHEDULES: &str = include_str!("../queries/late_schedules.sql");

/// How long past its time a tick must be to count as missed: the worker
/// fires ticks within a second.
const LATE_AFTER_SECS: f64 = 15.0;
/// How many of the sampler's readings a queue with due jobs must show
/// nothing finished in (and nothing in flight) for it to count as
/// unclaimed: a minute at the default interval.
const SILENT_SAMPLES: usize = 6;

#[derive(Clone, Serialize)]
pub struct StuckHead {
    pub queue: String,
    pub group_key: String,
    /// Jobs of the group waiting (the head among them when it is pending).
    pub pending: i64,
    pub head_id: i64,
    pub status: String,
    pub attempts: i32,
    pub max_attempts: i32,
    /// "in 54 min 3 s", "now": when a pending head is due again.
    pub due: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Clone, Serialize)]
pub struct LateSchedule {
    pub name: String,
    /// Its queue's page (set by the page that shows it).
    pub link: String,
    pub queue: String,
    pub next_run_at: String,
    pub late: String,
    pub catch_up: String,
}

/// What the sampler found stuck in one database.
#[derive(Clone, Default, Serialize)]
pub struct Stuck {
    pub heads: Vec<StuckHead>,
    pub late: Vec<LateSchedule>,
    /// The database's refusal, when it would not say.
    pub error: Option<String>,
}

async fn heads(client: &Client, queues: &[QueueRow]) -> Result<Vec<StuckHead>, Failure> {
    // (a group's head is unfinished: queues without such jobs are not asked)
    let busy: Vec<&str> = queues
        .iter()
        .filter(|q| q.pending + q.scheduled + q.processing + q.blocked > 0)
        .map(|q| q.queue.as_str())
        .collect();
    if busy.is_empty() {
        return Ok(Vec::new());
    }
    let rows = client.query(STUCK_HEADS, &[&busy]).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let status: String = row.get("status");
            let due_in: Option<f64> = row.get("due_in_secs");
            StuckHead {
                queue: row.get("queue"),
                group_key: row.get("group_key"),
                pending: row.get("pending"),
                head_id: row.get("head_id"),
                due: (status == "pending").then(|| match due_in {
                    Some(secs) if secs >= 1.0 => format!("in {}", age(secs)),
                    _ => "now".to_string(),
                }),
                status,
                attempts: row.get("attempts"),
                max_attempts: row.get("max_attempts"),
                last_error: row
                    .get::<_, Option<String>>("last_error")
                    .map(|e| shown_in(&e)),
            }
        })
        .collect())
}

async fn late(client: &Client) -> Result<Vec<LateSchedule>, Failure> {
    let rows = client.query(LATE_SCHEDULES, &[&LATE_AFTER_SECS]).await?;
    Ok(rows
        .iter()
        .map(|row| LateSchedule {
            name: row.get("name"),
            link: String::new(),
            queue: row.get("queue"),
            next_run_at: row.get("next_run_at"),
            late: age(row.get("late_secs")),
            catch_up: row.get("catch_up"),
        })
        .collect())
}

/// Reads what is stuck in the database of `client`, whose queues are
/// `queues` (its latest counts).
pub async fn fetch(client: &Client, queues: &[QueueRow]) -> Stuck {
    let heads = heads(client, queues).await;
    let late = late(client).await;
    let error = [heads.as_ref().err(), late.as_ref().err()]
        .into_iter()
        .flatten()
        .map(Failure::summary)
        .next();
    Stuck {
        heads: heads.unwrap_or_default(),
        late: late.unwrap_or_default(),
        error,
    }
}

/// A queue with due jobs that nobody takes.
#[derive(Serialize)]
pub struct Unclaimed {
    pub queue: String,
    /// Its page (set by the page that shows it).
    pub link: String,
    pub due: i64,
    pub oldest_due: String,
    pub paused: bool,
    pub sender: Option<String>,
    /// How long the samples show nothing finished and nothing in flight.
    pub silent_for: Option<String>,
}

/// A reading of how many jobs of a queue had finished (succeeded or failed)
/// `at` seconds since the Unix epoch.
pub struct Reading {
    pub at: f64,
    pub finished: i64,
}

/// The queues among `queues` with due jobs that are not moving: paused
/// ones, and those whose last SILENT_SAMPLES readings (`history` of each,
/// oldest first) show none finished and none in flight.
pub fn unclaimed(queues: &[QueueRow], history: impl Fn(&str) -> Vec<Reading>) -> Vec<Unclaimed> {
    queues
        .iter()
        .filter(|q| q.pending > 0)
        .filter_map(|q| {
            let oldest_due = q.oldest_due_secs.unwrap_or(0.0);
            let silent_for = if q.paused {
                None
            } else {
                let samples = history(&q.queue);
                let recent = samples.get(samples.len().checked_sub(SILENT_SAMPLES)?..)?;
                let (first, last) = (recent.first()?, recent.last()?);
                let still = first.finished == last.finished && q.processing == 0;
                let span = last.at - first.at;
                if !still || oldest_due < span {
                    return None;
                }
                Some(age(span))
            };
            Some(Unclaimed {
                queue: q.queue.clone(),
                link: String::new(),
                due: q.pending,
                oldest_due: age(oldest_due),
                paused: q.paused,
                sender: q.sender.clone(),
                silent_for,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, pending: i64, processing: i64, paused: bool) -> QueueRow {
        QueueRow {
            queue: name.into(),
            paused,
            sender: None,
            pending,
            scheduled: 0,
            processing,
            succeeded: 0,
            failed: 0,
            cancelled: 0,
            blocked: 0,
            oldest_due_secs: (pending > 0).then_some(600.0),
            enqueued_total: 0,
            succeeded_total: 0,
            failed_total: 0,
        }
    }

    fn history(finished: &[i64]) -> Vec<Reading> {
        finished
            .iter()
            .enumerate()
            .map(|(i, n)| Reading {
                at: i as f64 * 10.0,
                finished: *n,
            })
            .collect()
    }

    #[test]
    fn a_queue_is_unclaimed_when_nothing_moved_over_six_readings() {
        let queues = [
            queue("still", 5, 0, false),
            queue("moving", 5, 0, false),
            queue("busy", 5, 2, false),
            queue("new", 5, 0, false),
            queue("paused", 3, 0, true),
            queue("empty", 0, 0, false),
        ];
        let found = unclaimed(&queues, |name| match name {
            "still" => history(&[4, 7, 7, 7, 7, 7, 7]),
            "moving" => history(&[7, 7, 7, 7, 7, 8]),
            "busy" => history(&[7; 6]),
            "new" => history(&[7; 5]),
            _ => history(&[0; 6]),
        });
        let names: Vec<&str> = found.iter().map(|u| u.queue.as_str()).collect();
        assert_eq!(names, ["still", "paused"]);
        assert_eq!(found[0].silent_for.as_deref(), Some("50 s"));
        assert_eq!(found[0].oldest_due, "10 min 0 s");
        assert!(found[1].paused && found[1].silent_for.is_none());
    }
}
