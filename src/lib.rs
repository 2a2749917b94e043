//! `queue`: a durable job queue inside PostgreSQL.
//!
//! This file is the table of contents. The SQL contract is in
//! docs/reference.md and `sql/`; the Rust side checks arguments and runs
//! the statements. Each module below, in one line:

use pgrx::prelude::*;

/// The SQL functions, one file per group (queues, producing, consuming...).
mod api;

// The moves of jobs and what they tell others
/// Who a commit wakes: the worker, waiting consumers, awaiting sessions.
mod announce;
/// Jobs that wait for other jobs: edges, counts, release, cancellation.
mod dependencies;
/// A completion of a queue that keeps nothing, without the executor.
mod direct_completion;
/// The jobs a statement ended: into the histograms, announced at commit.
mod ended_rows;
/// How jobs end (Ended, Failed, Outcome), as the moves report it.
mod ends;
/// Claiming, completing, failing, burying: the moves the API and the worker share.
mod jobs;
/// Leases that carry their claim's time.
mod leases;
/// Claims within a queue's order and limits.
mod limits;
/// Claims under way side by side, in shared memory (for limits).
mod reservations;

// Queues, statements and their rules
/// Queues as the API sees them, cached per backend.
mod catalog;
/// The words and limits of the contract that several modules name.
mod contract;
/// Prepared statements run as the extension's owner; rows read by name.
mod db;
/// One place for errors and their SQLSTATEs.
mod errors;
/// One place for settings.
mod gucs;
/// Retry and lease arithmetic, pure.
mod policy;
/// Every statement of sql/queries/, with its parameters and columns.
mod queries;
/// The input rules of the API, pure.
mod rules;

// Delivery
/// Recurring jobs: cron expressions, time zones, ticks.
mod schedules;
/// What makes a function a sender, checked at registration and before calls.
mod sender_check;
/// Webhooks: the allow list, signing, sending, outcomes.
mod webhooks;
/// The launcher and the workers: serving databases, delivering, upkeep.
mod worker;

// Observability
/// Latency histograms per queue, in shared memory.
mod metrics;
/// Spans of delivery attempts, exported over OTLP.
mod spans;
/// W3C Trace Context of jobs.
mod trace_context;

// Small utilities
/// `jsonb` values passed through untouched.
mod jsonb;
/// The `regprocedure` type for arguments that name a function.
mod regprocedure;
/// Threads of our own that never call PostgreSQL.
mod threads;
/// The wall clock, in PostgreSQL's microseconds.
mod time;
/// Differences between PostgreSQL 15 and 18, in one place.
mod versions;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: a plain read of a global that PostgreSQL sets while it parses
    // its options, before any library is loaded; _PG_init runs on the
    // process's only thread, so nothing writes it meanwhile.
    if unsafe { pgrx::pg_sys::IsBinaryUpgrade } {
        return;
    }
    gucs::init();
    worker::init();
}

extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!(
    "../sql/views.sql",
    name = "views",
    requires = [
        api::workers::queue_worker_status,
        api::metrics::queue_latency_histograms
    ]
);
extension_sql!(
    "SELECT queue_register_database();",
    name = "register_database",
    requires = [api::workers::queue_register_database, "views"]
);
extension_sql_file!(
    "../sql/maintenance.sql",
    name = "maintenance",
    requires = [api::upkeep::queue_bury_expired]
);
extension_sql_file!(
    "../sql/triggers.sql",
    name = "triggers",
    requires = [catalog::queue_queues_changed]
);
extension_sql_file!("../sql/grants.sql", name = "grants", finalize);

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
