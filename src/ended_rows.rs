//! The jobs a statement ended, read from the rows it returned: the attempts
//! that were in flight end in the latency histograms (metrics), and the jobs'
//! waiters and awaiters are told at the commit (announce). Shared by the
//! moves that end jobs (jobs.rs) and the cascade of a parent's failure
//! (dependencies.rs).

use pgrx::datum::Uuid;

use crate::announce;
use crate::db;
use crate::ends::{Ended, Outcome};
use crate::metrics;

/// The jobs `rows` ended (their ids and queues), by id, announced for
/// the commit: their waiters and awaiters look again (announce.rs); the
/// attempts that were in flight ended as `outcome` (metrics).
pub fn announced(rows: db::Rows<'_>, outcome: Outcome) -> Vec<Ended> {
    let now = crate::time::now_us();
    let mut ended: Vec<Ended> = rows
        .map(|r| {
            let job = Ended {
                id: r.value("id"),
                queue_id: r.value("queue_id"),
                has_children: r.value("has_children"),
            };
            if let Some(lease) = r.get::<Uuid>("lease") {
                metrics::ended(job.queue_id, outcome, &lease, now);
            }
            job
        })
        .collect();
    ended.sort_unstable();
    announce::ended(&ended);
    ended
}
