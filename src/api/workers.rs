//! What the background workers show of themselves, and how a database
//! tells the launcher that it has the extension.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use crate::announce;
use crate::errors;
use crate::gucs;
use crate::worker::shared::{self, SHARED};
use std::sync::atomic::Ordering;

type WorkerRow = (
    Option<i32>,
    Option<String>,
    String,
    Option<TimestampWithTimeZone>,
    Option<TimestampWithTimeZone>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

/// The rows of queue_workers: every worker of the cluster, then every
/// database that wants a worker and has none. Empty without the preload.
// The column names live in the signature, where pgrx reads them.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn queue_worker_status() -> TableIterator<
    'static,
    (
        name!(pid, Option<i32>),
        name!(database, Option<String>),
        name!(state, String),
        name!(started_at, Option<TimestampWithTimeZone>),
        name!(last_active_at, Option<TimestampWithTimeZone>),
        name!(jobs_delivered, Option<i64>),
        name!(jobs_failed, Option<i64>),
        name!(last_error, Option<String>),
    ),
> {
    if !shared::available() {
        return TableIterator::new(Vec::<WorkerRow>::new());
    }
    let now = crate::time::now_us();
    let (workers, waiting): (Vec<_>, Vec<Oid>) = {
        let shared = SHARED.share();
        let workers = shared
            .workers
            .iter()
            .filter(|w| w.state.running())
            .copied()
            .collect();
        // With queue.enabled off no worker starts: nothing waits for a slot.
        let waiting = if gucs::ENABLED.get() {
            shared.waiting_for_worker(now).map(|d| d.oid).collect()
        } else {
            Vec::new()
        };
        (workers, waiting)
    };
    let time = |us: i64| TimestampWithTimeZone::try_from(us).ok();
    let mut rows: Vec<WorkerRow> = workers
        .iter()
        .map(|w| {
            (
                (w.pid > 0).then_some(w.pid),
                database_name(w.database),
                w.state.word().to_string(),
                time(w.started_at),
                time(w.last_active_at),
                Some(w.delivered),
                Some(w.failed),
                w.last_error(),
            )
        })
        .collect();
    rows.extend(waiting.into_iter().map(|oid| {
        (
            None,
            database_name(oid),
            "waiting for slot".to_string(),
            None,
            None,
            None,
            None,
            None,
        )
    }));
    TableIterator::new(rows)
}

/// The latest wake-up latencies, in microseconds from a commit to its
/// worker taking it in, oldest first (at most 1024).
#[pg_extern(volatile, parallel_safe)]
fn queue_wake_latencies() -> SetOfIterator<'static, i64> {
    if !shared::available() {
        return SetOfIterator::new(Vec::new());
    }
    let shared = SHARED.share();
    let n = shared.latency_count;
    let kept = (n as usize).min(shared::LATENCY_SAMPLES);
    let first = n - kept as u64;
    let samples: Vec<i64> = (first..n)
        .map(|i| shared.latencies[(i % shared::LATENCY_SAMPLES as u64) as usize])
        .collect();
    SetOfIterator::new(samples)
}

/// How many wake-ups committing transactions have sent to running workers
/// since the server started: one per commit that asked for a delivery in a
/// database with a worker (none for a rollback, or a pull queue's jobs). A
/// commit sends it before it returns.
#[pg_extern(volatile, parallel_safe)]
fn queue_wakes_sent() -> i64 {
    if !shared::available() {
        return 0;
    }
    SHARED.share().wakes_sent.load(Ordering::Relaxed) as i64
}

fn database_name(oid: Oid) -> Option<String> {
    // SAFETY: a catalog lookup inside the SQL function's transaction; it
    // returns a palloc'd copy of the name, or NULL for a database gone.
    let name = unsafe { pg_sys::get_database_name(oid) };
    if name.is_null() {
        return None;
    }
    Some(
        // SAFETY: name is not NULL (checked above) and is the NUL-terminated
        // copy get_database_name made, live until the call's memory goes.
        unsafe { std::ffi::CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Run by CREATE EXTENSION: once it commits, the launcher serves this
/// database. Without the preload it says that nothing will be delivered.
#[pg_extern(volatile, parallel_unsafe)]
fn queue_register_database() {
    if shared::available() {
        announce::extension_created();
    } else {
        errors::warn_without_preload();
    }
}
