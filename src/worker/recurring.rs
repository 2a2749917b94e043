//! The schedules of the worker's database (docs/schedules.md): their due
//! ticks fire in a transaction of their own before a round's deliveries,
//! when the earliest tick falls due or a commit changed the schedules, so
//! a busy round costs no look at them.

use pgrx::pg_sys::Oid;

use super::session::{self, Session};
use super::wake;
use crate::announce;
use crate::schedules::fire;

pub struct Recurring {
    /// When the earliest tick falls due (0: look now, i64::MAX: none).
    next_at: i64,
}

impl Recurring {
    /// A worker looks at its schedules when it starts.
    pub fn new() -> Recurring {
        Recurring { next_at: 0 }
    }

    /// Fires the ticks due at `now`; returns how many jobs that enqueued.
    pub fn run(&mut self, session: &Session, database: Oid, now: i64) -> usize {
        if wake::take_schedules_changed(database) {
            self.next_at = 0;
        }
        if now < self.next_at {
            return 0;
        }
        let (fired, next) = session::transaction(|| {
            let (fired, next) =
                session.tables(|client| (fire::fire_due(client, now), fire::next_tick(client)));
            // Consumers waiting on a pull queue take its jobs; the worker
            // itself delivers those of its own queues.
            for &(queue_id, jobs) in &fired {
                announce::work_due(queue_id, false, jobs, now);
            }
            (fired, next)
        });
        self.next_at = next.unwrap_or(i64::MAX);
        fired.iter().map(|(_, jobs)| jobs).sum()
    }
}
