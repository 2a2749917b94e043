//! The worker of one database, started by the launcher into a slot. It
//! connects, checks that the extension is there, then waits on its latch
//! (set by committing transactions) or the poll interval, and gives its
//! slot back when it has been idle for queue.idle_exit, when its turn is
//! over, or when its database is needed alone. A wake-up is all the work
//! there is until senders deliver jobs from this loop.

use std::cell::Cell;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use super::shared::{self, Installed, State, SHARED};
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
    if !installed() {
        set_installed(database, Installed::No);
        exit_cleanly();
    }
    set_installed(database, Installed::Yes);

    let mut last_work = shared::now();
    loop {
        pgrx::check_for_interrupts!();
        unsafe {
            if pg_sys::ConfigReloadPending != 0 {
                pg_sys::ConfigReloadPending = 0;
                pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
            }
        }
        let now = shared::now();
        let (stop, woken) = {
            let mut shared = SHARED.exclusive();
            let me = &mut shared.workers[slot];
            let woken = me.wake_sent_at > me.wake_seen_at;
            if woken {
                let latency = now - me.wake_sent_at;
                me.wake_seen_at = me.wake_sent_at;
                me.last_active_at = now;
                shared.record_latency(latency);
            }
            (shared.workers[slot].stop, woken)
        };
        if stop || !gucs::ENABLED.get() {
            exit_cleanly();
        }
        if !installed() {
            // DROP EXTENSION
            set_installed(database, Installed::No);
            exit_cleanly();
        }
        if woken {
            last_work = now;
        }
        let idle_us = gucs::IDLE_EXIT_S.get() as i64 * 1_000_000;
        if now - last_work >= idle_us && give_up_slot(slot, database) {
            exit_cleanly();
        }
        let until_idle = (last_work + idle_us - now).max(0) / 1000;
        let timeout = (gucs::POLL_INTERVAL_MS.get() as i64).min(until_idle).max(1);
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                timeout as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
    }
}

/// Whether the extension is installed in this database.
fn installed() -> bool {
    BackgroundWorker::transaction(|| unsafe {
        pg_sys::get_extension_oid(c"queue".as_ptr(), true) != Oid::INVALID
    })
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

/// Idle: the database no longer wants a worker, unless a commit woke this
/// one in the meantime (then it stays).
fn give_up_slot(slot: usize, database: Oid) -> bool {
    let mut shared = SHARED.exclusive();
    let me = shared.workers[slot];
    if me.wake_sent_at > me.wake_seen_at {
        return false;
    }
    shared.workers[slot].state = State::Stopping;
    if let Some(entry) = shared.database(database) {
        entry.wanted_since = 0;
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
