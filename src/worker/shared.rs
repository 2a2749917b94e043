//! The state that the launcher, the workers and every backend share, in
//! shared memory: one slot per worker, one entry per database the launcher
//! knows (databases.rs), and the last wake-up latencies. Only there when
//! the library is preloaded; `available()` says so.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};

use super::databases;
pub use super::databases::{Database, Installed};
use crate::gucs::WORKER_SLOTS;

/// Wake-up latencies kept, the newest overwriting the oldest.
pub const LATENCY_SAMPLES: usize = 1024;
const ERROR_BYTES: usize = 120;

// SAFETY: the name, which names both the shared memory and the lock
// tranche, is used nowhere else in the library (the table of databases is
// "queue databases") and carries the library's name, as a lock or segment
// of another library would not.
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
    /// Asked to exit at once: its database is needed alone, or the workers
    /// are switched off.
    pub stop: bool,
    /// Asked by the launcher to give its slot to a database that waits:
    /// at once when nothing is due, else when its turn is over.
    pub yield_asked: bool,
    /// A helper of its database's worker (queue.max_workers_per_database):
    /// it delivers SQL senders' jobs while the database is busy, and does
    /// no upkeep, no recovery and no webhooks.
    pub helper: bool,
    pub database: Oid,
    pub pid: i32,
    /// Its index in ProcGlobal->allProcs, for its latch; -1 until known.
    pub procno: i32,
    pub started_at: i64,
    pub last_active_at: i64,
    pub delivered: i64,
    pub failed: i64,
    /// The last wake-up (`Shared::wakes`) the worker has taken in.
    pub wake_seen_at: i64,
    pub last_error: [u8; ERROR_BYTES],
}

impl Worker {
    const FREE: Worker = Worker {
        state: State::Free,
        clean_exit: false,
        stop: false,
        yield_asked: false,
        helper: false,
        database: Oid::INVALID,
        pid: 0,
        procno: -1,
        started_at: 0,
        last_active_at: 0,
        delivered: 0,
        failed: 0,
        wake_seen_at: 0,
        last_error: [0; ERROR_BYTES],
    };

    /// How the launcher weighs this worker, in `slot`, when databases
    /// wait: not at all when it is a helper (helpers leave by themselves),
    /// already leaving or not running; as idle when it sleeps on its latch;
    /// as busy, since its start, when it delivers or is still starting.
    /// Left out, a worker still starting would deliver and then sleep unasked
    /// until the launcher next woke: a burst that filled every slot with new
    /// workers would stall until the launcher's tick, a second later.
    pub fn candidate(&self, slot: usize) -> Option<super::decisions::Candidate> {
        let busy = match self.state {
            State::Idle => false,
            State::Starting | State::Delivering => true,
            State::Free | State::Stopping | State::Exited => return None,
        };
        if self.stop || self.yield_asked || self.helper {
            return None;
        }
        let since = if busy {
            self.started_at
        } else {
            self.last_active_at
        };
        Some(super::decisions::Candidate { slot, busy, since })
    }

    pub fn starting(database: Oid, helper: bool, now: i64) -> Worker {
        Worker {
            state: State::Starting,
            helper,
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

pub struct Shared {
    pub launcher_procno: i32,
    /// The server started as a standby, or to recover to a point in time
    /// (a signal file said so when its shared memory was made): it serves
    /// from its promotion, not from its start.
    pub started_in_recovery: bool,
    /// When the launcher of a server that `started_in_recovery` first ran,
    /// once promoted (0: not yet, or a server that started as a primary):
    /// ticks of schedules due before it were missed, whatever fired them on
    /// the old primary (schedules/fire.rs).
    pub serving_since: AtomicI64,
    /// Asks the launcher to scan pg_database once this time has come
    /// (0: no need).
    pub rescan_at: AtomicI64,
    pub workers: [Worker; WORKER_SLOTS],
    /// When a commit last set each worker's latch (with the lock held in
    /// share mode, hence atomic).
    pub wakes: [AtomicI64; WORKER_SLOTS],
    /// How many wake-ups commits have sent to running workers
    /// (queue_wakes_sent()).
    pub wakes_sent: AtomicU64,
    pub latencies: [i64; LATENCY_SAMPLES],
    pub latency_count: u64,
}

// SAFETY: plain data and atomics, no pointers: valid at the same address in
// every process, and initialized by Default before any process reads it.
unsafe impl PGRXSharedMemory for Shared {}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            launcher_procno: -1,
            started_in_recovery: ["standby.signal", "recovery.signal"]
                .iter()
                .any(|file| data_directory_has(file)),
            serving_since: AtomicI64::new(0),
            rescan_at: AtomicI64::new(1),
            workers: [Worker::FREE; WORKER_SLOTS],
            wakes: std::array::from_fn(|_| AtomicI64::new(0)),
            wakes_sent: AtomicU64::new(0),
            latencies: [0; LATENCY_SAMPLES],
            latency_count: 0,
        }
    }
}

/// Whether `file` is in the data directory (the postmaster's current
/// directory once it has started).
fn data_directory_has(file: &str) -> bool {
    // SAFETY: DataDir is set by the postmaster before shared memory is made
    // (when this runs), to a NUL-terminated path, or NULL.
    let dir = unsafe { pg_sys::DataDir };
    if dir.is_null() {
        return false;
    }
    // SAFETY: as above: a NUL-terminated string, live for the process.
    let dir = unsafe { std::ffi::CStr::from_ptr(dir) }.to_string_lossy();
    std::path::Path::new(dir.as_ref()).join(file).exists()
}

impl Shared {
    /// The slot of `database`'s running worker (not a helper): the one
    /// that commits wake.
    pub fn worker_of(&self, database: Oid) -> Option<usize> {
        self.workers
            .iter()
            .position(|w| w.state.running() && w.database == database && !w.helper)
    }

    /// The slots of every running worker of `database`, helpers included.
    pub fn workers_of(&self, database: Oid) -> impl Iterator<Item = usize> + '_ {
        self.workers
            .iter()
            .enumerate()
            .filter(move |(_, w)| w.state.running() && w.database == database)
            .map(|(slot, _)| slot)
    }

    /// A busy database to start a helper for, when no database waits: its
    /// worker found full batches in its last round, it was recovered (a
    /// helper never runs beside a recovery), and it has fewer than
    /// `per_database` workers.
    pub fn wants_helper(&self, now: i64, per_database: usize) -> Option<Oid> {
        if self.waiting_for_worker(now).next().is_some() {
            return None;
        }
        // No helper while its worker is asked to go or a command holds the database.
        let staying = |oid| {
            self.worker_of(oid).is_some_and(|slot| {
                let w = &self.workers[slot];
                !w.stop && !w.yield_asked
            })
        };
        self.databases()
            .filter(|d| d.busy && d.recovered && d.blocked_until <= now && staying(d.oid))
            .find(|d| self.workers_of(d.oid).count() < per_database)
            .map(|d| d.oid)
    }

    /// Every known database (a guard of the lock proves it is held).
    pub fn databases(&self) -> impl Iterator<Item = &Database> {
        databases::entries()
            .iter()
            .filter(|d| d.oid != Oid::INVALID)
    }

    pub fn databases_mut(&mut self) -> impl Iterator<Item = &mut Database> {
        databases::entries_mut()
            .iter_mut()
            .filter(|d| d.oid != Oid::INVALID)
    }

    /// The databases that want a worker, are allowed one and have none.
    pub fn waiting_for_worker(&self, now: i64) -> impl Iterator<Item = &Database> {
        self.databases()
            .filter(move |d| d.waiting(now) && self.worker_of(d.oid).is_none())
    }

    /// The one to start a worker for next: the oldest request, past any
    /// pause after a failure.
    pub fn next_to_serve(&self, now: i64) -> Option<Oid> {
        super::decisions::next_in_line(
            self.waiting_for_worker(now)
                .map(|d| (d.oid, d.wanted_since.load(Ordering::Relaxed), d.not_before)),
            now,
        )
    }

    /// The entry of `oid`, to read (and to change its atomics).
    pub fn database(&self, oid: Oid) -> Option<&Database> {
        let table = databases::entries();
        databases::find(table, oid).map(|at| &table[at])
    }

    pub fn database_mut(&mut self, oid: Oid) -> Option<&mut Database> {
        let table = databases::entries_mut();
        databases::find(table, oid).map(move |at| &mut table[at])
    }

    /// The entry of `oid`, made if need be (None when the table is full).
    pub fn database_entry(&mut self, oid: Oid) -> Option<&mut Database> {
        let table = databases::entries_mut();
        databases::find_or_add(table, oid).map(move |at| &mut table[at])
    }

    /// Forgets a database (dropped).
    pub fn forget_database(&mut self, oid: Oid) {
        let table = databases::entries_mut();
        if let Some(at) = databases::find(table, oid) {
            databases::remove(table, at);
        }
    }

    /// Databases whose work has fallen due since their worker left want
    /// one again. Returns when the next one falls due, if any does.
    pub fn wake_due(&mut self, now: i64) -> Option<i64> {
        let mut next = None;
        for entry in self.databases_mut() {
            let due = entry.due_at.load(Ordering::Relaxed);
            if due > 0 && due <= now {
                if !entry.wanted() {
                    entry.visit = true;
                }
                entry.want(now);
                entry.due_at.store(0, Ordering::Relaxed);
            } else if due > now {
                next = Some(next.map_or(due, |n: i64| n.min(due)));
            }
        }
        next
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
    // SAFETY: ProcGlobal points to the PGPROC array in shared memory that
    // the postmaster set up before forking, so every process has it;
    // procno is an index into it that a launcher or worker took from its
    // own PGPROC (my_procno), so it is in bounds. SetLatch may be called on
    // any process's latch; if that process has gone, its PGPROC is still
    // there and the latch set is at worst a spurious wake-up.
    unsafe {
        let proc = (*pg_sys::ProcGlobal).allProcs.add(procno as usize);
        pg_sys::SetLatch(&raw mut (*proc).procLatch);
    }
}

/// This process's index in ProcGlobal->allProcs.
pub fn my_procno() -> i32 {
    crate::versions::my_proc_number()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_still_starting_is_weighed_as_busy_since_its_start() {
        let oid = Oid::INVALID;
        let mut worker = Worker::starting(oid, false, 7);
        worker.last_active_at = 9;
        let weighed = |w: &Worker| w.candidate(3).map(|c| (c.slot, c.busy, c.since));
        assert_eq!(weighed(&worker), Some((3, true, 7)));
        worker.state = State::Delivering;
        assert_eq!(weighed(&worker), Some((3, true, 7)));
        worker.state = State::Idle;
        assert_eq!(weighed(&worker), Some((3, false, 9)));
        // leaving, gone, already asked, told to stop, or a helper: not weighed
        for state in [State::Stopping, State::Exited, State::Free] {
            worker.state = state;
            assert_eq!(weighed(&worker), None);
        }
        worker.state = State::Starting;
        worker.yield_asked = true;
        assert_eq!(weighed(&worker), None);
        worker.yield_asked = false;
        worker.stop = true;
        assert_eq!(weighed(&worker), None);
        let helper = Worker::starting(oid, true, 7);
        assert_eq!(weighed(&helper), None);
    }
}
