//! Taking jobs off a queue and reporting how they went.

use std::cmp::Reverse;
use std::collections::HashSet;

use pgrx::datum::{Interval, Uuid};
use pgrx::prelude::*;

use super::duration;
use crate::catalog::{self, micros};
use crate::db;
use crate::errors::{required, OrRaise, QueueError};
use crate::jsonb::Jsonb;
use crate::policy::{add_delay, after_failure, Backoff, FailOutcome};
use crate::queries;
use crate::rules::{self, at_least_zero, positive};
use crate::worker::wake;

/// A claim first makes due scheduled jobs ready, at least this many at a
/// time, so that priorities hold among everything that is due.
const PROMOTE_AT_LEAST: usize = 1_000;

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn queue_claim(
    queue: Option<&str>,
    worker: default!(Option<&str>, "NULL"),
    max_jobs: default!(Option<i32>, 1),
    lease: default!(Option<Interval>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(id, i64),
        name!(queue, String),
        name!(payload, Jsonb),
        name!(headers, Option<Jsonb>),
        name!(attempt, i32),
        name!(max_attempts, i32),
        name!(enqueued_at, TimestampWithTimeZone),
        name!(lease, Uuid),
        name!(lease_expires_at, TimestampWithTimeZone),
    ),
> {
    let name = required(queue, "queue");
    let max_jobs = rules::check_max_jobs(required(max_jobs, "max_jobs")).or_raise();
    let lease_us = lease.map(|l| {
        let d = duration(&l);
        positive("lease", &d).or_raise();
        d.micros
    });
    rules::check_name(name).or_raise();
    let jobs = db::with_tables(|client| {
        let queue = catalog::require(client, name).or_raise();
        if queue.paused {
            return Vec::new();
        }
        let now = db::now_us();
        let at = db::timestamp(now);
        let promote = max_jobs.max(PROMOTE_AT_LEAST) as i32;
        db::run(
            client,
            &queries::PROMOTE,
            &[queue.id.into(), at.into(), promote.into()],
        );
        let rescued = db::run(
            client,
            &queries::RESCUE,
            &[
                queue.id.into(),
                at.into(),
                (max_jobs as i32).into(),
                queue.max_attempts.into(),
            ],
        );
        let exhausted: Vec<i64> = rescued
            .into_iter()
            .filter(|r| r.get::<bool>(2).ok().flatten() == Some(true))
            .filter_map(|r| r.get::<i64>(1).ok().flatten())
            .collect();
        bury(client, exhausted, now, None);

        let expires = db::timestamp(add_delay(now, lease_us.unwrap_or(queue.lease_us)));
        let mut jobs = Vec::with_capacity(max_jobs);
        loop {
            let wanted = (max_jobs - jobs.len()) as i32;
            let rows = db::run(
                client,
                &queries::CLAIM,
                &[
                    queue.id.into(),
                    wanted.into(),
                    queue.max_attempts.into(),
                    expires.into(),
                    worker.into(),
                ],
            );
            let mut exhausted = Vec::new();
            for row in rows {
                let id: i64 = row.get(1).ok().flatten().expect("a job id");
                let state: String = row.get(2).ok().flatten().expect("a state");
                if state == "ready" {
                    exhausted.push(id);
                    continue;
                }
                let priority: i32 = row.get(9).ok().flatten().expect("a priority");
                let run_at: TimestampWithTimeZone = row.get(10).ok().flatten().expect("run_at");
                let job = (
                    id,
                    name.to_string(),
                    row.get(3).ok().flatten().expect("a payload"),
                    row.get(4).ok().flatten(),
                    row.get(5).ok().flatten().expect("an attempt"),
                    queue.max_attempts,
                    row.get(6).ok().flatten().expect("enqueued_at"),
                    row.get(7).ok().flatten().expect("a lease"),
                    row.get(8).ok().flatten().expect("a lease expiry"),
                );
                jobs.push(((Reverse(priority), run_at.into_inner(), id), job));
            }
            // Jobs with no attempt left go to the dead letters; look for
            // others to fill the batch.
            let done = exhausted.is_empty();
            bury(client, exhausted, now, None);
            if done || jobs.len() >= max_jobs {
                break;
            }
        }
        jobs.sort_unstable_by_key(|(order, _)| *order);
        jobs.into_iter().map(|(_, job)| job).collect()
    });
    TableIterator::new(jobs)
}

/// Moves jobs the caller has locked to the dead letters, with last_error
/// `error` (or the one they have).
fn bury(client: &mut pgrx::spi::SpiClient<'_>, ids: Vec<i64>, now: i64, error: Option<&str>) {
    if !ids.is_empty() {
        db::run(
            client,
            &queries::BURY,
            &[ids.into(), db::timestamp(now).into(), error.into()],
        );
    }
}

/// Completes every (id, lease) pair whose lease is held; returns their ids.
fn complete(ids: Vec<i64>, leases: Vec<Uuid>) -> Vec<i64> {
    let presented: HashSet<(i64, [u8; 16])> = ids
        .iter()
        .zip(&leases)
        .map(|(id, lease)| (*id, *lease.as_bytes()))
        .collect();
    let now = db::timestamp(db::now_us());
    db::with_tables(|client| {
        let in_flight = db::run(client, &queries::LEASED, &[ids.into(), leases.into()]);
        let held: Vec<i64> = in_flight
            .into_iter()
            .filter_map(|r| {
                let id: i64 = r.get(1).ok().flatten()?;
                let lease: Uuid = r.get(2).ok().flatten()?;
                presented.contains(&(id, *lease.as_bytes())).then_some(id)
            })
            .collect();
        if held.is_empty() {
            return held;
        }
        let rows = db::run(
            client,
            &queries::FINISH,
            &[held.into(), now.into(), "succeeded".into()],
        );
        let mut done: Vec<i64> = rows
            .into_iter()
            .filter_map(|r| r.get::<i64>(1).ok().flatten())
            .collect();
        done.sort_unstable();
        done
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn queue_complete(id: Option<i64>, lease: Option<Uuid>) -> bool {
    let id = required(id, "id");
    let lease = required(lease, "lease");
    !complete(vec![id], vec![lease]).is_empty()
}

/// The elements of a required array argument, none of them NULL.
fn elements<T>(values: Option<Vec<Option<T>>>, argument: &'static str) -> Vec<T> {
    let values = required(values, argument);
    rules::check_batch_len(argument, values.len()).or_raise();
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.unwrap_or_else(|| {
                QueueError::NullElement {
                    argument,
                    position: i + 1,
                }
                .raise()
            })
        })
        .collect()
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn queue_complete_batch(
    ids: Option<Vec<Option<i64>>>,
    leases: Option<Vec<Option<Uuid>>>,
) -> SetOfIterator<'static, i64> {
    let ids = elements(ids, "ids");
    let leases = elements(leases, "leases");
    if ids.len() != leases.len() {
        QueueError::ArrayLengthMismatch {
            left: "ids",
            left_len: ids.len(),
            right: "leases",
            right_len: leases.len(),
        }
        .raise();
    }
    let done = if ids.is_empty() {
        Vec::new()
    } else {
        complete(ids, leases)
    };
    SetOfIterator::new(done)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn queue_fail(
    id: Option<i64>,
    lease: Option<Uuid>,
    error: Option<&str>,
    retry_in: default!(Option<Interval>, "NULL"),
    permanent: default!(Option<bool>, false),
) -> Option<&'static str> {
    let id = required(id, "id");
    let lease = required(lease, "lease");
    let error = required(error, "error");
    let permanent = required(permanent, "permanent");
    let retry_in_us = retry_in.map(|r| {
        let d = duration(&r);
        at_least_zero("retry_in", &d).or_raise();
        d.micros
    });
    db::with_tables(|client| {
        let rows = db::run(client, &queries::FAIL_LOCK, &[id.into(), lease.into()]);
        let row = rows.into_iter().next()?;
        let attempts: i32 = row.get(1).ok().flatten().expect("attempts");
        let max_attempts: i32 = row.get(2).ok().flatten().expect("max_attempts");
        let backoff: String = row.get(3).ok().flatten().expect("backoff");
        let interval = |n| micros(&row.get::<Interval>(n).ok().flatten().expect("an interval"));
        let random = unsafe { pg_sys::pg_prng_double(&raw mut pg_sys::pg_global_prng_state) };
        let outcome = after_failure(
            attempts,
            max_attempts,
            permanent,
            retry_in_us,
            Backoff::parse(&backoff).expect("a stored backoff word"),
            interval(4),
            interval(5),
            random,
        );
        let now = db::now_us();
        Some(match outcome {
            FailOutcome::Retry { delay_us } => {
                let state = if delay_us == 0 { "ready" } else { "scheduled" };
                let run_at = db::timestamp(add_delay(now, delay_us));
                db::run(
                    client,
                    &queries::FAIL_RETRY,
                    &[id.into(), run_at.into(), state.into(), error.into()],
                );
                wake::on_commit();
                "pending"
            }
            FailOutcome::Dead => {
                bury(client, vec![id], now, Some(error));
                "failed"
            }
        })
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn queue_extend(
    id: Option<i64>,
    lease: Option<Uuid>,
    by: Option<Interval>,
) -> Option<TimestampWithTimeZone> {
    let id = required(id, "id");
    let lease = required(lease, "lease");
    let by = duration(&required(by, "by"));
    positive("by", &by).or_raise();
    let expires = db::timestamp(add_delay(db::now_us(), by.micros));
    db::with_tables(|client| {
        let rows = db::run(
            client,
            &queries::EXTEND,
            &[id.into(), lease.into(), expires.into()],
        );
        rows.into_iter()
            .next()
            .and_then(|r| r.get(1).ok().flatten())
    })
}
