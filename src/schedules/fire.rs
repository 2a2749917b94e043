//! Firing ticks in the database: the worker's rounds (`fire_due`) and
//! queue_run_schedule (`run_now`). Each tick's job and the schedule's
//! advance past it are written in the caller's transaction, so a tick gets
//! exactly one job whatever stops the server, and two workers (or a
//! worker and a replacement) never fire one tick twice: the schedule's row
//! is locked meanwhile. Locks are taken in queue_drop's order: the queue,
//! then the schedule.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use super::plan::{self, CatchUp};
use super::{cron, ticks};
use crate::catalog;
use crate::db::{self, args};
use crate::queries;
use crate::worker::shared;

/// Fires every schedule with a tick due at `now`; returns how many jobs it
/// enqueued into each queue (queue id, jobs).
pub fn fire_due(client: &mut SpiClient<'_>, now: i64) -> Vec<(i32, usize)> {
    let due: Vec<(String, i32)> = db::run(
        client,
        &queries::SCHEDULES_DUE,
        args![now = db::timestamp(now)],
    )
    .map(|r| (r.value("name"), r.value("queue_id")))
    .collect();
    due.into_iter()
        .map(|(name, queue_id)| (queue_id, fire_one(client, &name, queue_id, now)))
        .filter(|(_, jobs)| *jobs > 0)
        .collect()
}

/// The earliest tick of this database's schedules, if any.
pub fn next_tick(client: &mut SpiClient<'_>) -> Option<i64> {
    db::run(client, &queries::NEXT_TICK, args![])
        .first()
        .and_then(|r| r.get::<TimestampWithTimeZone>("at"))
        .map(|t| t.into_inner())
}

fn fire_one(client: &mut SpiClient<'_>, name: &str, queue_id: i32, now: i64) -> usize {
    catalog::lock_queue(queue_id, false);
    let Some(row) = db::run(
        client,
        &queries::SCHEDULE_DUE_LOCK,
        args![name = name, now = db::timestamp(now)],
    )
    .first() else {
        return 0;
    };
    let at = |column: &str| row.value::<TimestampWithTimeZone>(column).into_inner();
    let (first, missed_before) = (at("next_run_at"), at("missed_before"));
    let expr: String = row.value("cron");
    let zone_name: String = row.value("time_zone");
    let catch_up = CatchUp::parse(&row.value::<String>("catch_up"));
    let no_overlap: bool = row.value("no_overlap");
    let mut last_job: Option<i64> = row.get("last_job_id");
    let group_key: Option<String> = row.get("group_key");
    let ordered: bool = row.value("ordered");
    let moved: i32 = row.value("queue_id");
    if moved != queue_id {
        // replaced into another queue since the look: a later round
        return 0;
    }
    let (Ok(pattern), Ok(tz), Some(catch_up)) =
        (cron::parse(&expr), ticks::zone(&zone_name), catch_up)
    else {
        // stored by another release's rules, which this one refuses: the
        // schedule stops (next_run_at NULL) rather than being looked at
        // every round; queue_schedule() sets it again
        pgrx::warning!("schedule \"{name}\" cannot be read by this release: it stops");
        advance(client, name, None, None, None, 0, 0);
        return 0;
    };
    let floor = missed_before.max(serving_since());
    let plan = plan::plan(&pattern, tz, first, now, floor, catch_up);
    let mut skipped = plan.skipped;
    let mut runs = 0;
    let mut last_run = None;
    for tick in plan.fire {
        if no_overlap && last_job.is_some_and(|id| unfinished(client, id)) {
            skipped += 1;
            continue;
        }
        last_job = Some(enqueue(
            client,
            name,
            queue_id,
            group_key.as_deref(),
            ordered,
            tz,
            tick,
            now,
        ));
        last_run = Some(tick);
        runs += 1;
    }
    advance(client, name, plan.next, last_run, last_job, runs, skipped);
    runs as usize
}

/// A schedule locked for a run outside its ticks.
pub struct Locked {
    pub queue: String,
    pub queue_id: i32,
    tz: chrono_tz::Tz,
    group_key: Option<String>,
    ordered: bool,
    pub pushed: bool,
}

/// Locks schedule `name` and its queue, in queue_drop's order; None when
/// there is no such schedule.
pub fn lock(client: &mut SpiClient<'_>, name: &str) -> Option<Locked> {
    loop {
        let queue_id: i32 = db::run(client, &queries::SCHEDULE_FIND, args![name = name])
            .first()?
            .value("queue_id");
        catalog::lock_queue(queue_id, false);
        let row = db::run(client, &queries::SCHEDULE_LOCK, args![name = name]).first()?;
        if row.value::<i32>("queue_id") != queue_id {
            continue; // replaced into another queue meanwhile
        }
        let zone_name: String = row.value("time_zone");
        return Some(Locked {
            queue: row.value("queue"),
            queue_id,
            tz: ticks::zone(&zone_name).unwrap_or(chrono_tz::UTC),
            group_key: row.get("group_key"),
            ordered: row.value("ordered"),
            pushed: row.value("pushed"),
        });
    }
}

/// Enqueues one job of the locked schedule `name` now, outside its ticks
/// (it counts as a run; the next tick stays); returns its id.
pub fn run_now(client: &mut SpiClient<'_>, name: &str, locked: &Locked, now: i64) -> i64 {
    let id = enqueue(
        client,
        name,
        locked.queue_id,
        locked.group_key.as_deref(),
        locked.ordered,
        locked.tz,
        now,
        now,
    );
    db::run(
        client,
        &queries::SCHEDULE_RUN,
        args![
            name = name,
            last_run_at = db::timestamp(now),
            last_job_id = id
        ],
    );
    id
}

#[allow(clippy::too_many_arguments)]
fn enqueue(
    client: &mut SpiClient<'_>,
    name: &str,
    queue_id: i32,
    group_key: Option<&str>,
    ordered: bool,
    tz: chrono_tz::Tz,
    tick: i64,
    now: i64,
) -> i64 {
    if let (Some(key), true) = (group_key, ordered) {
        catalog::lock_group(queue_id, key);
    }
    db::run(
        client,
        &queries::SCHEDULE_JOB,
        args![
            name = name,
            scheduled_for = ticks::iso8601(tz, tick),
            now = db::timestamp(now),
        ],
    )
    .first()
    .expect("the schedule's row is locked")
    .value("id")
}

fn unfinished(client: &mut SpiClient<'_>, id: i64) -> bool {
    db::run(client, &queries::JOB_UNFINISHED, args![id = id])
        .first()
        .expect("one row")
        .value("unfinished")
}

fn advance(
    client: &mut SpiClient<'_>,
    name: &str,
    next: Option<i64>,
    last_run: Option<i64>,
    last_job: Option<i64>,
    runs: i64,
    skipped: i64,
) {
    db::run(
        client,
        &queries::SCHEDULE_ADVANCE,
        args![
            name = name,
            next_run_at = next.map(db::timestamp),
            last_run_at = last_run.map(db::timestamp),
            last_job_id = last_job,
            runs = runs,
            skipped = skipped,
        ],
    );
}

/// When this server began to fire ticks: its start, or, for one that
/// started as a standby, its promotion (the launcher's first start since,
/// worker/shared.rs). Ticks before it were missed (API.md, catch_up), not
/// late: a failover's downtime counts as the server being down.
fn serving_since() -> i64 {
    // SAFETY: PgStartTime is set by the postmaster before any backend or
    // worker starts, and never changes after.
    let started = unsafe { pg_sys::PgStartTime };
    if !shared::available() {
        return started;
    }
    let launcher = shared::SHARED
        .share()
        .serving_since
        .load(std::sync::atomic::Ordering::Relaxed);
    started.max(launcher)
}
