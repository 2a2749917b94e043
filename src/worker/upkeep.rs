//! What the worker does for its database besides delivering: every second
//! it buries in-flight jobs whose lease expired with no attempt left (in
//! every queue, pull queues too) and, while a snapshot held open keeps dead
//! tuples from being cleaned, rotates the live ring if that is due; every
//! queue.upkeep_interval it does what queue_maintain() does (the rotation
//! by its other rules, then retention cleanup and folding the counters).

use pgrx::Spi;

use super::decisions;
use super::session::{self, report_stat, Session};
use super::subxact;
use crate::errors::QueueError;
use crate::gucs;
use crate::jobs;

/// How often expired leases are looked for (they are found by index, but
/// a busy worker need not look between every two batches), and whether the
/// live ring is due to rotate while a snapshot is held (that can be every
/// few seconds under load; otherwise queue_maintain()'s cadence is enough).
const EVERY_SECOND_US: i64 = crate::time::SECOND_US;

/// A database without a worker is visited for its retention cleanup at
/// most once every this many queue.upkeep_interval (a minute by default):
/// jobs whose retention ends one after another in a database nobody uses are
/// removed a minute's worth at a time, not one worker start each.
const QUIET_INTERVALS: i64 = 6;

/// How long a database without a worker waits at least for its cleanup.
pub fn quiet_us() -> i64 {
    QUIET_INTERVALS * interval_us()
}

pub struct Upkeep {
    /// The every-second looks: expired leases (from the start for a worker
    /// the launcher sent for a due time, which may be a lease's; a second
    /// in for one a commit asked for, which delivers its job first: should
    /// it leave before, the lease is in the due time it leaves behind), and
    /// the rotation under a held snapshot (from a second in: a worker that
    /// delivers one job and leaves need not look at pg_stat_activity).
    next_bury: i64,
    next_rotation_check: i64,
    next_maintenance: i64,
    /// Jobs moved since queue_maintain() last ran in this database: its
    /// maintenance is owed (a database without activity owes none).
    owed: bool,
}

impl Upkeep {
    /// A worker starting at `now` runs queue_maintain() when its database's
    /// last worker said it would be owed (`owed_at`, 0: none), or one
    /// queue.upkeep_interval after it has moved jobs: a database served by
    /// one short-lived worker after another neither runs it at every start
    /// nor goes without it. `sent_for_due_time`: the worker was started for
    /// a due time its database's last worker left, not for a commit.
    pub fn new(now: i64, owed_at: i64, sent_for_due_time: bool) -> Upkeep {
        Upkeep {
            next_bury: if sent_for_due_time {
                0
            } else {
                now + EVERY_SECOND_US
            },
            next_rotation_check: now + EVERY_SECOND_US,
            next_maintenance: decisions::first_maintenance(now, owed_at, interval_us()),
            owed: owed_at > 0,
        }
    }

    /// The worker moved jobs: maintenance is owed.
    pub fn note_work(&mut self) {
        self.owed = true;
    }

    /// When queue_maintain() is owed, if it is (what a leaving worker
    /// records for the next one, and for the launcher's visit).
    pub fn owed_at(&self) -> Option<i64> {
        self.owed.then_some(self.next_maintenance)
    }

    /// When the next upkeep falls due: the worker wakes for it.
    pub fn next_at(&self) -> i64 {
        let grace = if self.owed { 0 } else { quiet_us() };
        self.next_bury
            .min(self.next_rotation_check)
            .min(self.next_maintenance + grace)
    }

    /// Does what is due at `now`. `hurry`: another database waits for this
    /// worker's slot; queue_maintain() (tens of milliseconds in a worker
    /// that has just started) then waits, unless it is overdue by a quiet
    /// interval: a burst across many databases is not slowed down by each
    /// one's maintenance, and a database always gets it at last.
    pub fn run(&mut self, session: &Session, now: i64, hurry: bool) {
        if now >= self.next_bury {
            bury_expired(session);
            self.next_bury = now + EVERY_SECOND_US;
        }
        if now >= self.next_rotation_check {
            // A CASE is evaluated in this order; a WHERE clause on a volatile
            // function is not, and would let the rotation run whatever the
            // check said.
            upkeep(
                session,
                "SELECT CASE WHEN queue_cleanup_held_back() THEN queue_rotate_live()::int ELSE 0 END::bigint",
            );
            self.next_rotation_check = now + EVERY_SECOND_US;
        }
        if decisions::maintenance_due(now, self.next_maintenance, self.owed, hurry, quiet_us()) {
            // queue_maintain()'s two parts, each in a transaction of its
            // own: writers held up by a rotation's lock on the live
            // partition hold queue_tallies meanwhile, and a fold in the same
            // transaction could never have it alone to empty it
            upkeep(session, "SELECT queue_rotate_live()::int::bigint");
            let cleaned = upkeep(session, "SELECT queue_cleanup()");
            self.next_maintenance = decisions::next_maintenance(cleaned, now, interval_us());
            self.owed = cleaned > 0;
        }
    }
}

fn interval_us() -> i64 {
    crate::time::seconds(gucs::UPKEEP_INTERVAL_S.get())
}

/// What queue_bury_expired() does, until nothing is left, each chunk in a
/// transaction of its own. (Called directly, not through SQL: a database
/// still at an older version of the extension has no such function until
/// ALTER EXTENSION UPDATE, and its worker buries all the same.)
fn bury_expired(session: &Session) {
    loop {
        let buried = session::transaction(|| {
            session.tables(|client| {
                jobs::bury_expired(client, crate::time::now_us(), jobs::BURIED_PER_CALL)
            })
        });
        report_stat();
        if buried == 0 {
            return;
        }
    }
}

/// An upkeep function, as its owner would call it, in a transaction of its
/// own. It never waits long for a lock; should it fail anyway, the worker
/// logs it and goes on. Returns the number `query` gives (queue_cleanup():
/// how many finished jobs it removed).
fn upkeep(session: &Session, query: &'static str) -> i64 {
    let outcome = session::transaction(|| {
        session.scoped(|| {
            subxact::run(|| {
                let detail = match Spi::get_one::<i64>(query) {
                    Ok(Some(n)) => return n,
                    Ok(None) => "it returned NULL".to_string(),
                    Err(e) => e.to_string(),
                };
                QueueError::StatementShape {
                    statement: query,
                    detail,
                }
                .raise()
            })
        })
    });
    report_stat();
    outcome.unwrap_or_else(|raised| {
        pgrx::warning!("queue worker: upkeep failed: {}", raised.message);
        0
    })
}
