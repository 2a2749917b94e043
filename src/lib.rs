//! `queue`: a durable job queue inside PostgreSQL.
//!
//! This file is only a table of contents. The SQL contract is in
//! docs/reference.md and `sql/`; the Rust side checks arguments and runs
//! the statements.

use pgrx::prelude::*;

mod announce;
mod api;
mod catalog;
mod complete_one;
mod contract;
mod db;
mod dependencies;
mod ends;
mod errors;
mod gucs;
mod jobs;
mod jsonb;
mod leases;
mod limits;
mod metrics;
mod policy;
mod queries;
mod regprocedure;
mod reservations;
mod rules;
mod schedules;
mod senders;
mod spans;
mod threads;
mod time;
mod trace_context;
mod versions;
mod webhooks;
mod worker;

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
