//! The state that the launcher, the workers and every backend share, in
//! shared memory: one slot per worker, one entry per database the launcher
//! knows, and the last wake-up latencies. Only there when the library is
//! preloaded; `available()` says so.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};

use crate::gucs::WORKER_SLOTS;

/// Databases the launcher keeps track of at once.
pub const DATABASE_SLOTS: usize = 1024;
/// Wake-up latencies kept, the newest overwriting the oldest.
pub const LATENCY_SAMPLES: usize = 1024;
const ERROR_BYTES: usize = 120;

pub static SHARED: PgLwLock<Shared> = unsafe { PgLwLock::new(c"queue_shared") };

/// Set in the postmaster when the library is preloaded; inherited by every
/// process it forks.
static PRELOADED: AtomicBool = AtomicBool::new(false);

pub fn init() {
    pg_shmem_init!(SHARED);
    PRELOADED.store(true, Ordering::Relaxed);
}

/// Whether the shared state exists (the library was preloaded).
pub fn available() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    Free,
    Starting,
    Idle,
    /// Calling senders.
    Delivering,
    Stopping,
    /// The process is gone; the launcher frees the slot.
    Exited,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            State::Free | State::Exited => "stopped",
            State::Starting => "starting",
            State::Idle => "idle",
            State::Delivering => "delivering",
            State::Stopping => "stopping",
        }
    }

    pub fn running(self) -> bool {
        !matches!(self, State::Free | State::Exited)
    }
}

#[derive(Clone, Copy)]
pub struct Worker {
    pub state: State,
    /// The worker exited on purpose (idle, asked to stop, no extension).
    pub clean_exit: bool,
    /// Asked to exit: its database is needed alone, its turn is over, or
    /// the workers are switched off.
    pub stop: bool,
    pub database: Oid,
    pub pid: i32,
    /// Its index in ProcGlobal->allProcs, for its latch; -1 until known.
    pub procno: i32,
    pub started_at: i64,
    pub last_active_at: i64,
    pub delivered: i64,
    pub failed: i64,
    /// When a commit last set its latch, and the last such time the
    /// worker has taken in.
    pub wake_sent_at: i64,
    pub wake_seen_at: i64,
    pub last_error: [u8; ERROR_BYTES],
}

impl Worker {
    const FREE: Worker = Worker {
        state: State::Free,
        clean_exit: false,
        stop: false,
        database: Oid::INVALID,
        pid: 0,
        procno: -1,
        started_at: 0,
        last_active_at: 0,
        delivered: 0,
        failed: 0,
        wake_sent_at: 0,
        wake_seen_at: 0,
        last_error: [0; ERROR_BYTES],
    };

    pub fn starting(database: Oid, now: i64) -> Worker {
        Worker {
            state: State::Starting,
            database,
            started_at: now,
            last_active_at: now,
            ..Worker::FREE
        }
    }

    /// Keeps the start of `message` (whole characters) as the last error.
    pub fn set_last_error(&mut self, message: &str) {
        let mut end = message.len().min(ERROR_BYTES - 1);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        self.last_error = [0; ERROR_BYTES];
        self.last_error[..end].copy_from_slice(&message.as_bytes()[..end]);
    }

    pub fn last_error(&self) -> Option<String> {
        let len = self
            .last_error
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(ERROR_BYTES);
        (len > 0).then(|| String::from_utf8_lossy(&self.last_error[..len]).into_owned())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Installed {
    Unknown,
    Yes,
    No,
}

#[derive(Clone, Copy)]
pub struct Database {
    /// InvalidOid: a free entry.
    pub oid: Oid,
    pub installed: Installed,
    /// Seen by a scan of pg_database, and whether it was connectable and
    /// not a template then.
    pub scanned: bool,
    pub servable: bool,
    /// Since when it wants a worker; 0: it does not.
    pub wanted_since: i64,
    /// No worker before this time (after a worker that failed).
    pub not_before: i64,
    pub failures: u32,
    /// A command needs the database without a worker until then.
    pub blocked_until: i64,
    /// When its worker, which exited idle, has something to do again
    /// (a scheduled job falls due, a lease expires); 0: nothing.
    pub due_at: i64,
}

impl Database {
    const FREE: Database = Database {
        oid: Oid::INVALID,
        installed: Installed::Unknown,
        scanned: false,
        servable: false,
        wanted_since: 0,
        not_before: 0,
        failures: 0,
        blocked_until: 0,
        due_at: 0,
    };

    /// Waiting for a worker, and allowed one.
    pub fn waiting(&self, now: i64) -> bool {
        self.oid != Oid::INVALID
            && self.servable
            && self.installed != Installed::No
            && self.wanted_since > 0
            && self.blocked_until <= now
    }
}

pub struct Shared {
    pub launcher_procno: i32,
    /// Asks the launcher to scan pg_database once this time has come
    /// (0: no need).
    pub rescan_at: i64,
    pub workers: [Worker; WORKER_SLOTS],
    pub databases: [Database; DATABASE_SLOTS],
    pub latencies: [i64; LATENCY_SAMPLES],
    pub latency_count: u64,
}

unsafe impl PGRXSharedMemory for Shared {}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            launcher_procno: -1,
            rescan_at: 1,
            workers: [Worker::FREE; WORKER_SLOTS],
            databases: [Database::FREE; DATABASE_SLOTS],
            latencies: [0; LATENCY_SAMPLES],
            latency_count: 0,
        }
    }
}

impl Shared {
    /// The slot of the running worker of `database`.
    pub fn worker_of(&self, database: Oid) -> Option<usize> {
        self.workers
            .iter()
            .position(|w| w.state.running() && w.database == database)
    }

    /// The databases that want a worker, are allowed one and have none.
    pub fn waiting_for_worker(&self, now: i64) -> impl Iterator<Item = &Database> {
        self.databases
            .iter()
            .filter(move |d| d.waiting(now) && self.worker_of(d.oid).is_none())
    }

    /// The one to start a worker for next: the oldest request, past any
    /// pause after a failure.
    pub fn next_to_serve(&self, now: i64) -> Option<Oid> {
        self.waiting_for_worker(now)
            .filter(|d| d.not_before <= now)
            .min_by_key(|d| d.wanted_since)
            .map(|d| d.oid)
    }

    pub fn database(&mut self, oid: Oid) -> Option<&mut Database> {
        self.databases.iter_mut().find(|d| d.oid == oid)
    }

    /// The entry of `oid`, made if need be (None when the table is full).
    pub fn database_entry(&mut self, oid: Oid) -> Option<&mut Database> {
        let at = match self.databases.iter().position(|d| d.oid == oid) {
            Some(i) => i,
            None => {
                let free = self.databases.iter().position(|d| d.oid == Oid::INVALID)?;
                self.databases[free] = Database {
                    oid,
                    ..Database::FREE
                };
                free
            }
        };
        Some(&mut self.databases[at])
    }

    /// Databases whose work has fallen due since their worker left want
    /// one again.
    pub fn wake_due(&mut self, now: i64) {
        for entry in self.databases.iter_mut() {
            if entry.oid != Oid::INVALID && entry.due_at > 0 && entry.due_at <= now {
                if entry.wanted_since == 0 {
                    entry.wanted_since = now;
                }
                entry.due_at = 0;
            }
        }
    }

    pub fn record_latency(&mut self, micros: i64) {
        let at = (self.latency_count % LATENCY_SAMPLES as u64) as usize;
        self.latencies[at] = micros;
        self.latency_count += 1;
    }
}

/// Sets the latch of the process at `procno` in ProcGlobal->allProcs.
pub fn set_latch(procno: i32) {
    if procno < 0 {
        return;
    }
    unsafe {
        let proc = (*pg_sys::ProcGlobal).allProcs.add(procno as usize);
        pg_sys::SetLatch(&raw mut (*proc).procLatch);
    }
}

/// This process's index in ProcGlobal->allProcs.
pub fn my_procno() -> i32 {
    unsafe { (*pg_sys::MyProc).pgprocno }
}

pub fn now() -> i64 {
    unsafe { pg_sys::GetCurrentTimestamp() }
}
