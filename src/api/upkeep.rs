//! The upkeep of the background worker that is written in Rust, callable
//! from SQL for whoever runs the upkeep without the worker (queue_maintain()
//! calls it): the worker and queue_maintain() run the same code.

use pgrx::prelude::*;

use crate::db;
use crate::jobs;

/// In-flight jobs whose lease expired with no attempt left become `failed`,
/// in every queue (pull queues too), at most jobs::BURIED_PER_CALL per call.
/// Returns how many; call it again until it returns 0.
#[pg_extern(volatile, parallel_unsafe)]
fn queue_bury_expired() -> i64 {
    db::with_tables(|client| {
        jobs::bury_expired(client, crate::time::now_us(), jobs::BURIED_PER_CALL)
    }) as i64
}
