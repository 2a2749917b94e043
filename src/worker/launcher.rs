//! The launcher: one per cluster, started by the postmaster. It keeps the
//! table of databases (pg_database, scanned now and then), and whenever it
//! is woken (by a commit that wants a worker, a worker that exits, or its
//! timer) it frees the slots of workers that exited, with a growing pause
//! before serving again a database whose worker failed, starts a worker for
//! each database that wants one while slots are free, oldest request first,
//! and asks as many running workers to give their slots up as databases
//! still wait: idle ones first (they leave at once), then those that have
//! served longest (they leave once their turn is over).

use std::sync::atomic::Ordering;
use std::time::Duration;

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, DynamicBackgroundWorker,
    SignalWakeFlags,
};
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use super::decisions;
use super::shared::{self, Installed, State, Worker, SHARED};
use crate::gucs::{self, WORKER_SLOTS};

/// The launcher looks at the table at least this often (pauses that end),
/// and sooner when a database's due time comes; a look at a few thousand
/// entries costs microseconds.
const TICK: Duration = Duration::from_secs(1);
thread_local! {
    /// The table of databases was found full (logged once).
    static TABLE_FULL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// After the postmaster had no background worker slot left
/// (max_worker_processes), the launcher tries again this much later.
const NO_SLOT_RETRY_US: i64 = 100_000;

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
    {
        let shared = &mut *SHARED.exclusive();
        shared.launcher_procno = shared::my_procno();
        // The launcher starts once recovery has ended: for a standby, at its
        // promotion; a restart of the launcher alone keeps the first time.
        if shared.started_in_recovery {
            let _ = shared.serving_since.compare_exchange(
                0,
                crate::time::now_us(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    let mut handles: Vec<Option<DynamicBackgroundWorker>> =
        (0..WORKER_SLOTS).map(|_| None).collect();
    let mut next_scan = 0;
    let mut sleep = Duration::ZERO;
    while BackgroundWorker::wait_latch(Some(sleep)) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: from the launcher's main loop, outside any
            // transaction and any signal handler, as PostgreSQL's own
            // processes reload their configuration after a SIGHUP.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let now = crate::time::now_us();
        let asked = SHARED.share().rescan_at.load(Ordering::Relaxed);
        if now >= next_scan || (asked > 0 && now >= asked) {
            scan_databases(now);
            next_scan = now + crate::time::seconds(gucs::DATABASE_SCAN_S.get());
        }
        reap(&mut handles, now);
        // Woken when the next due time comes, so that a schedule's tick is on
        // time, not up to a TICK late.
        let next_due = SHARED.exclusive().wake_due(now);
        sleep = next_due.map_or(TICK, |at| {
            TICK.min(Duration::from_micros((at - now) as u64))
        });
        if gucs::ENABLED.get() {
            if !start_workers(&mut handles, now) {
                sleep = Duration::from_micros(NO_SLOT_RETRY_US as u64);
            }
            ask_to_yield(now);
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
    // SAFETY: the launcher's main loop calls this outside any transaction;
    // the transaction is committed below (an error ends the launcher).
    unsafe { pg_sys::StartTransactionCommand() };
    // SAFETY: inside that transaction; pg_database is a shared catalog, which
    // the launcher may read without a database, locked until table_close.
    let rel =
        unsafe { pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as _) };
    // SAFETY: rel is open; no scan keys (0, NULL); the scan takes a catalog
    // snapshot and is ended by table_endscan below.
    let scan = unsafe { pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut()) };
    loop {
        // SAFETY: scan is the open heap scan of pg_database.
        let tuple =
            unsafe { pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection) };
        if tuple.is_null() {
            break;
        }
        // SAFETY: tuple is a valid heap tuple of pg_database, its buffer
        // pinned by the scan until the next heap_getnext, and `form` is not
        // used past that. GETSTRUCT gives its data (MAXALIGNed after
        // t_hoff), whose leading part, every column NOT NULL and of fixed
        // length, is what FormData_pg_database describes.
        let form = unsafe { &*pg_sys::GETSTRUCT(tuple).cast::<pg_sys::FormData_pg_database>() };
        // datconnlimit -2 marks a database a failed DROP left invalid
        let servable = form.datallowconn && !form.datistemplate && form.datconnlimit != -2;
        found.push((form.oid, servable));
    }
    // SAFETY: ends the scan and closes the relation opened above, in the
    // transaction they were made in, then commits it.
    unsafe {
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        pg_sys::CommitTransactionCommand();
    }
    found.sort_unstable_by_key(|(oid, _)| oid.to_u32());
    let mut shared = SHARED.exclusive();
    shared.rescan_at.store(0, Ordering::Relaxed);
    let gone: Vec<Oid> = shared
        .databases()
        .map(|d| d.oid)
        .filter(|oid| {
            found
                .binary_search_by_key(&oid.to_u32(), |(o, _)| o.to_u32())
                .is_err()
        })
        .collect();
    for oid in gone {
        if shared.workers_of(oid).next().is_none() {
            shared.forget_database(oid);
        }
    }
    for (oid, servable) in found {
        let Some(entry) = shared.database_entry(oid) else {
            if !TABLE_FULL.replace(true) {
                pgrx::log!(
                    "queue launcher: queue.max_databases ({}) databases are known; others are not served until it is raised",
                    gucs::MAX_DATABASES.get()
                );
            }
            continue;
        };
        entry.scanned = true;
        entry.servable = servable;
        // a database not probed yet gets a worker once, to find out
        if entry.installed() == Installed::Unknown && servable {
            entry.want(now);
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
        if let Some(entry) = shared.database_mut(worker.database) {
            if clean {
                entry.failures = 0;
            } else {
                entry.failures = entry.failures.saturating_add(1);
                entry.not_before = now + decisions::failure_pause_us(entry.failures);
            }
        }
    }
}

/// Starts workers for waiting databases, oldest request first, while slots
/// are free. False when the postmaster had no background worker slot left.
fn start_workers(handles: &mut [Option<DynamicBackgroundWorker>], now: i64) -> bool {
    let max = gucs::MAX_WORKERS.get() as usize;
    loop {
        let slot = {
            let mut shared = SHARED.exclusive();
            let running = shared
                .workers
                .iter()
                .filter(|w| w.state != State::Free)
                .count();
            if running >= max {
                return true;
            }
            // a waiting database first; else a helper for a busy one
            let per_database = gucs::MAX_WORKERS_PER_DATABASE.get() as usize;
            let (database, helper) = match shared.next_to_serve(now) {
                Some(database) => (database, false),
                None => match shared.wants_helper(now, per_database) {
                    Some(database) => (database, true),
                    None => return true,
                },
            };
            let Some(slot) = shared.workers.iter().position(|w| w.state == State::Free) else {
                return true;
            };
            shared.workers[slot] = Worker::starting(database, helper, now);
            shared.wakes[slot].store(0, Ordering::Relaxed);
            slot
        };
        let started = BackgroundWorkerBuilder::new("queue worker")
            .set_type("queue worker")
            .set_library("queue")
            .set_function("queue_worker_main")
            .set_argument(Some(pg_sys::Datum::from(slot)))
            .enable_spi_access()
            // SAFETY: MyProcPid is set when the process starts and never
            // changes after.
            .set_notify_pid(unsafe { pg_sys::MyProcPid })
            .load_dynamic();
        match started {
            Ok(handle) => handles[slot] = Some(handle),
            Err(_) => {
                // no background worker slot left (max_worker_processes):
                // not the database's fault, so no pause for it
                SHARED.exclusive().workers[slot].state = State::Free;
                return false;
            }
        }
    }
}

/// As many running workers as there are databases waiting beyond the free
/// slots (less those already leaving) are asked to give their slots up:
/// idle ones first, least recently active first, then the ones that have
/// served longest, those still starting included (Worker::candidate). A
/// worker asked leaves at once when nothing is due in its database, else
/// once its turn is over (serve.rs).
fn ask_to_yield(now: i64) {
    let mut shared = SHARED.exclusive();
    let waiting = shared
        .waiting_for_worker(now)
        .filter(|d| d.not_before <= now)
        .count();
    let running = shared
        .workers
        .iter()
        .filter(|w| w.state != State::Free)
        .count();
    let free = (gucs::MAX_WORKERS.get() as usize).saturating_sub(running);
    // Helpers leave by themselves, after their batch, once a database waits:
    // see serve.rs.
    let leaving = shared
        .workers
        .iter()
        .filter(|w| w.state.running() && (w.stop || w.yield_asked || (w.helper && waiting > 0)))
        .count();
    let candidates = shared
        .workers
        .iter()
        .enumerate()
        .filter_map(|(slot, w)| w.candidate(slot))
        .collect();
    for slot in decisions::to_ask(waiting, free, leaving, candidates) {
        shared.workers[slot].yield_asked = true;
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
