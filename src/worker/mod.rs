//! Push delivery's machinery: a launcher per cluster and a worker per
//! database with due work, sharing state in shared memory.
//!
//! - `shared`: the worker slots and the wake-up latencies
//! - `databases`: the table of databases, keyed by oid
//! - `launcher`: finds databases, starts and reaps workers
//! - `serve`: the loop of one database's worker
//! - `delivery`: the round: a batch of each sender queue, to its path
//! - `sql_delivery`: a batch's calls of a SQL sender and their outcomes
//! - `http`: a batch's webhook requests and their outcomes
//! - `batches`: what both paths share: the claim and the tally
//! - `sender`: one sender call, as its role, in a subtransaction
//! - `subxact`: running work in a subtransaction, catching its error
//! - `suspects`: the ids of a one-transaction delivery under way, on disk
//! - `session`: the search_path and settings of the worker's statements
//! - `recurring`: firing the ticks of the database's schedules
//! - `turns`: who is served and when, as pure (unit-tested) decisions
//! - `upkeep`: expired leases, cleanup and counters
//! - `wake`: wake on commit
//! - `waiters`: consumers waiting in queue_wait, woken by commits
//! - `segments`: shared memory sized at server start
//! - `hooks`: gets workers out of the way of DROP DATABASE and friends

mod batches;
mod databases;
mod decisions;
mod delivery;
mod delivery_log;
mod hooks;
mod http;
pub mod launcher;
mod recurring;
pub mod segments;
mod sender_call;
pub mod serve;
mod session;
pub mod shared;
mod sql_delivery;
pub(crate) mod subxact;
mod upkeep;
pub mod waiters;
pub mod wake;

use pgrx::pg_sys;

/// Sets up shared memory, the utility hook and the launcher; only while
/// the library is being preloaded.
pub fn init() {
    // SAFETY: a plain read of a flag that PostgreSQL sets around loading
    // the preloaded libraries; called from _PG_init, on the process's only
    // thread.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    shared::init();
    crate::reservations::init();
    static SEGMENTS: [&segments::Segment; 3] = [
        &databases::SEGMENT,
        &waiters::SEGMENT,
        &crate::metrics::memory::SEGMENT,
    ];
    segments::init(&SEGMENTS);
    hooks::install();
    launcher::register();
}

/// The name pg_stat_activity shows as application_name (backend_type is
/// the background worker's type).
fn name_this_process(name: &str) {
    let name = std::ffi::CString::new(name).expect("a name without NUL");
    // SAFETY: both calls take NUL-terminated strings that outlive them and
    // copy them. Called from the main of the launcher or a worker, once it
    // is connected (its GUCs and its pg_stat_activity entry exist);
    // application_name is a PGC_USERSET setting, so any value is allowed.
    unsafe {
        pg_sys::SetConfigOption(
            c"application_name".as_ptr(),
            name.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
        );
        pg_sys::pgstat_report_appname(name.as_ptr());
    }
}
