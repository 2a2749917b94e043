//! The moves of a job that both the pull API and the background worker
//! make: claiming, completing, failing and burying. The caller holds an SPI
//! connection as the extension owner (`db::with_tables`).

use std::cmp::Reverse;

use pgrx::datum::{Interval, TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use crate::catalog::{micros, Queue};
use crate::db;
use crate::jsonb::Jsonb;
use crate::policy::{add_delay, after_failure, Backoff, FailOutcome};
use crate::queries;
use crate::worker::wake;

/// A claim first makes due scheduled jobs ready, at least this many at a
/// time, so that priorities hold among everything that is due.
const PROMOTE_AT_LEAST: usize = 1_000;

/// A job just claimed.
pub struct Claimed {
    pub id: i64,
    pub payload: Jsonb,
    pub headers: Option<Jsonb>,
    pub attempt: i32,
    pub enqueued_at: TimestampWithTimeZone,
    pub lease: Uuid,
    pub lease_expires_at: TimestampWithTimeZone,
}

/// Claims up to `max_jobs` due jobs of `queue` in claim order, each under a
/// new lease of `lease_us`, for `worker`. Expired leases come back first;
/// jobs found with no attempt left go to the dead letters on the way.
pub fn claim(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    max_jobs: usize,
    lease_us: i64,
    worker: Option<&str>,
) -> Vec<Claimed> {
    let now = crate::time::now_us();
    let at = db::timestamp(now);
    let chores = db::run(
        client,
        &queries::CLAIM_CHORES,
        &[queue.id.into(), at.into()],
    )
    .first();
    let (due, expired) = (
        chores.get::<bool>(1).ok().flatten() == Some(true),
        chores.get::<bool>(2).ok().flatten() == Some(true),
    );
    if due {
        let promote = max_jobs.max(PROMOTE_AT_LEAST) as i32;
        db::run(
            client,
            &queries::PROMOTE,
            &[queue.id.into(), at.into(), promote.into()],
        );
    }
    if expired {
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
            .filter(|r| r.get::<bool>(2).ok().flatten() == Some(true))
            .filter_map(|r| r.get::<i64>(1).ok().flatten())
            .collect();
        bury(client, exhausted, now, None);
    }

    let expires = db::timestamp(add_delay(now, lease_us));
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
            let job = Claimed {
                id,
                payload: row.get(3).ok().flatten().expect("a payload"),
                headers: row.get(4).ok().flatten(),
                attempt: row.get(5).ok().flatten().expect("an attempt"),
                enqueued_at: row.get(6).ok().flatten().expect("enqueued_at"),
                lease: row.get(7).ok().flatten().expect("a lease"),
                lease_expires_at: row.get(8).ok().flatten().expect("a lease expiry"),
            };
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
}

/// Jobs bury_expired() takes per call: one short transaction's worth.
pub const BURIED_PER_CALL: i32 = 1_000;

/// In-flight jobs of any queue whose lease expired before `now` with no
/// attempt left, at most `limit`, go to the dead letters with a last_error
/// saying so. Returns how many.
pub fn bury_expired(client: &mut SpiClient<'_>, now: i64, limit: i32) -> usize {
    let ids: Vec<i64> = db::run(
        client,
        &queries::EXPIRE_LEASES,
        &[db::timestamp(now).into(), limit.into()],
    )
    .filter_map(|r| r.get::<i64>(1).ok().flatten())
    .collect();
    let buried = ids.len();
    bury(client, ids, now, None);
    buried
}

/// Moves jobs the caller has locked to the dead letters, with last_error
/// `error` (or the one they have).
pub fn bury(client: &mut SpiClient<'_>, ids: Vec<i64>, now: i64, error: Option<&str>) {
    if !ids.is_empty() {
        db::run(
            client,
            &queries::BURY,
            &[ids.into(), db::timestamp(now).into(), error.into()],
        );
    }
}

/// Completes every (id, lease) pair whose lease is held; returns their ids,
/// ascending.
pub fn complete(client: &mut SpiClient<'_>, ids: Vec<i64>, leases: Vec<Uuid>) -> Vec<i64> {
    let now = db::timestamp(crate::time::now_us());
    let rows = db::run(
        client,
        &queries::COMPLETE,
        &[ids.into(), leases.into(), now.into()],
    );
    let mut done: Vec<i64> = rows
        .filter_map(|r| r.get::<i64>(1).ok().flatten())
        .collect();
    done.sort_unstable();
    done
}

/// Jobs the caller has locked end `succeeded`; returns their ids, ascending.
pub fn succeed(client: &mut SpiClient<'_>, ids: Vec<i64>) -> Vec<i64> {
    let now = db::timestamp(crate::time::now_us());
    let rows = db::run(
        client,
        &queries::FINISH,
        &[ids.into(), now.into(), "succeeded".into()],
    );
    let mut done: Vec<i64> = rows
        .into_iter()
        .filter_map(|r| r.get::<i64>(1).ok().flatten())
        .collect();
    done.sort_unstable();
    done
}

/// A failed attempt of job `id` under `lease`: the retry policy of its
/// queue decides between another attempt and the dead letters. Returns the
/// new status word, or None when the lease is not held.
pub fn fail(
    client: &mut SpiClient<'_>,
    id: i64,
    lease: Uuid,
    error: &str,
    retry_in_us: Option<i64>,
    permanent: bool,
) -> Option<&'static str> {
    let rows = db::run(client, &queries::FAIL_LOCK, &[id.into(), lease.into()]);
    let row = rows.into_iter().next()?;
    let attempts: i32 = row.get(1).ok().flatten().expect("attempts");
    let max_attempts: i32 = row.get(2).ok().flatten().expect("max_attempts");
    let backoff: String = row.get(3).ok().flatten().expect("backoff");
    let interval = |n| micros(&row.get::<Interval>(n).ok().flatten().expect("an interval"));
    // SAFETY: the process-wide PRNG state is seeded when the process starts
    // (InitProcessGlobals) and only this thread touches it; it is passed as
    // a raw pointer, with no Rust reference to it alive.
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
    let now = crate::time::now_us();
    Some(match outcome {
        FailOutcome::Retry { delay_us } => {
            let state = if delay_us == 0 { "ready" } else { "scheduled" };
            let run_at = db::timestamp(add_delay(now, delay_us));
            db::run(
                client,
                &queries::FAIL_RETRY,
                &[id.into(), run_at.into(), state.into(), error.into()],
            );
            wake::on_commit(row.get(6).ok().flatten().unwrap_or(false));
            "pending"
        }
        FailOutcome::Dead => {
            bury(client, vec![id], now, Some(error));
            "failed"
        }
    })
}
