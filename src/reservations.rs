//! Claims under way side by side in a queue whose limits count
//! (docs/groups.md), kept in shared memory: before it counts, such a claim
//! reserves as many jobs as it may take, until its transaction ends. A
//! claim then counts what has committed (in flight, in the rate windows)
//! plus what the claims that reserved before it may take, and takes no
//! more than the limits leave. Claims of one queue therefore need not run
//! one at a time to stay within its limits; one that would pass a limit by
//! what the older claims reserved waits for them to end, and counts again.
//!
//! Why that is exact: of any claims under way at once, the one that
//! reserved last sees every other either committed or still reserved, so
//! it leaves room for all of them; a younger claim, in turn, leaves room for
//! it. A reservation describes only an uncommitted claim, so a crash or a
//! failover, which ends every transaction, loses nothing that counts: the
//! claims that committed are in the tables. (A prepared transaction is the
//! exception: it outlives a restart and its reservation does not.)
//!
//! Only there when the library is preloaded; a claim that finds no room in
//! the table claims one at a time instead (`limits::take_turn`).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::pg_sys::{self, Oid, TransactionId};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};

/// Claims under way at once, in every database together.
const ENTRIES: usize = 128;

#[derive(Clone, Copy)]
struct Entry {
    /// 0: the entry is free. Tickets grow: a smaller one reserved earlier.
    ticket: u64,
    database: Oid,
    queue_id: i32,
    /// The claiming transaction (its top transaction).
    xid: TransactionId,
    jobs: i64,
}

const FREE: Entry = Entry {
    ticket: 0,
    database: Oid::INVALID,
    queue_id: 0,
    xid: pg_sys::InvalidTransactionId,
    jobs: 0,
};

pub struct Table {
    next_ticket: u64,
    entries: [Entry; ENTRIES],
}

// SAFETY: plain data, no pointers: valid at the same address in every
// process, and initialized by Default before any process reads it.
unsafe impl PGRXSharedMemory for Table {}

impl Default for Table {
    fn default() -> Self {
        Table {
            next_ticket: 1,
            entries: [FREE; ENTRIES],
        }
    }
}

// SAFETY: the name, which names both the shared memory and the lock
// tranche, is used nowhere else and carries the library's name.
static TABLE: PgLwLock<Table> = unsafe { PgLwLock::new(c"queue_claims_under_way") };

/// Set in the postmaster when the library is preloaded; inherited by every
/// process it forks.
static PRELOADED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The entries of this backend's transaction: (index, ticket).
    static MINE: RefCell<Vec<(usize, u64)>> = const { RefCell::new(Vec::new()) };
    /// The transaction callback is registered in this backend.
    static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Called from _PG_init while the library is preloaded.
pub fn init() {
    pg_shmem_init!(TABLE);
    PRELOADED.store(true, Ordering::Relaxed);
}

/// A claim's reservation, until its transaction ends.
pub struct Reserved {
    index: usize,
    ticket: u64,
    database: Oid,
    queue_id: i32,
    xid: TransactionId,
}

/// What the claims that reserved before one, and are still under way, may
/// take.
pub struct Older {
    pub jobs: i64,
    /// Those that reserved before the transaction's own first claim, the
    /// only ones it may wait for: a transaction that claims again waits
    /// for no claim that may be waiting for its first one, so waits run
    /// one way, from younger to older, and never close a circle.
    xids: Vec<TransactionId>,
}

/// Reserves `jobs` for a claim of `queue_id` by the current transaction.
/// None when it cannot: the library is not preloaded, or the table is full.
pub fn reserve(queue_id: i32, jobs: usize) -> Option<Reserved> {
    if !PRELOADED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: inside a transaction (a claim); assigning the top
    // transaction an id is what its first write does anyway.
    let xid = unsafe { pg_sys::GetTopTransactionId() };
    // SAFETY: MyDatabaseId is set when the backend connects and never
    // changes after.
    let database = unsafe { pg_sys::MyDatabaseId };
    let reserved = {
        let mut table = TABLE.exclusive();
        let index = match table.entries.iter().position(|e| e.ticket == 0) {
            Some(index) => index,
            None => table.sweep()?,
        };
        let ticket = table.next_ticket;
        table.next_ticket += 1;
        table.entries[index] = Entry {
            ticket,
            database,
            queue_id,
            xid,
            jobs: jobs as i64,
        };
        Reserved {
            index,
            ticket,
            database,
            queue_id,
            xid,
        }
    };
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per backend (REGISTERED), as PostgreSQL
        // keeps a callback registered until the process ends;
        // at_transaction_end has the callback's signature and lives as long
        // as the process. It only takes the table's lock and never raises.
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    MINE.with_borrow_mut(|mine| mine.push((reserved.index, reserved.ticket)));
    Some(reserved)
}

impl Reserved {
    /// The claims of the same queue that reserved before this one and have
    /// not ended. (The transaction's own earlier claims are not among them:
    /// it sees what they took.)
    pub fn older(&self) -> Older {
        // The transaction's entries stay in the table until it ends.
        let first_own = MINE.with_borrow(|mine| mine.iter().map(|&(_, t)| t).min());
        let first_own = first_own.unwrap_or(self.ticket);
        let table = TABLE.share();
        let older = table.entries.iter().filter(|e| {
            e.ticket != 0
                && e.ticket < self.ticket
                && e.xid != self.xid
                && e.database == self.database
                && e.queue_id == self.queue_id
        });
        let mut jobs = 0;
        let mut xids = Vec::new();
        for entry in older {
            jobs += entry.jobs;
            if entry.ticket < first_own && entry.jobs > 0 {
                xids.push(entry.xid);
            }
        }
        Older { jobs, xids }
    }

    /// The claim took `jobs`, fewer than it reserved: younger claims need
    /// to leave room for no more than that.
    pub fn took(&self, jobs: usize) {
        let mut table = TABLE.exclusive();
        let entry = &mut table.entries[self.index];
        if entry.ticket == self.ticket {
            entry.jobs = entry.jobs.min(jobs as i64);
        }
    }
}

impl Table {
    /// Frees the entries of prepared transactions that have ended since
    /// (no callback freed them); the first one freed, if any.
    fn sweep(&mut self) -> Option<usize> {
        let mut first = None;
        for (index, entry) in self.entries.iter_mut().enumerate() {
            // SAFETY: reads the proc array under its own lock; no error is
            // raised for a valid id (every entry in use has one).
            if entry.ticket != 0 && !unsafe { pg_sys::TransactionIdIsInProgress(entry.xid) } {
                *entry = FREE;
                first = first.or(Some(index));
            }
        }
        first
    }
}

impl Older {
    /// Some of these claims may be waited for.
    pub fn can_wait(&self) -> bool {
        !self.xids.is_empty()
    }

    /// Waits until the transactions of the claims it may wait for have
    /// ended.
    pub fn wait(&self) {
        for &xid in &self.xids {
            // SAFETY: waits on the transaction's lock, as a row lock on a
            // row it changed would; a transaction that has ended returns at
            // once. Inside a transaction, which a claim is.
            unsafe {
                pg_sys::XactLockTableWait(
                    xid,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    pg_sys::XLTW_Oper::XLTW_None,
                )
            };
        }
        // A prepared transaction's entry stays until it ends, when no callback
        // runs: whoever waited for it frees it.
        let mut table = TABLE.exclusive();
        for entry in table.entries.iter_mut() {
            if entry.ticket != 0 && self.xids.contains(&entry.xid) {
                *entry = FREE;
            }
        }
    }
}

/// Frees the transaction's entries when it ends; a prepared transaction
/// keeps them (its claims are not committed yet) until someone waits for it.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the transaction callback registered in
/// `reserve`.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    let free = match event {
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => true,
        XACT_EVENT_PREPARE => false,
        _ => return,
    };
    let mine = MINE.with_borrow_mut(std::mem::take);
    if !free || mine.is_empty() {
        return;
    }
    let mut table = TABLE.exclusive();
    for (index, ticket) in mine {
        if table.entries[index].ticket == ticket {
            table.entries[index] = FREE;
        }
    }
}
