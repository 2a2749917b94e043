//! Latency histograms per queue (docs/operations.md, "Metrics and
//! traces"): the wait of each job claimed (from when it was due to its
//! claim) and the run of each attempt that ended (from its claim to its
//! end, by outcome), for pull consumers and the worker alike.
//!
//! The moves of jobs.rs note what they measured here; a transaction's
//! notes reach the histograms in shared memory (memory.rs) when it commits,
//! and are forgotten when it, or the subtransaction that made them, rolls
//! back. Nothing is locked: the commit adds to atomics. A run's start comes
//! from its lease (leases.rs), so a completion reads nothing for it.

pub mod buckets;
pub mod memory;

use std::cell::{Cell, RefCell};

use pgrx::datum::Uuid;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::ends::Outcome;
use crate::leases;

/// What a histogram measures: its index in a queue's slot (memory.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Wait,
    Run(Outcome),
}

impl Kind {
    pub const ALL: [Kind; memory::KINDS] = [
        Kind::Wait,
        Kind::Run(Outcome::Succeeded),
        Kind::Run(Outcome::Failed),
        Kind::Run(Outcome::Cancelled),
    ];

    fn index(self) -> usize {
        match self {
            Kind::Wait => 0,
            Kind::Run(Outcome::Succeeded) => 1,
            Kind::Run(Outcome::Failed) => 2,
            Kind::Run(Outcome::Cancelled) => 3,
        }
    }

    pub fn of_index(index: usize) -> Kind {
        Kind::ALL[index]
    }
}

/// An observation not yet committed, and the subtransaction level that
/// made it.
struct Note {
    level: i32,
    queue: i32,
    kind: usize,
    us: i64,
}

thread_local! {
    static NOTES: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// A job of queue `queue` that was due at `due_at` is claimed at `now`.
pub fn claimed(queue: i32, due_at: i64, now: i64) {
    note(queue, Kind::Wait, now - due_at);
}

/// The attempt of a job of queue `queue` claimed under `lease` ended as
/// `outcome` at `now` (nothing for a lease from before 0.4.0).
pub fn ended(queue: i32, outcome: Outcome, lease: &Uuid, now: i64) {
    if let Some(at) = leases::claimed_at(lease) {
        note(queue, Kind::Run(outcome), now - at);
    }
}

/// The attempt of a job of queue `queue` that began at `started` ended as
/// `outcome` at `now` (a delivery that took its jobs without a lease).
pub fn ended_since(queue: i32, outcome: Outcome, started: i64, now: i64) {
    note(queue, Kind::Run(outcome), now - started);
}

fn note(queue: i32, kind: Kind, us: i64) {
    if !memory::available() {
        return;
    }
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per backend (REGISTERED), as PostgreSQL
        // keeps callbacks registered until the process ends; both have the
        // callbacks' signatures, live as long as the process, and never
        // raise (an ERROR after a commit would be a PANIC): they add to
        // atomics and change a backend-local list.
        unsafe {
            pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(at_subtransaction_end), std::ptr::null_mut());
        }
    }
    // SAFETY: a read of the current transaction's nesting depth; inside a
    // transaction, where every caller is.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    NOTES.with_borrow_mut(|notes| {
        notes.push(Note {
            level,
            queue,
            kind: kind.index(),
            us,
        })
    });
}

/// At a commit the notes go into the histograms; otherwise they are
/// forgotten.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the transaction callback registered in
/// `note`.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let mut notes = NOTES.with_borrow_mut(std::mem::take);
            // SAFETY: MyDatabaseId is set when the backend connects to its
            // database and never changes after.
            let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
            notes.sort_unstable_by_key(|n| n.queue);
            for queue in notes.chunk_by(|a, b| a.queue == b.queue) {
                let observations: Vec<(usize, i64)> =
                    queue.iter().map(|n| (n.kind, n.us)).collect();
                memory::record(database, queue[0].queue, &observations);
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => {
            NOTES.with_borrow_mut(Vec::clear);
        }
        _ => {}
    }
}

/// A subtransaction that rolls back takes its notes with it; one that
/// commits hands them to its parent.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the subtransaction callback registered in
/// `note`.
#[pg_guard]
unsafe extern "C-unwind" fn at_subtransaction_end(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::*;
    // SAFETY: as in `note`: the level of the subtransaction ending.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    match event {
        SUBXACT_EVENT_ABORT_SUB => {
            NOTES.with_borrow_mut(|notes| notes.retain(|n| n.level < level));
        }
        SUBXACT_EVENT_COMMIT_SUB => NOTES.with_borrow_mut(|notes| {
            for note in notes.iter_mut().filter(|n| n.level >= level) {
                note.level = level - 1;
            }
        }),
        _ => {}
    }
}
