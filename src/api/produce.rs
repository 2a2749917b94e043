//! Putting jobs on a queue.

use std::collections::HashMap;

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use super::duration;
use crate::announce;
use crate::catalog::{self, Queue};
use crate::db::{self, args};
use crate::dependencies::{self, Children};
use crate::errors::{no_null_elements, required, OrRaise, QueueError};
use crate::jsonb::{Jsonb, JsonbArray};
use crate::policy::{add_delay, TIMESTAMP_END_US};
use crate::queries;
use crate::rules::{self, at_least_zero};

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

/// Whether the jobs enqueued now may be turn_safe (schema.sql): the queue
/// is ordered, so an enqueue with a group key has taken the group's lock,
/// and each statement sees every job committed before it (READ
/// COMMITTED).
fn may_be_turn_safe(queue: &Queue) -> bool {
    queue.limits.ordered && db::read_committed()
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
    group_key: default!(Option<&str>, "NULL"),
    depends_on: default!(Option<Vec<Option<i64>>>, "NULL"),
    on_parent_failure: default!(Option<&str>, "'cancel'"),
) -> i64 {
    let name = required(queue, "queue");
    let payload = required(payload, "payload");
    let delay = required(delay, "delay");
    let priority = required(priority, "priority");
    rules::check_name(name).or_raise();
    if let Some(key) = group_key {
        rules::check_group_key("group_key", key).or_raise();
    }
    super::check_headers(headers);
    let headers = super::traced_headers(headers);
    let parents = Parents::of(depends_on, on_parent_failure);
    let now = crate::time::now_us();
    let (due, state) = due(now, &delay, run_at);
    db::with_tables(|client| {
        let queue = queue_for_insert(client, name);
        if let (Some(key), true) = (group_key, queue.limits.ordered) {
            catalog::lock_group(queue.id, key);
        }
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
        let rows = match group_key {
            None => db::run(
                client,
                &queries::ENQUEUE_PLAIN,
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
            ),
            Some(_) => db::run(
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
                    group_key = group_key,
                    turn_safe = may_be_turn_safe(&queue),
                ],
            ),
        };
        let ids = rows.map(|r| r.value::<i64>("id")).collect();
        let id = inserted(ids, name)[0];
        if parents.wait_for(client, vec![id]) == Children::Due {
            announce::work_due(queue.id, queue.sender.is_some(), 1, due);
        }
        id
    })
}

/// The parents a job enqueued now depends on (depends_on, in order,
/// repeats once) and what their failure does to it (on_parent_failure).
struct Parents {
    ids: Vec<i64>,
    cancels: bool,
}

impl Parents {
    /// Checks the arguments: 22004 for a NULL element or on_parent_failure,
    /// 54000 for more than MAX_BATCH parents, 22023 for another word.
    fn of(depends_on: Option<Vec<Option<i64>>>, on_parent_failure: Option<&str>) -> Parents {
        let cancels = rules::check_parent_failure(required(on_parent_failure, "on_parent_failure"))
            .or_raise();
        let mut ids = Vec::new();
        for id in no_null_elements(depends_on.unwrap_or_default(), "depends_on") {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        rules::check_batch_len("depends_on", ids.len()).or_raise();
        Parents { ids, cancels }
    }

    /// Jobs `children`, just inserted, wait for the parents; a job without
    /// parents touches nothing (Due).
    fn wait_for(&self, client: &mut SpiClient<'_>, children: Vec<i64>) -> Children {
        if self.ids.is_empty() || children.is_empty() {
            return Children::Due;
        }
        dependencies::wait_for(client, children, self.ids.clone(), self.cancels)
    }
}

#[allow(clippy::too_many_arguments)] // the SQL signature of API.md
#[pg_extern(volatile, parallel_unsafe)]
fn queue_enqueue_batch(
    queue: Option<&str>,
    payloads: Option<JsonbArray>,
    delay: default!(Option<Interval>, "'0'"),
    priority: default!(Option<i32>, 0),
    group_keys: default!(Option<Vec<Option<String>>>, "NULL"),
    dedup_keys: default!(Option<Vec<Option<String>>>, "NULL"),
    depends_on: default!(Option<Vec<Option<i64>>>, "NULL"),
    on_parent_failure: default!(Option<&str>, "'cancel'"),
) -> SetOfIterator<'static, i64> {
    let name = required(queue, "queue");
    let parents = Parents::of(depends_on, on_parent_failure);
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
    for (argument, keys) in [("group_keys", &group_keys), ("dedup_keys", &dedup_keys)] {
        if let Some(keys) = keys {
            if keys.len() != shape.len {
                QueueError::ArrayLengthMismatch {
                    left: argument,
                    left_len: keys.len(),
                    right: "payloads",
                    right_len: shape.len,
                }
                .raise();
            }
        }
    }
    for key in group_keys.iter().flatten().flatten() {
        rules::check_group_key("group_keys", key).or_raise();
    }
    // A batch has no headers of its own, only the transaction's trace context.
    let headers = super::traced_headers(None);
    let now = crate::time::now_us();
    let (due, state) = due(now, &delay, None);
    let ids = db::with_tables(|client| {
        let queue = queue_for_insert(client, name);
        if shape.len == 0 {
            return Vec::new();
        }
        if let (Some(keys), true) = (&group_keys, queue.limits.ordered) {
            let mut keys: Vec<&str> = keys.iter().flatten().map(String::as_str).collect();
            // Locked in one order: two batches never wait for each other.
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                catalog::lock_group(queue.id, key);
            }
        }
        let taken = dedup_keys
            .as_deref()
            .map(|keys| taken_keys(client, queue.id, keys))
            .unwrap_or_default();
        let skip: Vec<i64> = taken.iter().map(|(at, _)| *at as i64 + 1).collect();
        let rows = if group_keys.is_none() && dedup_keys.is_none() {
            db::run(
                client,
                &queries::ENQUEUE_BATCH,
                args![
                    queue_id = queue.id,
                    payloads = payloads,
                    priority = priority,
                    run_at = db::timestamp(due),
                    state = state,
                    now = db::timestamp(now),
                    headers = headers,
                    uids = batch_uids(shape.len),
                ],
            )
        } else {
            db::run(
                client,
                &queries::ENQUEUE_BATCH_KEYS,
                args![
                    queue_id = queue.id,
                    payloads = payloads,
                    priority = priority,
                    run_at = db::timestamp(due),
                    state = state,
                    now = db::timestamp(now),
                    group_keys = group_keys.clone(),
                    dedup_keys = dedup_keys.clone(),
                    skip = (!skip.is_empty()).then_some(skip),
                    turn_safe = may_be_turn_safe(&queue),
                    headers = headers,
                ],
            )
        };
        // NULL means the queue was gone, and `inserted` says so.
        let new: Vec<i64> = rows.first().and_then(|r| r.get("ids")).unwrap_or_default();
        if new.len() + taken.len() != shape.len {
            inserted(Vec::new(), name);
        }
        if parents.wait_for(client, new.clone()) == Children::Due {
            announce::work_due(queue.id, queue.sender.is_some(), new.len(), due);
        }
        in_input_order(new, taken, shape.len)
    });
    SetOfIterator::new(ids)
}

/// Where a job is in a batch's answer: its own new id, or that of the job
/// that holds its dedup key (an unfinished one, or an earlier element's).
enum Holder {
    Job(i64),
    Element(usize),
}

/// The elements of a batch whose dedup key is held (0-based), each with
/// who holds it. Takes the queue's dedup lock, so that no other enqueue
/// with a key runs meanwhile.
fn taken_keys(
    client: &mut SpiClient<'_>,
    queue_id: i32,
    keys: &[Option<String>],
) -> Vec<(usize, Holder)> {
    let wanted: Vec<&str> = keys.iter().flatten().map(String::as_str).collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    catalog::lock_dedup_keys(queue_id);
    let mut held: HashMap<String, Holder> = db::run(
        client,
        &queries::DEDUP_FIND_MANY,
        args![queue_id = queue_id, dedup_keys = wanted],
    )
    .map(|r| (r.value::<String>("dedup_key"), Holder::Job(r.value("id"))))
    .collect();
    let mut taken = Vec::new();
    for (at, key) in keys.iter().enumerate() {
        let Some(key) = key else { continue };
        match held.get(key) {
            Some(Holder::Job(id)) => taken.push((at, Holder::Job(*id))),
            Some(Holder::Element(first)) => taken.push((at, Holder::Element(*first))),
            None => {
                held.insert(key.clone(), Holder::Element(at));
            }
        }
    }
    taken
}

/// A batch's answer, one id per element in input order: the new ids (in
/// input order already) where an element was inserted, the holder's id
/// where its dedup key was taken.
fn in_input_order(new: Vec<i64>, taken: Vec<(usize, Holder)>, len: usize) -> Vec<i64> {
    let mut ids: Vec<Option<i64>> = vec![None; len];
    let mut taken = taken.into_iter().peekable();
    let mut new = new.into_iter();
    let mut holders = Vec::new();
    for (at, id) in ids.iter_mut().enumerate() {
        if taken.peek().is_some_and(|(t, _)| *t == at) {
            let (_, holder) = taken.next().expect("peeked");
            holders.push((at, holder));
        } else {
            *id = new.next();
        }
    }
    for (at, holder) in holders {
        ids[at] = match holder {
            Holder::Job(id) => Some(id),
            Holder::Element(first) => ids[first],
        };
    }
    ids.into_iter()
        .map(|id| id.expect("every element has an id"))
        .collect()
}

/// The uids of a batch of `n` jobs (schema.sql, queue_live.uid: a job's
/// identity for ever, its webhook-id): 96 random bits, the same for the
/// whole batch, then each job's place in it (1-based; a batch is far
/// smaller than 2^32), so that they are unique as random uuids are (two
/// batches collide with a probability of about n^2 / 2^97 over n batches)
/// for one draw of randomness a batch.
fn batch_uids(n: usize) -> Vec<pgrx::datum::Uuid> {
    let mut prefix = [0u8; 12];
    // SAFETY: writes exactly prefix.len() bytes into the buffer it is
    // given, which outlives the call.
    if !unsafe { pgrx::pg_sys::pg_strong_random(prefix.as_mut_ptr().cast(), prefix.len()) } {
        error!("could not generate random values for a batch's uids");
    }
    (1..=n as u32)
        .map(|place| {
            let mut bytes = [0u8; 16];
            bytes[..12].copy_from_slice(&prefix);
            bytes[12..].copy_from_slice(&place.to_be_bytes());
            pgrx::datum::Uuid::from_bytes(bytes)
        })
        .collect()
}
