//! One module per thing a user looks at, with the actions beside it.

pub mod actions;
pub mod cluster;
pub mod confirm;
pub mod dead;
pub mod dead_actions;
pub mod heads;
pub mod job;
pub mod jobs;
pub mod queue;

use serde::Deserialize;

/// What an action's redirect says happened (a fixed text per word, so a
/// crafted link cannot put words on the page).
#[derive(Deserialize, Default)]
pub struct Note {
    pub done: Option<String>,
    pub n: Option<i64>,
    /// A purge: the jobs its confirmation page counted.
    pub counted: Option<i64>,
}

impl Note {
    pub fn text(&self) -> Option<String> {
        let n = self.n.unwrap_or(0);
        let text = match self.done.as_deref()? {
            "retried" => "Retried: the job is pending again.".to_string(),
            "not-retried" => "Not retried: only a failed or cancelled job can be (or another unfinished job holds its dedup key).".to_string(),
            "cancelled" => "Cancelled.".to_string(),
            "not-cancelled" => "Not cancelled: only a pending or processing job can be.".to_string(),
            "purged" => match self.counted {
                Some(counted) if counted != n => format!(
                    "Purged {n} jobs ({counted} when you confirmed: the queue changed meanwhile)."
                ),
                _ => format!("Purged {n} jobs."),
            },
            "paused" => "Paused: nothing is claimed or delivered until it is resumed.".to_string(),
            "resumed" => "Resumed.".to_string(),
            "ran" => format!("The schedule enqueued job {n}."),
            "ran-head" => format!(
                "Job {n} runs again now: cancelled and retried in one statement, its attempts \
                 start over and it stays at its group's head."
            ),
            "let-go" => format!("Let go: job {n} is cancelled, and its group goes on with its next job."),
            "head-moved" => format!(
                "Nothing was done: job {n} has moved on since it was shown (claimed, ended or retried)."
            ),
            "retried-many" => match self.counted {
                Some(counted) if counted != n => format!(
                    "Retried {n} dead letters ({counted} when you confirmed: the others were no \
                     longer dead letters)."
                ),
                _ => format!("Retried {n} dead letters: they are pending again."),
            },
            "purged-many" => match self.counted {
                Some(counted) if counted != n => format!(
                    "Purged {n} dead letters ({counted} when you confirmed: the others were no \
                     longer dead letters)."
                ),
                _ => format!("Purged {n} dead letters."),
            },
            _ => return None,
        };
        Some(text)
    }
}

/// The status words of queue_jobs.
pub const STATUSES: [&str; 5] = ["pending", "processing", "succeeded", "failed", "cancelled"];
