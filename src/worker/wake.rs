//! Wake on commit: a transaction that made a job due sets the latch of its
//! database's worker once it has committed (or asks the launcher for a
//! worker when there is none). Never before the commit, at most once per
//! transaction, and not at all on rollback.

use std::cell::Cell;

use pgrx::pg_guard;
use pgrx::pg_sys;

use super::shared::{self, Installed, SHARED};

thread_local! {
    /// This transaction made a job due.
    static PENDING: Cell<bool> = const { Cell::new(false) };
    /// The transaction callback is registered in this backend.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// This backend is a queue worker, which looks for due jobs itself.
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

pub fn in_worker() {
    IN_WORKER.set(true);
}

/// Wake this database's worker when the current transaction commits.
pub fn on_commit() {
    if !shared::available() || IN_WORKER.get() {
        return;
    }
    if !REGISTERED.replace(true) {
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    PENDING.set(true);
}

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT if PENDING.replace(false) => wake(unsafe { pg_sys::MyDatabaseId }),
        // COMMIT PREPARED runs no callback: the worker's poll finds those jobs.
        XACT_EVENT_ABORT | XACT_EVENT_PREPARE | XACT_EVENT_PARALLEL_ABORT => PENDING.set(false),
        _ => {}
    }
}

/// Sets the latch of `database`'s worker, or tells the launcher that the
/// database wants one.
pub fn wake(database: pg_sys::Oid) {
    let now = shared::now();
    let mut shared = SHARED.exclusive();
    if let Some(slot) = shared.worker_of(database) {
        let worker = &mut shared.workers[slot];
        worker.wake_sent_at = now;
        shared::set_latch(worker.procno);
        return;
    }
    let launcher = shared.launcher_procno;
    let mut unscanned = false;
    if let Some(entry) = shared.database_entry(database) {
        entry.installed = Installed::Yes;
        if entry.wanted_since == 0 {
            entry.wanted_since = now;
        }
        unscanned = !entry.scanned;
    }
    if unscanned {
        // a database the launcher has not seen yet
        shared.rescan_at = now;
    }
    shared::set_latch(launcher);
}
