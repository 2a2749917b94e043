//! The worker of one database, started by the launcher into a slot. It
//! connects, checks that the extension is there, takes back the jobs a
//! stopped worker left in flight, and then goes round: one batch per
//! sender queue, upkeep, and a sleep on its latch (set by committing
//! transactions) until the next job falls due or the poll interval ends.
//! It gives its slot back when it has been idle for queue.idle_exit (telling
//! the launcher when its next job falls due), when its turn is over, or
//! when its database is needed alone.

use std::cell::Cell;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use super::delivery::{self, Delivery};
use super::session::{self, Session};
use super::shared::{self, Installed, State, SHARED};
use super::upkeep::Upkeep;
use super::wake;
use crate::gucs;

thread_local! {
    /// The worker is exiting on purpose.
    static CLEAN_EXIT: Cell<bool> = const { Cell::new(false) };
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn queue_worker_main(arg: pg_sys::Datum) {
    let slot = arg.value();
    unsafe {
        // SIGTERM ends even a running statement (DROP DATABASE waits for it);
        // SIGUSR1 (procsignal barriers) keeps the handler background
        // workers with a database connection get.
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(on_sigterm));
        pg_sys::pqsignal(pg_sys::SIGHUP as i32, Some(on_sighup));
        pg_sys::before_shmem_exit(Some(at_exit), pg_sys::Datum::from(slot));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    let database = SHARED.share().workers[slot].database;
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(database), None);
    super::name_this_process("queue worker");
    {
        let mut shared = SHARED.exclusive();
        let me = &mut shared.workers[slot];
        me.pid = unsafe { pg_sys::MyProcPid };
        me.procno = shared::my_procno();
        me.state = State::Idle;
    }
    let Some(mut session) = session::transaction(|| Session::find(None)) else {
        set_installed(database, Installed::No);
        exit_cleanly();
    };
    set_installed(database, Installed::Yes);
    wake::in_worker();
    let mut delivery = Delivery::new(slot);
    let mut upkeep = Upkeep::new(shared::now());
    let mut last_work = shared::now();
    if delivery.recover(&session) > 0 {
        last_work = shared::now();
    }

    loop {
        pgrx::check_for_interrupts!();
        unsafe {
            if pg_sys::ConfigReloadPending != 0 {
                pg_sys::ConfigReloadPending = 0;
                pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
            }
        }
        let now = shared::now();
        let woken = take_wake(slot, now);
        if stop_requested(slot) || !gucs::ENABLED.get() {
            exit_cleanly();
        }
        // DROP EXTENSION, or a new schema after ALTER EXTENSION SET SCHEMA
        session = match session::transaction(|| Session::find(Some(session))) {
            Some(found) => found,
            None => {
                set_installed(database, Installed::No);
                exit_cleanly();
            }
        };
        let (claimed, more) = delivery.round(&session, || stop_requested(slot));
        upkeep.run(&session, shared::now());
        if woken || claimed > 0 {
            last_work = now;
        }
        if more {
            continue;
        }
        let now = shared::now();
        let next_due = session::transaction(|| session.tables(delivery::next_due));
        let idle_us = gucs::IDLE_EXIT_S.get() as i64 * 1_000_000;
        if now - last_work >= idle_us && give_up_slot(slot, database, next_due) {
            exit_cleanly();
        }
        let until_idle = (last_work + idle_us - now).max(0);
        // a due time already past that this round could not serve (its
        // job is locked by someone) is looked at again a little later
        let until_due = next_due.map_or(i64::MAX, |due| (due - now).max(MIN_SLEEP_US));
        let timeout_us = (gucs::POLL_INTERVAL_MS.get() as i64 * 1000)
            .min(until_idle)
            .min(until_due)
            .min(upkeep.next_at() - now)
            .max(1000);
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                (timeout_us / 1000) as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
    }
}

/// The least a worker sleeps when a round found nothing it could do.
const MIN_SLEEP_US: i64 = 100_000;

/// Takes in a wake-up sent by a commit, if one came, and records how long
/// it took to arrive.
fn take_wake(slot: usize, now: i64) -> bool {
    let mut shared = SHARED.exclusive();
    let me = &mut shared.workers[slot];
    let woken = me.wake_sent_at > me.wake_seen_at;
    if woken {
        let latency = now - me.wake_sent_at;
        me.wake_seen_at = me.wake_sent_at;
        me.last_active_at = now;
        shared.record_latency(latency);
    }
    woken
}

/// The launcher or a database command asked this worker to go.
fn stop_requested(slot: usize) -> bool {
    SHARED.share().workers[slot].stop
}

fn set_installed(database: Oid, installed: Installed) {
    let mut shared = SHARED.exclusive();
    if let Some(entry) = shared.database(database) {
        entry.installed = installed;
        if installed == Installed::No {
            entry.wanted_since = 0;
        }
    }
}

/// Idle: the database no longer wants a worker until `next_due`, unless a
/// commit woke this one in the meantime (then it stays).
fn give_up_slot(slot: usize, database: Oid, next_due: Option<i64>) -> bool {
    let mut shared = SHARED.exclusive();
    let me = shared.workers[slot];
    if me.wake_sent_at > me.wake_seen_at {
        return false;
    }
    shared.workers[slot].state = State::Stopping;
    if let Some(entry) = shared.database(database) {
        entry.wanted_since = 0;
        entry.due_at = next_due.unwrap_or(0).max(0);
    }
    true
}

fn exit_cleanly() -> ! {
    CLEAN_EXIT.set(true);
    unsafe { pg_sys::proc_exit(0) }
}

/// What PostgreSQL's die() does for a background worker: the next
/// CHECK_FOR_INTERRUPTS, in our loop or inside a statement, ends the
/// process with FATAL.
unsafe extern "C-unwind" fn on_sigterm(_signal: std::ffi::c_int) {
    unsafe {
        pg_sys::InterruptPending = 1;
        pg_sys::ProcDiePending = 1;
        pg_sys::SetLatch(pg_sys::MyLatch);
    }
}

unsafe extern "C-unwind" fn on_sighup(_signal: std::ffi::c_int) {
    unsafe {
        pg_sys::ConfigReloadPending = 1;
        pg_sys::SetLatch(pg_sys::MyLatch);
    }
}

/// Runs on every exit, FATAL ones included: the slot is left for the
/// launcher to free, and a wake-up that arrived too late, or a turn that
/// was cut short, keeps the database in the line for a worker.
#[pg_guard]
unsafe extern "C-unwind" fn at_exit(_code: i32, arg: pg_sys::Datum) {
    let slot = arg.value();
    let now = shared::now();
    let mut shared = SHARED.exclusive();
    let me = shared.workers[slot];
    let missed_wake = me.wake_sent_at > me.wake_seen_at;
    // asked to stop while it still had work: back to the end of the line
    let turn_over = me.stop && me.last_active_at > me.started_at;
    shared.workers[slot].state = State::Exited;
    shared.workers[slot].clean_exit = CLEAN_EXIT.get() || me.stop;
    if let Some(entry) = shared.database(me.database) {
        if (missed_wake || turn_over) && entry.installed != Installed::No && entry.wanted_since == 0
        {
            entry.wanted_since = now;
        }
    }
    if shared.launcher_procno >= 0 {
        shared::set_latch(shared.launcher_procno);
    }
}
