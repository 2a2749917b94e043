//! Putting jobs on a queue.

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use super::duration;
use crate::catalog::{self, Queue};
use crate::db::{self, args};
use crate::errors::{required, OrRaise, QueueError};
use crate::jsonb::{Jsonb, JsonbArray};
use crate::policy::{add_delay, TIMESTAMP_END_US};
use crate::queries;
use crate::rules::{self, at_least_zero};
use crate::worker::wake;

/// When a new job falls due, and the state that says so. `run_at` wins over
/// `delay`.
fn due(now: i64, delay: &Interval, run_at: Option<TimestampWithTimeZone>) -> (i64, &'static str) {
    let delay = duration(delay);
    at_least_zero("delay", &delay).or_raise();
    let due = match run_at {
        Some(at) => at.into_inner().min(TIMESTAMP_END_US - 1),
        None => add_delay(now, delay.micros),
    };
    (due, if due <= now { "ready" } else { "scheduled" })
}

fn queue_for_insert(client: &mut SpiClient<'_>, name: &str) -> Queue {
    let queue = catalog::require_cached(client, name).or_raise();
    catalog::lock_queue(queue.id, false);
    queue
}

/// The id the insert returned; none means the queue was dropped meanwhile.
fn inserted(ids: Vec<i64>, name: &str) -> Vec<i64> {
    if ids.is_empty() {
        QueueError::UndefinedQueue {
            name: name.to_string(),
        }
        .raise();
    }
    ids
}

#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::too_many_arguments)]
fn queue_enqueue(
    queue: Option<&str>,
    payload: Option<Jsonb>,
    delay: default!(Option<Interval>, "'0'"),
    priority: default!(Option<i32>, 0),
    dedup_key: default!(Option<&str>, "NULL"),
    run_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    headers: default!(Option<Jsonb>, "NULL"),
) -> i64 {
    let name = required(queue, "queue");
    let payload = required(payload, "payload");
    let delay = required(delay, "delay");
    let priority = required(priority, "priority");
    rules::check_name(name).or_raise();
    if let Some(h) = headers {
        let kind = h.type_name();
        if kind != "object" {
            QueueError::NotAnObject {
                argument: "headers",
                value: kind,
            }
            .raise();
        }
    }
    let now = crate::time::now_us();
    let (due, state) = due(now, &delay, run_at);
    db::with_tables(|client| {
        let queue = queue_for_insert(client, name);
        if let Some(key) = dedup_key {
            catalog::lock_dedup_key(queue.id, key);
            let existing = db::run(
                client,
                &queries::DEDUP_FIND,
                args![queue_id = queue.id, dedup_key = key],
            );
            if let Some(row) = existing.first() {
                return row.value("id");
            }
        }
        let rows = db::run(
            client,
            &queries::ENQUEUE,
            args![
                queue_id = queue.id,
                payload = payload,
                headers = headers,
                priority = priority,
                run_at = db::timestamp(due),
                state = state,
                dedup_key = dedup_key,
                now = db::timestamp(now),
            ],
        );
        let ids = rows.map(|r| r.value::<i64>("id")).collect();
        let id = inserted(ids, name)[0];
        wake::on_commit(queue.sender.is_some());
        id
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_enqueue_batch(
    queue: Option<&str>,
    payloads: Option<JsonbArray>,
    delay: default!(Option<Interval>, "'0'"),
    priority: default!(Option<i32>, 0),
) -> SetOfIterator<'static, i64> {
    let name = required(queue, "queue");
    let payloads = required(payloads, "payloads");
    let delay = required(delay, "delay");
    let priority = required(priority, "priority");
    rules::check_name(name).or_raise();
    let shape = payloads.shape();
    if shape.dimensions > 1 {
        QueueError::NotOneDimensional {
            argument: "payloads",
        }
        .raise();
    }
    if let Some(position) = shape.first_null {
        QueueError::NullElement {
            argument: "payloads",
            position,
        }
        .raise();
    }
    rules::check_batch_len("payloads", shape.len).or_raise();
    let now = crate::time::now_us();
    let (due, state) = due(now, &delay, None);
    let ids = db::with_tables(|client| {
        let queue = queue_for_insert(client, name);
        if shape.len == 0 {
            return Vec::new();
        }
        let rows = db::run(
            client,
            &queries::ENQUEUE_BATCH,
            args![
                queue_id = queue.id,
                payloads = payloads,
                priority = priority,
                run_at = db::timestamp(due),
                state = state,
                now = db::timestamp(now),
            ],
        );
        // (NULL: the queue was gone, and `inserted` says so)
        let ids: Vec<i64> = rows.first().and_then(|r| r.get("ids")).unwrap_or_default();
        wake::on_commit(queue.sender.is_some());
        inserted(ids, name)
    });
    SetOfIterator::new(ids)
}
