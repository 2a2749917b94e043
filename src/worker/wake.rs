//! Wake on commit: a transaction that made a job of a sender queue due sets
//! the latch of its database's worker once it has committed (or asks the
//! launcher for a worker when there is none). Never before the commit, at
//! most once per transaction, and not at all on rollback. A job of a pull
//! queue leaves a running worker alone (it has nothing to deliver); when
//! none runs, the database's upkeep falls due within queue.upkeep_interval.
//!
//! (Consumers waiting in queue_wait are woken by waiters.rs.)
//!
//! The commit holds the shared lock in share mode only, and finds its
//! database with one probe of the table: many committing backends never
//! wait for each other here.

use std::cell::Cell;

use pgrx::pg_guard;
use pgrx::pg_sys;

use std::sync::atomic::Ordering;

use super::shared::{self, Installed, SHARED};
use crate::gucs;

thread_local! {
    /// What this transaction asks of the worker at commit.
    static PENDING: Cell<Ask> = const { Cell::new(Ask::Nothing) };
    /// The transaction callback is registered in this backend.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// This backend is a queue worker, which looks for due jobs itself.
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
    /// This transaction changed the database's schedules.
    static SCHEDULES: Cell<bool> = const { Cell::new(false) };
    /// A queue worker's own transactions made jobs due since it last asked.
    static OWN_WORK: Cell<bool> = const { Cell::new(false) };
}

pub fn in_worker() {
    IN_WORKER.set(true);
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ask {
    Nothing,
    /// The database's upkeep is due (a pull queue changed); a running
    /// worker is not woken.
    Upkeep,
    /// A worker should start now (the extension was just created).
    Worker,
    /// The worker has jobs to deliver now.
    Delivery,
}

/// When the current transaction commits, wake this database's worker
/// (`push`: a job of a sender queue is due), or have its upkeep come.
pub fn on_commit(push: bool) {
    ask_at_commit(if push { Ask::Delivery } else { Ask::Upkeep });
}

/// When the current transaction commits, have this database's worker look
/// at its schedules again (one is started for their next tick if none runs).
pub fn schedules_changed_at_commit() {
    if shared::available() && !IN_WORKER.get() {
        SCHEDULES.set(true);
    }
    ask_at_commit(Ask::Delivery);
}

/// When the current transaction commits, do what `ask` says.
pub fn ask_at_commit(ask: Ask) {
    if !shared::available() {
        return;
    }
    if IN_WORKER.get() {
        // no latch to set: the worker looks again after its round (an
        // extra round, should the transaction roll back, finds nothing)
        if ask == Ask::Delivery {
            OWN_WORK.set(true);
        }
        return;
    }
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per backend (REGISTERED), as PostgreSQL
        // keeps a callback registered until the process ends;
        // at_transaction_end has the callback's signature and lives as long
        // as the process. It only takes the shared lock and sets latches,
        // and never raises (an ERROR after a commit would be a PANIC).
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    PENDING.set(PENDING.get().max(ask));
}

/// What the transaction asked for happens at its commit, and is forgotten
/// at its end otherwise.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the transaction callback registered in
/// `ask_at_commit`.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT => {
            // SAFETY: MyDatabaseId is set when the backend connects to its
            // database and never changes after.
            let database = unsafe { pg_sys::MyDatabaseId };
            let schedules = SCHEDULES.replace(false);
            match PENDING.replace(Ask::Nothing) {
                Ask::Nothing => {}
                ask => wake(database, ask, schedules),
            }
        }
        // COMMIT PREPARED runs no callback: the worker's poll finds those jobs.
        XACT_EVENT_ABORT | XACT_EVENT_PREPARE | XACT_EVENT_PARALLEL_ABORT => {
            PENDING.set(Ask::Nothing);
            SCHEDULES.set(false);
        }
        _ => {}
    }
}

/// Whether this worker's own transactions made jobs due since it last
/// asked (for a chain of jobs, each released by its parent's delivery).
pub fn take_own_work() -> bool {
    OWN_WORK.replace(false)
}

/// Wakes `database`'s worker for jobs a helper's transactions made due.
pub fn wake_worker(database: pg_sys::Oid) {
    wake(database, Ask::Delivery, false);
}

/// Whether `database`'s schedules changed since the worker last asked.
pub fn take_schedules_changed(database: pg_sys::Oid) -> bool {
    SHARED
        .share()
        .database(database)
        .is_some_and(|entry| entry.schedules_changed.swap(false, Ordering::Relaxed))
}

/// Sets the latch of `database`'s worker (for a delivery), or tells the
/// launcher what the database wants; `schedules`: first marks its schedules
/// as changed, for its worker (schedules_changed_at_commit asks for a
/// delivery too).
fn wake(database: pg_sys::Oid, ask: Ask, schedules: bool) {
    let now = crate::time::now_us();
    {
        let shared = SHARED.share();
        if schedules {
            if let Some(entry) = shared.database(database) {
                entry.schedules_changed.store(true, Ordering::Relaxed);
            }
        }
        if let Some(slot) = shared.worker_of(database) {
            if ask == Ask::Delivery {
                shared.wakes[slot].store(now, Ordering::Relaxed);
                shared::set_latch(shared.workers[slot].procno);
                shared.wakes_sent.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        if let Some(entry) = shared.database(database) {
            entry.set_installed(Installed::Yes);
            ask_launcher(&shared, entry, ask, now);
            return;
        }
    }
    // a database the launcher has not seen yet (rare: once per database)
    let mut shared = SHARED.exclusive();
    if shared.database_entry(database).is_none() {
        return; // queue.max_databases are known already
    }
    let shared = &*shared;
    if let Some(entry) = shared.database(database) {
        entry.set_installed(Installed::Yes);
        ask_launcher(shared, entry, ask, now);
    }
}

fn ask_launcher(shared: &shared::Shared, entry: &shared::Database, ask: Ask, now: i64) {
    let unscanned = !entry.scanned;
    if unscanned {
        // whether it may be served is for a scan of pg_database to say
        shared.rescan_at.store(now, Ordering::Relaxed);
    }
    if ask == Ask::Upkeep {
        let at = now + crate::time::seconds(gucs::UPKEEP_INTERVAL_S.get());
        entry.owe_upkeep_by(at);
        entry.due_by(at);
    } else {
        entry.want(now);
    }
    if ask != Ask::Upkeep || unscanned {
        shared::set_latch(shared.launcher_procno);
    }
}
