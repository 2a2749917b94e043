//! Recurring jobs (docs/schedules.md): creating, replacing and removing
//! schedules, running one now, and the ticks an expression would give.

use pgrx::prelude::*;

use crate::announce;
use crate::catalog;
use crate::db::{self, args};
use crate::errors::{self, required, OrRaise, QueueError};
use crate::jsonb::Jsonb;
use crate::queries;
use crate::rules;
use crate::schedules::plan::CatchUp;
use crate::schedules::{cron, fire, ticks};
use crate::worker::shared;

#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::too_many_arguments)]
fn queue_schedule(
    name: Option<&str>,
    queue: Option<&str>,
    cron: Option<&str>,
    payload: default!(Option<Jsonb>, "'{}'"),
    headers: default!(Option<Jsonb>, "NULL"),
    priority: default!(Option<i32>, 0),
    group_key: default!(Option<&str>, "NULL"),
    time_zone: default!(Option<&str>, "'UTC'"),
    catch_up: default!(Option<&str>, "'one'"),
    no_overlap: default!(Option<bool>, false),
    paused: default!(Option<bool>, false),
) {
    let name = required(name, "name");
    let queue_name = required(queue, "queue");
    let expr = required(cron, "cron");
    let payload = required(payload, "payload");
    let priority = required(priority, "priority");
    let zone_name = required(time_zone, "time_zone");
    let catch_up = required(catch_up, "catch_up");
    let no_overlap = required(no_overlap, "no_overlap");
    let paused = required(paused, "paused");
    rules::check_schedule_name(name).or_raise();
    rules::check_name(queue_name).or_raise();
    let pattern = cron::parse(expr).or_raise();
    let tz = ticks::zone(zone_name).or_raise();
    if CatchUp::parse(catch_up).is_none() {
        QueueError::UnknownCatchUp {
            word: catch_up.to_string(),
        }
        .raise();
    }
    if let Some(key) = group_key {
        rules::check_group_key("group_key", key).or_raise();
    }
    super::check_headers(headers);
    let caller = db::calling_role();
    let now = crate::time::now_us();
    let next = ticks::next_after(&pattern, tz, now);
    db::with_tables(|client| {
        let queue = catalog::require(client, queue_name).or_raise();
        queue.check_owner(caller, "schedule into").or_raise();
        // a replacement: the schedule's queue so far must be the caller's too
        let was = db::run(client, &queries::SCHEDULE_LOCK, args![name = name])
            .first()
            .map(|r| r.value::<String>("queue"));
        if let Some(was) = was.filter(|was| *was != queue.name) {
            catalog::require(client, &was)
                .or_raise()
                .check_owner(caller, "schedule into")
                .or_raise();
        }
        db::run(
            client,
            &queries::SCHEDULE_PUT,
            args![
                name = name,
                queue_id = queue.id,
                cron = expr.trim(),
                time_zone = zone_name,
                payload = payload,
                headers = headers,
                priority = priority,
                group_key = group_key,
                catch_up = catch_up,
                no_overlap = no_overlap,
                paused = paused,
                owner = caller,
                next_run_at = next.map(db::timestamp),
                now = db::timestamp(now),
            ],
        );
    });
    announce::schedules_changed();
    if !shared::available() {
        errors::warn_schedules_without_preload();
    }
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_unschedule(name: Option<&str>) -> bool {
    let name = required(name, "name");
    let caller = db::calling_role();
    let removed = db::with_tables(|client| {
        let Some(was) = db::run(client, &queries::SCHEDULE_LOCK, args![name = name])
            .first()
            .map(|r| r.value::<String>("queue"))
        else {
            return false;
        };
        catalog::require(client, &was)
            .or_raise()
            .check_owner(caller, "unschedule from")
            .or_raise();
        !db::run(client, &queries::SCHEDULE_DELETE, args![name = name]).is_empty()
    });
    if removed {
        announce::schedules_changed();
    }
    removed
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_run_schedule(name: Option<&str>) -> i64 {
    let name = required(name, "name");
    let caller = db::calling_role();
    db::with_tables(|client| {
        let locked = fire::lock(client, name).unwrap_or_else(|| undefined(name));
        catalog::require(client, &locked.queue)
            .or_raise()
            .check_owner(caller, "run a schedule of")
            .or_raise();
        let id = fire::run_now(client, name, &locked, crate::time::now_us());
        announce::work_due(locked.queue_id, locked.pushed, 1, crate::time::now_us());
        id
    })
}

fn undefined(name: &str) -> ! {
    QueueError::UndefinedSchedule {
        name: name.to_string(),
    }
    .raise()
}

/// The next `count` ticks of `cron` in `time_zone` after `after`: what a
/// schedule would do, without one (and without waiting for the clock).
#[pg_extern(stable, parallel_safe)]
fn queue_schedule_ticks(
    cron: Option<&str>,
    time_zone: default!(Option<&str>, "'UTC'"),
    after: default!(Option<TimestampWithTimeZone>, "now()"),
    count: default!(Option<i32>, 5),
) -> SetOfIterator<'static, TimestampWithTimeZone> {
    let expr = required(cron, "cron");
    let zone_name = required(time_zone, "time_zone");
    let after = required(after, "after");
    let count = required(count, "count");
    let pattern = cron::parse(expr).or_raise();
    let tz = ticks::zone(zone_name).or_raise();
    let count = rules::check_tick_count(count).or_raise();
    let mut at = after.into_inner();
    let mut found = Vec::with_capacity(count);
    while found.len() < count {
        match ticks::next_after(&pattern, tz, at) {
            Some(next) => {
                found.push(db::timestamp(next));
                at = next;
            }
            None => break,
        }
    }
    SetOfIterator::new(found)
}
