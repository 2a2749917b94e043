//! The moves of a job that both the pull API and the background worker
//! make: claiming, completing, failing and burying. The caller holds an SPI
//! connection as the extension owner (`db::with_tables`).

use std::cmp::Reverse;
use std::collections::HashSet;

use pgrx::datum::{Interval, TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use crate::catalog::{self, micros, Queue};
use crate::db::{self, args};
use crate::dependencies;
use crate::ended_rows;
use crate::ends::{Ended, Failed, Outcome};
use crate::jsonb::Jsonb;
use crate::limits;
use crate::metrics;
use crate::policy::{add_delay, after_failure, Backoff, FailOutcome};
use crate::queries;

/// A claim first makes due scheduled jobs ready, at least this many at a
/// time, so that priorities hold among everything that is due.
const PROMOTE_AT_LEAST: usize = 1_000;

/// How many times a claim looks again for jobs to fill its batch, after
/// jobs with no attempt left or jobs someone else had locked.
const CLAIM_ROUNDS: usize = 8;

/// A job just claimed.
pub struct Claimed {
    pub id: i64,
    pub payload: Jsonb,
    pub headers: Option<Jsonb>,
    pub attempt: i32,
    pub enqueued_at: TimestampWithTimeZone,
    pub lease: Uuid,
    pub lease_expires_at: TimestampWithTimeZone,
    /// The request body of a webhook's job (claim's `bodies`).
    pub body: Option<String>,
    /// Its `webhook-id`, the same on every attempt (with `bodies`).
    pub webhook_id: Option<String>,
}

/// What a claim took.
#[derive(Default)]
pub struct Claim {
    pub jobs: Vec<Claimed>,
    /// A limit of the queue (docs/groups.md) kept some ready job back.
    pub held_back: bool,
}

/// Claims up to `max_jobs` due jobs of `queue` in claim order, each under a
/// new lease of `lease_us`, for `worker`, within the queue's order and
/// limits as they are once the claim holds the queue's rules lock
/// (catalog::for_claim). Expired leases come back first; jobs found with no
/// attempt left go to the dead letters on the way. `bodies`: each job comes
/// with its webhook request's body. Nothing from a queue paused or dropped
/// meanwhile.
pub fn claim(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    max_jobs: usize,
    lease_us: i64,
    worker: Option<&str>,
    bodies: bool,
) -> Claim {
    let Some(queue) = catalog::for_claim(client, queue).filter(|q| !q.paused) else {
        return Claim::default();
    };
    let queue = &queue;
    let group_counted = queue.limits.ordered || queue.limits.group_max_in_flight.is_some();
    let mut now = crate::time::now_us();
    promote_and_take_back(client, queue, max_jobs, now);

    let claim = |client: &mut SpiClient<'_>, now: i64, wanted: usize, ids: Option<Vec<i64>>| {
        let expires = db::timestamp(add_delay(now, lease_us));
        let (stmt, ids) = match ids {
            None if queue.limits.ordered => (&queries::CLAIM_ORDERED, None),
            None => (&queries::CLAIM, None),
            Some(ids) => (&queries::CLAIM_IDS, Some(ids)),
        };
        let (names, values) = args![
            queue_id = queue.id,
            limit = wanted as i32,
            max_attempts = queue.max_attempts,
            lease_until = expires,
            worker = worker,
            body_queue = bodies.then_some(queue.name.as_str()),
            group_counted = group_counted,
            ids = ids,
        ];
        // Only the statement's parameters are passed: claim_next.sql has no `ids`.
        let used = stmt.params.len();
        let rows = db::run(client, stmt, (&names[..used], &values[..used]));
        rows.map(|row| {
            let id: i64 = row.value("id");
            if row.value::<String>("state") == "ready" {
                return Err(id);
            }
            let order = (
                Reverse(row.value::<i32>("priority")),
                row.value::<i64>("turn"),
                row.value::<TimestampWithTimeZone>("run_at").into_inner(),
                id,
            );
            Ok((
                order,
                row.get::<String>("group_key"),
                Claimed {
                    id,
                    payload: row.value("payload"),
                    headers: row.get("headers"),
                    attempt: row.value("attempts"),
                    enqueued_at: row.value("enqueued_at"),
                    lease: row.value("lease"),
                    lease_expires_at: row.value("lease_expires_at"),
                    body: row.get("body"),
                    webhook_id: row.get("webhook_id"),
                },
            ))
        })
        .collect::<Vec<_>>()
    };

    // An ordered queue whose limits count nothing claims from the front of the
    // claim order in one statement, ordered_heads.sql, in READ COMMITTED.
    let turn = limits::takes_turn(&queue.limits).then(|| limits::take_turn(queue, max_jobs));
    if turn.is_some() {
        // A claim that counts reads the clock once it has its turn: the claims
        // before it, which it may have waited for, are then all older, and
        // `limits::note` keeps what it counts.
        now = crate::time::now_us();
    }
    let mut jobs = Vec::with_capacity(max_jobs);
    let mut held_back = false;
    // jobs chosen that someone else had locked meanwhile (a cancel, a
    // purge): the next choice passes them by
    let mut taken_elsewhere = HashSet::new();
    // An ordered queue's claim looks at the front of the claim order first;
    // when that comes back short, at the heads group by group.
    let mut by_group = false;
    for _ in 0..CLAIM_ROUNDS {
        let wanted = max_jobs - jobs.len();
        let (limit, ids) = if let Some(turn) = &turn {
            let chosen = limits::choose(client, queue, turn, wanted, &mut now, &taken_elsewhere);
            held_back |= chosen.held_back;
            match chosen.pick {
                limits::Pick::Next(0) => break,
                limits::Pick::These(ids) if ids.is_empty() => break,
                limits::Pick::Next(room) => (room, None),
                limits::Pick::These(ids) => (ids.len(), Some(ids)),
            }
        } else if by_group {
            let ids: Vec<i64> =
                limits::group_firsts(client, queue, wanted + taken_elsewhere.len(), None)
                    .into_iter()
                    .map(|(id, _)| id)
                    .filter(|id| !taken_elsewhere.contains(id))
                    .take(wanted)
                    .collect();
            if ids.is_empty() {
                break;
            }
            (ids.len(), Some(ids))
        } else {
            (wanted, None)
        };
        let asked: Vec<i64> = ids.clone().unwrap_or_default();
        let mut exhausted = Vec::new();
        let mut claimed = Vec::new();
        for row in claim(client, now, limit, ids) {
            match row {
                Ok(job) => claimed.push(job),
                Err(id) => exhausted.push(id),
            }
        }
        if turn.is_some() {
            limits::note(
                client,
                queue,
                now,
                claimed.iter().map(|(_, group, _)| group.as_deref()),
            );
        }
        let got: HashSet<i64> = claimed
            .iter()
            .map(|(_, _, job)| job.id)
            .chain(exhausted.iter().copied())
            .collect();
        let missed = asked.iter().filter(|id| !got.contains(id)).count();
        taken_elsewhere.extend(asked.into_iter().filter(|id| !got.contains(id)));
        jobs.extend(claimed);
        // Jobs with no attempt left go to the dead letters, and jobs someone
        // else had locked are passed by: look for others to fill the batch.
        let short = queue.limits.ordered && turn.is_none() && !by_group && got.len() < limit;
        let again = !exhausted.is_empty() || missed > 0 || short;
        by_group |= short;
        bury(client, exhausted, now, None);
        if !again || jobs.len() >= max_jobs {
            break;
        }
    }
    if let Some(turn) = &turn {
        turn.took(jobs.len());
    }
    jobs.sort_unstable_by_key(|(order, _, _)| *order);
    for ((_, _, due_at, _), _, _) in &jobs {
        metrics::claimed(queue.id, *due_at, now);
    }
    Claim {
        jobs: jobs.into_iter().map(|(_, _, job)| job).collect(),
        held_back,
    }
}

/// What a claim at `now` of up to `max_jobs` does first: due scheduled jobs
/// become ready, and expired leases come back (those with no attempt left
/// go to the dead letters).
fn promote_and_take_back(client: &mut SpiClient<'_>, queue: &Queue, max_jobs: usize, now: i64) {
    let at = db::timestamp(now);
    let found = db::run(
        client,
        &queries::DUE_OR_EXPIRED,
        args![queue_id = queue.id, now = at],
    )
    .first()
    .expect("one row");
    let (due, expired) = (found.value::<bool>("due"), found.value::<bool>("expired"));
    if due {
        let promote = max_jobs.max(PROMOTE_AT_LEAST) as i32;
        db::run(
            client,
            &queries::PROMOTE,
            args![queue_id = queue.id, now = at, limit = promote],
        );
    }
    if expired {
        let taken_back = db::run(
            client,
            &queries::TAKE_BACK,
            args![
                queue_id = queue.id,
                now = at,
                limit = max_jobs as i32,
                max_attempts = queue.max_attempts,
            ],
        );
        let exhausted: Vec<i64> = taken_back
            .filter(|r| r.value::<bool>("exhausted"))
            .map(|r| r.value::<i64>("id"))
            .collect();
        bury(client, exhausted, now, None);
    }
}

/// A job locked for a delivery in one transaction (`lock_next`).
pub struct Locked {
    pub id: i64,
    /// The argument its sender gets, the attempt under way counted.
    pub job: Jsonb,
    pub group: Option<String>,
}

/// Up to `max_jobs` due jobs of `queue` in claim order, locked for the
/// caller's transaction but not claimed: no lease, no attempt written. For
/// a queue without limits that count, or with only limits of the queue as
/// a whole and no order (the caller has its turn beside the claims under
/// way: limits::turn_beside), delivered in the same transaction
/// (sql_delivery.rs), which then deletes each job delivered and counts an
/// attempt only for those that fail (`count_attempts`). An ordered queue's
/// jobs are its groups' heads at the front of the claim order (none when
/// the heads lie further on: the claim's walk finds those). The claim's
/// promote_and_take_back comes first, as for `claim`; jobs found with no attempt left go to
/// the dead letters.
pub fn lock_next(client: &mut SpiClient<'_>, queue: &Queue, max_jobs: usize) -> Vec<Locked> {
    // Locked before the look's snapshot: a change of the rules, or a retry of
    // an older job of a group, committed by then is seen; one after waits for
    // the batch. The caller read `queue` under this lock (batches.rs).
    catalog::lock_rules(queue.id, false);
    let now = crate::time::now_us();
    promote_and_take_back(client, queue, max_jobs, now);
    let mut exhausted = Vec::new();
    let stmt = if queue.limits.ordered {
        &queries::LOCK_NEXT_ORDERED
    } else {
        &queries::LOCK_NEXT
    };
    let locked = db::run(
        client,
        stmt,
        args![
            queue_id = queue.id,
            limit = max_jobs as i32,
            queue = queue.name.as_str(),
            max_attempts = queue.max_attempts,
        ],
    )
    .filter_map(|row| {
        let id: i64 = row.value("id");
        if row.value::<i32>("attempts") >= queue.max_attempts {
            exhausted.push(id);
            return None;
        }
        let due_at = row.value::<TimestampWithTimeZone>("run_at").into_inner();
        metrics::claimed(queue.id, due_at, now);
        Some(Locked {
            id,
            job: row.value("job"),
            group: row.get("group_key"),
        })
    })
    .collect();
    bury(client, exhausted, now, None);
    locked
}

/// A job whose attempt `count_attempts` counted.
pub struct Attempted {
    pub id: i64,
    pub lease: Uuid,
    pub queue_id: i32,
    pub group: Option<String>,
}

/// Jobs `ids` that the caller locked with `lock_next` count the attempt it
/// made of them, which `began` then, and are in flight, for `worker`, under
/// an expired lease (which says when the attempt began: leases.rs): the
/// caller then records a failed attempt (`fail`) or leaves them to the
/// recovery of jobs a stopped worker left in flight.
pub fn count_attempts(
    client: &mut SpiClient<'_>,
    ids: Vec<i64>,
    worker: &str,
    began: i64,
) -> Vec<Attempted> {
    db::run(
        client,
        &queries::COUNT_ATTEMPTS,
        args![ids = ids, worker = worker, at = db::timestamp(began)],
    )
    .map(|row| Attempted {
        id: row.value("id"),
        lease: row.value("lease"),
        queue_id: row.value("queue_id"),
        group: row.get("group_key"),
    })
    .collect()
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
        args![now = db::timestamp(now), limit = limit],
    )
    .map(|r| r.value::<i64>("id"))
    .collect();
    let buried = ids.len();
    bury(client, ids, now, None);
    buried
}

/// Moves jobs the caller has locked to the dead letters, with last_error
/// `error` (or the one they have).
pub fn bury(client: &mut SpiClient<'_>, ids: Vec<i64>, now: i64, error: Option<&str>) {
    if !ids.is_empty() {
        let rows = db::run(
            client,
            &queries::BURY,
            args![ids = ids, at = db::timestamp(now), error = error],
        );
        ended(client, rows, Outcome::Failed);
    }
}

/// `announced`, and the jobs that wait for those that ended so (`outcome`)
/// are settled in the same transaction (dependencies.rs).
fn ended(client: &mut SpiClient<'_>, rows: db::Rows<'_>, outcome: Outcome) -> Vec<Ended> {
    let ended = ended_rows::announced(rows, outcome);
    settle(client, &ended, outcome);
    ended
}

/// Settles the children of the jobs `ended` that have some, which ended
/// as `outcome` says.
pub fn settle(client: &mut SpiClient<'_>, ended: &[Ended], outcome: Outcome) {
    let parents: Vec<(i64, Outcome)> = ended
        .iter()
        .filter(|job| job.has_children)
        .map(|job| (job.id, outcome))
        .collect();
    if !parents.is_empty() {
        dependencies::settle(client, parents);
    }
}

/// Completes every (id, lease) pair whose lease is held, each with its
/// result (the caller checked their sizes); returns them, ascending by id.
pub fn complete(
    client: &mut SpiClient<'_>,
    ids: Vec<i64>,
    leases: Vec<Uuid>,
    results: Option<Vec<Option<Jsonb>>>,
) -> Vec<Ended> {
    let now = db::timestamp(crate::time::now_us());
    let rows = db::run(
        client,
        &queries::COMPLETE,
        args![
            ids = ids,
            at = now,
            status = "succeeded",
            leases = leases,
            results = results
        ],
    );
    ended(client, rows, Outcome::Succeeded)
}

/// Jobs the caller has locked end `succeeded`, with the senders' results
/// (one per id); returns them, ascending by id.
pub fn succeed(
    client: &mut SpiClient<'_>,
    ids: Vec<i64>,
    results: Vec<Option<Jsonb>>,
) -> Vec<Ended> {
    let now = db::timestamp(crate::time::now_us());
    let rows = db::run(
        client,
        &queries::COMPLETE_CLAIMED,
        args![ids = ids, at = now, status = "succeeded", results = results],
    );
    ended(client, rows, Outcome::Succeeded)
}

/// Jobs `ids` end `cancelled` unless they have ended already (a cancel
/// waits for whoever holds one); returns those it ended.
pub fn cancel(client: &mut SpiClient<'_>, ids: Vec<i64>) -> Vec<Ended> {
    let now = db::timestamp(crate::time::now_us());
    let rows = db::run(
        client,
        &queries::FINISH,
        args![ids = ids, at = now, status = "cancelled"],
    );
    ended(client, rows, Outcome::Cancelled)
}

/// Jobs locked by `lock_next` and delivered by `worker` end `succeeded`,
/// with the senders' results (one per id), their attempt counted (it was
/// never written), begun at `began` (metrics).
pub fn succeed_locked(
    client: &mut SpiClient<'_>,
    ids: Vec<i64>,
    results: Vec<Option<Jsonb>>,
    worker: &str,
    began: i64,
) {
    let now_us = crate::time::now_us();
    let now = db::timestamp(now_us);
    let rows = db::run(
        client,
        &queries::FINISH_LOCKED,
        args![
            ids = ids,
            at = now,
            status = "succeeded",
            worker = worker,
            results = results
        ],
    );
    for job in ended(client, rows, Outcome::Succeeded) {
        metrics::ended_since(job.queue_id, Outcome::Succeeded, began, now_us);
    }
}

/// A failed attempt of job `id` under `lease`: the retry policy of its
/// queue decides between another attempt and the dead letters, or
/// `retry_in_us` when given (`capped`: no longer than the queue's
/// max_retry_delay, for an endpoint's Retry-After). None when the lease is
/// not held.
pub fn fail(
    client: &mut SpiClient<'_>,
    id: i64,
    lease: Uuid,
    error: &str,
    retry_in_us: Option<i64>,
    permanent: bool,
    capped: bool,
) -> Option<Failed> {
    let row = db::run(client, &queries::FAIL_LOCK, args![id = id, lease = lease]).first()?;
    let attempts: i32 = row.value("attempts");
    let max_attempts: i32 = row.value("max_attempts");
    let backoff: String = row.value("backoff");
    let interval = |name| micros(&row.value::<Interval>(name));
    // SAFETY: the process-wide PRNG state is seeded when the process starts
    // (InitProcessGlobals) and only this thread touches it; it is passed as
    // a raw pointer, with no Rust reference to it alive.
    let random = unsafe { pg_sys::pg_prng_double(&raw mut pg_sys::pg_global_prng_state) };
    let outcome = after_failure(
        attempts,
        max_attempts,
        permanent,
        retry_in_us.map(|us| {
            if capped {
                us.min(interval("max_retry_delay"))
            } else {
                us
            }
        }),
        Backoff::parse(&backoff).expect("a stored backoff word"),
        interval("retry_delay"),
        interval("max_retry_delay"),
        random,
    );
    let now = crate::time::now_us();
    metrics::ended(row.value("queue_id"), Outcome::Failed, &lease, now);
    Some(match outcome {
        FailOutcome::Retry { delay_us } => {
            let state = if delay_us == 0 { "ready" } else { "scheduled" };
            let run_at = db::timestamp(add_delay(now, delay_us));
            db::run(
                client,
                &queries::FAIL_RETRY,
                args![id = id, run_at = run_at, state = state, error = error],
            );
            Failed {
                status: "pending",
                wake: row.value("has_sender"),
                queue_id: row.value("queue_id"),
                retry_at: Some(add_delay(now, delay_us)),
            }
        }
        FailOutcome::Dead => {
            bury(client, vec![id], now, Some(error));
            Failed {
                status: "failed",
                wake: false,
                queue_id: row.value("queue_id"),
                retry_at: None,
            }
        }
    })
}
