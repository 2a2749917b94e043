//! Taking jobs off a queue and reporting how they went.

use pgrx::datum::{Interval, Uuid};
use pgrx::prelude::*;

use super::duration;
use crate::announce;
use crate::catalog;
use crate::db::{self, args};
use crate::direct_completion;
use crate::ends::{Ended, Outcome};
use crate::errors::{no_null_elements, required, OrRaise, QueueError};
use crate::jobs;
use crate::jsonb::{Jsonb, JsonbArray};
use crate::metrics;
use crate::policy::add_delay;
use crate::queries;
use crate::rules::{self, at_least_zero, positive};

// The column names live in the signature, where pgrx reads them.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
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
    if let Some(worker) = worker {
        rules::check_worker_name(worker).or_raise();
    }
    let claimed = db::with_tables(|client| {
        let queue = catalog::require_cached(client, name).or_raise();
        queue.check_pulled().or_raise();
        if queue.paused {
            return Vec::new();
        }
        let lease_us = lease_us.unwrap_or(queue.lease_us);
        jobs::claim(client, &queue, max_jobs, lease_us, worker, false)
            .jobs
            .into_iter()
            .map(|job| {
                (
                    job.id,
                    name.to_string(),
                    job.payload,
                    job.headers,
                    job.attempt,
                    queue.max_attempts,
                    job.enqueued_at,
                    job.lease,
                    job.lease_expires_at,
                )
            })
            .collect()
    });
    TableIterator::new(claimed)
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_complete(
    id: Option<i64>,
    lease: Option<Uuid>,
    result: default!(Option<Jsonb>, "NULL"),
) -> bool {
    let id = required(id, "id");
    let lease = required(lease, "lease");
    if let Some(result) = result {
        rules::check_result_size(result.size()).or_raise();
    }
    // Done without the statement when nothing is kept (direct_completion.rs).
    match direct_completion::complete(id, lease) {
        direct_completion::Outcome::Completed { queue_id } => {
            announce::ended(&[Ended {
                id,
                queue_id,
                has_children: false,
            }]);
            metrics::ended(queue_id, Outcome::Succeeded, &lease, crate::time::now_us());
            true
        }
        direct_completion::Outcome::NotHeld => false,
        direct_completion::Outcome::UseStatement => !db::with_tables(|client| {
            jobs::complete(client, vec![id], vec![lease], result.map(|r| vec![Some(r)]))
        })
        .is_empty(),
    }
}

/// The elements of a required array argument, none of them NULL.
fn elements<T>(values: Option<Vec<Option<T>>>, argument: &'static str) -> Vec<T> {
    let values = required(values, argument);
    rules::check_batch_len(argument, values.len()).or_raise();
    no_null_elements(values, argument)
}

/// 22023 unless arrays `left` and `right` have one element each for the
/// other's.
fn same_length(left: (&'static str, usize), right: (&'static str, usize)) {
    if left.1 != right.1 {
        QueueError::ArrayLengthMismatch {
            left: left.0,
            left_len: left.1,
            right: right.0,
            right_len: right.1,
        }
        .raise();
    }
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_complete_batch(
    ids: Option<Vec<Option<i64>>>,
    leases: Option<Vec<Option<Uuid>>>,
    results: default!(Option<JsonbArray>, "NULL"),
) -> SetOfIterator<'static, i64> {
    let ids = elements(ids, "ids");
    let leases = elements(leases, "leases");
    same_length(("ids", ids.len()), ("leases", leases.len()));
    let results = results.map(JsonbArray::elements);
    if let Some(results) = &results {
        same_length(("ids", ids.len()), ("results", results.len()));
        for result in results.iter().flatten() {
            rules::check_result_size(result.size()).or_raise();
        }
    }
    if ids.is_empty() {
        return SetOfIterator::new(Vec::new());
    }
    // Done without the statement when nothing is kept and no result given, as
    // queue_complete does (direct_completion.rs); the rest by the statement.
    let pairs: Vec<(i64, Uuid)> = ids.iter().copied().zip(leases.iter().copied()).collect();
    let outcomes = match &results {
        Some(results) if results.iter().any(Option::is_some) => None,
        _ => direct_completion::complete_many(&pairs),
    };
    let mut done: Vec<i64> = Vec::with_capacity(ids.len());
    let (mut rest_ids, mut rest_leases) = (Vec::new(), Vec::new());
    let mut ended = Vec::new();
    let now = crate::time::now_us();
    match outcomes {
        None => (rest_ids, rest_leases) = (ids, leases),
        Some(outcomes) => {
            for ((id, lease), outcome) in pairs.into_iter().zip(outcomes) {
                match outcome {
                    direct_completion::Outcome::Completed { queue_id } => {
                        done.push(id);
                        ended.push(Ended {
                            id,
                            queue_id,
                            has_children: false,
                        });
                        metrics::ended(queue_id, Outcome::Succeeded, &lease, now);
                    }
                    direct_completion::Outcome::NotHeld => {}
                    direct_completion::Outcome::UseStatement => {
                        rest_ids.push(id);
                        rest_leases.push(lease);
                    }
                }
            }
        }
    }
    announce::ended(&ended);
    if !rest_ids.is_empty() {
        // Results only come here all together: no pair was done above.
        done.extend(
            db::with_tables(|client| jobs::complete(client, rest_ids, rest_leases, results))
                .into_iter()
                .map(|job| job.id),
        );
    }
    done.sort_unstable();
    SetOfIterator::new(done)
}

#[pg_extern(volatile, parallel_unsafe)]
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
    let failed = db::with_tables(|client| {
        jobs::fail(client, id, lease, error, retry_in_us, permanent, false)
    })?;
    announce::attempt_failed(&failed);
    Some(failed.status)
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_extend(
    id: Option<i64>,
    lease: Option<Uuid>,
    by: Option<Interval>,
) -> Option<TimestampWithTimeZone> {
    let id = required(id, "id");
    let lease = required(lease, "lease");
    let by = duration(&required(by, "by"));
    positive("by", &by).or_raise();
    let expires = db::timestamp(add_delay(crate::time::now_us(), by.micros));
    db::with_tables(|client| {
        db::run(
            client,
            &queries::EXTEND,
            args![id = id, lease = lease, lease_until = expires],
        )
        .first()
        .map(|r| r.value("lease_expires_at"))
    })
}
