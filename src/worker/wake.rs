//! Wake on commit: a transaction that made a job of a sender queue due sets
//! the latch of its database's worker once it has committed (or asks the
//! launcher for a worker when there is none). Never before the commit, at
//! most once per transaction, and not at all on rollback. A job of a pull
//! queue leaves a running worker alone (it has nothing to deliver) but asks
//! for one when none runs, so that an active database gets its upkeep.

use std::cell::Cell;

use pgrx::pg_guard;
use pgrx::pg_sys;

use super::shared::{self, Installed, SHARED};

thread_local! {
    /// What this transaction asks of the worker at commit.
    static PENDING: Cell<Ask> = const { Cell::new(Ask::Nothing) };
    /// The transaction callback is registered in this backend.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// This backend is a queue worker, which looks for due jobs itself.
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

pub fn in_worker() {
    IN_WORKER.set(true);
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ask {
    Nothing,
    /// A worker should run (for its upkeep); a running one is not woken.
    Worker,
    /// The worker has jobs to deliver now.
    Delivery,
}

/// When the current transaction commits, wake this database's worker
/// (`push`: a job of a sender queue is due) or at least make sure that one
/// runs.
pub fn on_commit(push: bool) {
    if !shared::available() || IN_WORKER.get() {
        return;
    }
    if !REGISTERED.replace(true) {
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    let ask = if push { Ask::Delivery } else { Ask::Worker };
    PENDING.set(PENDING.get().max(ask));
}

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT => match PENDING.replace(Ask::Nothing) {
            Ask::Nothing => {}
            ask => wake(unsafe { pg_sys::MyDatabaseId }, ask == Ask::Delivery),
        },
        // COMMIT PREPARED runs no callback: the worker's poll finds those jobs.
        XACT_EVENT_ABORT | XACT_EVENT_PREPARE | XACT_EVENT_PARALLEL_ABORT => {
            PENDING.set(Ask::Nothing)
        }
        _ => {}
    }
}

/// Sets the latch of `database`'s worker (when `deliver`), or tells the
/// launcher that the database wants one.
fn wake(database: pg_sys::Oid, deliver: bool) {
    let now = shared::now();
    let mut shared = SHARED.exclusive();
    if let Some(slot) = shared.worker_of(database) {
        if deliver {
            let worker = &mut shared.workers[slot];
            worker.wake_sent_at = now;
            shared::set_latch(worker.procno);
        }
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
