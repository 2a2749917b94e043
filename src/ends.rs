//! How jobs end, as the moves of jobs.rs report it to those that act on
//! it: the jobs that wait for them (dependencies.rs), whoever a commit
//! wakes (announce.rs) and the latency histograms (metrics).

/// How a job ended: for the children that wait for it, and for the
/// latency histograms (metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }

    pub fn of_status(status: &str) -> Outcome {
        match status {
            "succeeded" => Outcome::Succeeded,
            "cancelled" => Outcome::Cancelled,
            _ => Outcome::Failed,
        }
    }
}

/// A job that ended, and its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ended {
    pub id: i64,
    pub queue_id: i32,
    /// Jobs wait for it (dependencies.rs).
    pub has_children: bool,
}

impl Ended {
    /// Jobs `ids`, all of queue `queue_id`, and which of them have children.
    pub fn all_of(queue_id: i32, ids: Vec<i64>, parents: &[i64]) -> Vec<Ended> {
        ids.into_iter()
            .map(|id| Ended {
                id,
                queue_id,
                has_children: parents.contains(&id),
            })
            .collect()
    }
}

/// What a failed attempt did to its job.
pub struct Failed {
    /// The job's status word now: 'pending' or 'failed'.
    pub status: &'static str,
    /// It waits for another attempt in a queue with a sender: the caller
    /// asks for a worker at commit.
    pub wake: bool,
    pub queue_id: i32,
    /// When its next attempt is due (None: it failed for good).
    pub retry_at: Option<i64>,
}
