//! The launcher: one per cluster, started by the postmaster. It keeps the
//! list of databases (pg_database, scanned now and then), starts a worker
//! for each database that wants one while slots are free, oldest request
//! first, asks the longest-running worker to give its slot up when others
//! wait, and frees the slots of workers that exited, with a growing pause
//! before serving again a database whose worker failed.

use std::time::Duration;

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, DynamicBackgroundWorker,
    SignalWakeFlags,
};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use super::shared::{self, Installed, State, Worker, SHARED};
use crate::gucs::{self, WORKER_SLOTS};

/// A worker serves at least this long before it is asked to give its slot
/// to a waiting database.
const TURN_US: i64 = 5_000_000;
/// The longest pause before serving again a database whose worker failed.
const MAX_BACKOFF_US: i64 = 60_000_000;

pub fn register() {
    BackgroundWorkerBuilder::new("queue launcher")
        .set_type("queue launcher")
        .set_library("queue")
        .set_function("queue_launcher_main")
        .enable_spi_access()
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn queue_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // Shared catalogs only: pg_database is all the launcher reads.
    BackgroundWorker::connect_worker_to_spi(None, None);
    super::name_this_process("queue launcher");
    SHARED.exclusive().launcher_procno = shared::my_procno();

    let mut handles: Vec<Option<DynamicBackgroundWorker>> =
        (0..WORKER_SLOTS).map(|_| None).collect();
    let mut next_scan = 0;
    while BackgroundWorker::wait_latch(Some(Duration::from_millis(500))) {
        if BackgroundWorker::sighup_received() {
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let now = shared::now();
        let asked = SHARED.share().rescan_at;
        if now >= next_scan || (asked > 0 && now >= asked) {
            scan_databases(now);
            next_scan = now + gucs::DATABASE_SCAN_S.get() as i64 * 1_000_000;
        }
        reap(&mut handles, now);
        SHARED.exclusive().wake_due(now);
        if gucs::ENABLED.get() {
            start_workers(&mut handles, now);
            take_turns(now);
        } else {
            stop_all();
        }
    }
    SHARED.exclusive().launcher_procno = -1;
}

/// Reads pg_database: new databases are probed once (does it have the
/// extension?), dropped ones forgotten, templates and databases that take
/// no connections never served.
fn scan_databases(now: i64) {
    let mut found: Vec<(Oid, bool)> = Vec::new();
    unsafe {
        pg_sys::StartTransactionCommand();
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as _);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let data = (*tuple).t_data;
            let form = &*((data as *const u8).add((*data).t_hoff as usize)
                as *const pg_sys::FormData_pg_database);
            // datconnlimit -2 marks a database a failed DROP left invalid
            let servable = form.datallowconn && !form.datistemplate && form.datconnlimit != -2;
            found.push((form.oid, servable));
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        pg_sys::CommitTransactionCommand();
    }
    let mut shared = SHARED.exclusive();
    shared.rescan_at = 0;
    for i in 0..shared.databases.len() {
        let oid = shared.databases[i].oid;
        if oid != Oid::INVALID
            && !found.iter().any(|(o, _)| *o == oid)
            && shared.worker_of(oid).is_none()
        {
            shared.databases[i].oid = Oid::INVALID;
        }
    }
    for (oid, servable) in found {
        if let Some(entry) = shared.database_entry(oid) {
            entry.scanned = true;
            entry.servable = servable;
            if entry.installed == Installed::Unknown && servable && entry.wanted_since == 0 {
                entry.wanted_since = now;
            }
        }
    }
}

/// Frees the slots of workers that are gone. A worker that did not exit on
/// purpose makes its database wait before the next one: 1 s, 2 s, 4 s, ...
/// up to a minute, so that a failing database never restarts in a loop.
fn reap(handles: &mut [Option<DynamicBackgroundWorker>], now: i64) {
    // whose process is gone without a word (it never got to its exit hook)
    let gone: Vec<bool> = handles
        .iter()
        .map(|handle| {
            matches!(
                handle.as_ref().map(|h| h.pid()),
                Some(Err(
                    BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied
                ))
            )
        })
        .collect();
    let mut shared = SHARED.exclusive();
    for (slot, handle) in handles.iter_mut().enumerate() {
        let worker = shared.workers[slot];
        if worker.state == State::Free || !(worker.state == State::Exited || gone[slot]) {
            continue;
        }
        let clean = worker.state == State::Exited && worker.clean_exit;
        shared.workers[slot].state = State::Free;
        *handle = None;
        if let Some(entry) = shared.database(worker.database) {
            if clean {
                entry.failures = 0;
            } else {
                entry.failures = entry.failures.saturating_add(1);
                let pause = (1_000_000i64 << entry.failures.min(6)).min(MAX_BACKOFF_US);
                entry.not_before = now + pause;
            }
        }
    }
}

/// Starts workers for waiting databases, oldest request first, while slots
/// are free.
fn start_workers(handles: &mut [Option<DynamicBackgroundWorker>], now: i64) {
    let max = gucs::MAX_WORKERS.get() as usize;
    loop {
        let (slot, database) = {
            let mut shared = SHARED.exclusive();
            let running = shared
                .workers
                .iter()
                .filter(|w| w.state != State::Free)
                .count();
            if running >= max {
                return;
            }
            let Some(database) = shared.next_to_serve(now) else {
                return;
            };
            let Some(slot) = shared.workers.iter().position(|w| w.state == State::Free) else {
                return;
            };
            shared.workers[slot] = Worker::starting(database, now);
            (slot, database)
        };
        let started = BackgroundWorkerBuilder::new("queue worker")
            .set_type("queue worker")
            .set_library("queue")
            .set_function("queue_worker_main")
            .set_argument(Some(pg_sys::Datum::from(slot)))
            .enable_spi_access()
            .set_notify_pid(unsafe { pg_sys::MyProcPid })
            .load_dynamic();
        match started {
            Ok(handle) => handles[slot] = Some(handle),
            Err(_) => {
                // no background worker slot left (max_worker_processes)
                let mut shared = SHARED.exclusive();
                shared.workers[slot].state = State::Free;
                if let Some(entry) = shared.database(database) {
                    entry.not_before = now + 1_000_000;
                }
                return;
            }
        }
    }
}

/// When databases wait and every slot is taken, the worker that has served
/// longest (at least a turn) is asked to give its slot up.
fn take_turns(now: i64) {
    let mut shared = SHARED.exclusive();
    let someone_waits = shared.next_to_serve(now).is_some();
    let running = shared
        .workers
        .iter()
        .filter(|w| w.state != State::Free)
        .count();
    if !someone_waits || running < gucs::MAX_WORKERS.get() as usize {
        return;
    }
    let longest = shared
        .workers
        .iter()
        .enumerate()
        .filter(|(_, w)| w.state.running() && !w.stop && now - w.started_at >= TURN_US)
        .min_by_key(|(_, w)| w.started_at)
        .map(|(i, _)| i);
    if let Some(slot) = longest {
        shared.workers[slot].stop = true;
        shared::set_latch(shared.workers[slot].procno);
    }
}

/// queue.enabled is off: every worker is asked to exit.
fn stop_all() {
    let mut shared = SHARED.exclusive();
    for worker in shared.workers.iter_mut().filter(|w| w.state.running()) {
        worker.stop = true;
        shared::set_latch(worker.procno);
    }
}
