//! Consumers waiting in `queue_wait` (api/wait.rs), in shared memory: one
//! slot per backend, at its index in ProcGlobal->allProcs, saying which
//! database and queue it waits on and when it should look again.
//!
//! A transaction notes, per queue, what it made claimable (`note_due`,
//! `note_all`, `note_ended`: announce.rs calls them); at its commit,
//! `at_commit` hands each job made due to one waiter of its queue (the
//! bound: a thundering herd costs one look per job, not one per waiter),
//! and each job ended to one waiter of its queue held back by a limit or
//! the order, by setting the waiter's `wake_at` and its latch. No lock is
//! taken: the slots are atomics, and a commit with no waiter anywhere in
//! the cluster reads one counter.
//!
//! Why no wake-up is lost: a waiter publishes its slot, and marks itself
//! held, before it takes the snapshot of its look at the queue
//! (`Registration::before_look`). A commit it does not see there ended (in
//! the proc array) after that snapshot, so its commit callback, which runs
//! after that, finds the slot as it was published.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU32, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::segments::Segment;
use super::shared;

#[repr(C)]
struct Slot {
    /// The database it waits in; 0: the slot is free.
    database: AtomicU32,
    queue: AtomicI32,
    /// When it should look at its queue again (a commit made a job due
    /// then); 0: no commit asked.
    wake_at: AtomicI64,
    /// Its last look found ready jobs that a limit or the queue's order
    /// held back: a finished job may let one go.
    held: AtomicBool,
    /// The job it awaits (queue_await; `queue` is 0 then); 0: none.
    job: AtomicI64,
}

#[repr(C)]
struct Header {
    /// How many slots are taken.
    waiting: AtomicU32,
    /// How many of them await a job.
    awaiting: AtomicU32,
    slots: u32,
}

static HEADER: AtomicPtr<Header> = AtomicPtr::new(std::ptr::null_mut());

/// The waiters' shared memory (segments.rs).
pub static SEGMENT: Segment = Segment {
    name: c"queue waiters",
    bytes,
    attach,
};

/// One slot per backend (client backends and background workers have
/// proc numbers below MaxBackends).
fn slot_count() -> usize {
    // SAFETY: MaxBackends is set before shared memory is sized, and fixed
    // from then on.
    unsafe { pg_sys::MaxBackends.max(0) as usize }
}

fn bytes() -> usize {
    std::mem::size_of::<Header>().next_multiple_of(8) + slot_count() * std::mem::size_of::<Slot>()
}

fn attach(memory: *mut u8, found: bool) {
    let header = memory as *mut Header;
    if !found {
        let slots = slot_count();
        // SAFETY: the memory is bytes() long and aligned for any type;
        // written only when it was just made, before any other process can
        // look at it. Zero is a free slot and an empty header.
        unsafe {
            std::ptr::write_bytes(memory, 0, bytes());
            (*header).slots = slots as u32;
        }
    }
    HEADER.store(header, Ordering::Release);
}

fn header() -> Option<&'static Header> {
    let header = HEADER.load(Ordering::Acquire);
    // SAFETY: attach() set it to the header of the segment, which lives as
    // long as the server; `slots` is written before any process starts.
    (!header.is_null()).then(|| unsafe { &*header })
}

fn slots() -> &'static [Slot] {
    let Some(header) = header() else {
        return &[];
    };
    // SAFETY: the slots follow the header (bytes()), all atomics, so that
    // any process may read and write them at any time.
    unsafe {
        let first = (header as *const Header as *const u8)
            .add(std::mem::size_of::<Header>().next_multiple_of(8))
            as *const Slot;
        std::slice::from_raw_parts(first, header.slots as usize)
    }
}

/// What a waiter finds in its slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// No commit asked anything.
    Nothing,
    /// A commit made a job due now: look (the wake is taken).
    Now,
    /// A commit made a job due at this time.
    At(i64),
}

/// This backend's slot while it waits; freed on drop (also when an error
/// ends the wait), handing on a wake-up it did not use.
pub struct Registration {
    procno: usize,
}

/// Takes this backend's slot for a wait on `queue` of `database`. None
/// without the preload.
pub fn register(database: pg_sys::Oid, queue: i32) -> Option<Registration> {
    let header = header()?;
    let procno = usize::try_from(shared::my_procno()).ok()?;
    let slot = slots().get(procno)?;
    at_exit_free_slot();
    slot.wake_at.store(0, Ordering::SeqCst);
    slot.held.store(false, Ordering::SeqCst);
    slot.job.store(0, Ordering::SeqCst);
    slot.queue.store(queue, Ordering::SeqCst);
    slot.database.store(database.to_u32(), Ordering::SeqCst);
    header.waiting.fetch_add(1, Ordering::SeqCst);
    Some(Registration { procno })
}

/// Takes this backend's slot for awaiting job `job` of `database`
/// (queue_await). None without the preload.
pub fn register_await(database: pg_sys::Oid, job: i64) -> Option<Registration> {
    let header = header()?;
    let procno = usize::try_from(shared::my_procno()).ok()?;
    let slot = slots().get(procno)?;
    at_exit_free_slot();
    slot.wake_at.store(0, Ordering::SeqCst);
    slot.held.store(false, Ordering::SeqCst);
    slot.queue.store(0, Ordering::SeqCst);
    slot.job.store(job, Ordering::SeqCst);
    header.awaiting.fetch_add(1, Ordering::SeqCst);
    slot.database.store(database.to_u32(), Ordering::SeqCst);
    header.waiting.fetch_add(1, Ordering::SeqCst);
    Some(Registration { procno })
}

impl Registration {
    fn slot(&self) -> &'static Slot {
        &slots()[self.procno]
    }

    /// What commits asked of this waiter since it last looked; a wake due
    /// by `now` is taken (a commit after this asks again).
    pub fn take_wake(&self, now: i64) -> Wake {
        let wake_at = &self.slot().wake_at;
        let at = wake_at.load(Ordering::SeqCst);
        if at == 0 {
            Wake::Nothing
        } else if at > now {
            Wake::At(at)
        } else if wake_at
            .compare_exchange(at, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            Wake::Now
        } else {
            // A commit moved it meanwhile: look now anyway.
            wake_at.store(0, Ordering::SeqCst);
            Wake::Now
        }
    }

    /// Before a look's snapshot: until the look says otherwise, a job that
    /// ends in the queue may free one held back (a commit after the
    /// snapshot must find the slot asking for it).
    pub fn before_look(&self) {
        self.slot().held.store(true, Ordering::SeqCst);
    }

    /// What the look found: ready jobs that a limit or the order held
    /// back, or none.
    pub fn set_held(&self, held: bool) {
        self.slot().held.store(held, Ordering::SeqCst);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        free(self.slot());
    }
}

/// Frees `slot` (if taken) and hands a wake-up its waiter did not use to
/// another waiter.
fn free(slot: &Slot) {
    let database = slot.database.swap(0, Ordering::SeqCst);
    if database == 0 {
        return;
    }
    let awaited = slot.job.swap(0, Ordering::SeqCst);
    if let Some(header) = header() {
        header.waiting.fetch_sub(1, Ordering::SeqCst);
        if awaited != 0 {
            header.awaiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let at = slot.wake_at.swap(0, Ordering::SeqCst);
    // An awaiter's wake-up was for its job alone.
    if at != 0 && awaited == 0 {
        let queue = Target::Queue(slot.queue.load(Ordering::SeqCst));
        wake(pg_sys::Oid::from(database), queue, Some(1), at);
    }
}

/// Frees this backend's slot when the process exits (a terminated wait
/// ends there, without unwinding).
fn at_exit_free_slot() {
    thread_local! {
        static ARMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if ARMED.replace(true) {
        return;
    }
    /// # Safety
    ///
    /// Only PostgreSQL calls it, at process exit.
    unsafe extern "C-unwind" fn free_slot(_code: i32, _arg: pg_sys::Datum) {
        let procno = usize::try_from(shared::my_procno()).ok();
        if let Some(slot) = procno.and_then(|procno| slots().get(procno)) {
            free(slot);
        }
    }
    // SAFETY: registers a callback that lives as long as the process; it
    // only touches atomics in shared memory, which is still attached before
    // shmem exit, and sets latches; it never raises.
    unsafe { pg_sys::before_shmem_exit(Some(free_slot), pg_sys::Datum::from(0usize)) };
}

/// Which waiters of a database a wake-up is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Queue(i32),
    /// Those of a queue whose last look found jobs held back by a limit or
    /// the queue's order.
    Held(i32),
}

impl Target {
    fn matches(self, slot: &Slot) -> bool {
        match self {
            Target::Queue(queue) => slot.queue.load(Ordering::SeqCst) == queue,
            Target::Held(queue) => {
                slot.queue.load(Ordering::SeqCst) == queue && slot.held.load(Ordering::SeqCst)
            }
        }
    }
}

/// The most distinct due times a transaction notes per queue; past it, the
/// later jobs are announced at the earliest of them (their waiters look
/// then, and wait on for the rest).
const TIMES_PER_QUEUE: usize = 16;

/// What the current transaction made claimable in one queue, for its
/// commit.
#[derive(Debug, Default, PartialEq)]
struct QueueNote {
    /// Jobs due by the time they were noted.
    due_now: usize,
    /// Jobs due later, by their time.
    later: Vec<(i64, usize)>,
    /// Jobs that ended: a limit or an ordered group may let others go.
    ended: usize,
    /// Every waiter of the queue looks again (resumed, limits changed,
    /// dropped, given a sender).
    all: bool,
}

impl QueueNote {
    fn due(&mut self, jobs: usize, at: i64, now: i64) {
        if at <= now {
            self.due_now = self.due_now.saturating_add(jobs);
        } else if let Some(same) = self.later.iter_mut().find(|(t, _)| *t == at) {
            same.1 = same.1.saturating_add(jobs);
        } else if self.later.len() < TIMES_PER_QUEUE {
            self.later.push((at, jobs));
        } else {
            let earliest = self.later.iter_mut().min_by_key(|(t, _)| *t).expect("full");
            earliest.0 = earliest.0.min(at);
            earliest.1 = earliest.1.saturating_add(jobs);
        }
    }
}

/// The most ended jobs a transaction notes by id; past it, its commit wakes
/// every awaiter of the database, each of which looks at its own job.
const ENDED_BY_ID: usize = 10_000;

/// The jobs the current transaction ended, for their awaiters.
#[derive(Default)]
enum EndedJobs {
    #[default]
    None,
    These(Vec<i64>),
    /// More than ENDED_BY_ID.
    Many,
}

thread_local! {
    /// The notes of the current transaction, by queue.
    static NOTES: RefCell<HashMap<i32, QueueNote>> = RefCell::new(HashMap::new());
    static ENDED: RefCell<EndedJobs> = const { RefCell::new(EndedJobs::None) };
}

fn note(queue: i32, change: impl FnOnce(&mut QueueNote)) {
    if !shared::available() {
        return;
    }
    thread_local! {
        static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per backend (REGISTERED), as PostgreSQL
        // keeps a callback registered until the process ends;
        // at_transaction_end has the callback's signature and lives as long
        // as the process. It only reads and sets atomics and latches, and
        // never raises (an ERROR after a commit would be a PANIC).
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    NOTES.with_borrow_mut(|notes| change(notes.entry(queue).or_default()));
}

/// `jobs` jobs of `queue` fall due at `at` when this transaction commits.
pub fn note_due(queue: i32, jobs: usize, at: i64) {
    if jobs > 0 {
        let now = crate::time::now_us();
        note(queue, |n| n.due(jobs, at, now));
    }
}

/// Every waiter of `queue` looks again when this transaction commits.
pub fn note_all(queue: i32) {
    note(queue, |n| n.all = true);
}

/// `jobs` jobs of `queue` end when this transaction commits: as many of its
/// waiters held back by a limit or its order look again.
pub fn note_ended(queue: i32, jobs: usize) {
    if jobs > 0 {
        note(queue, |n| n.ended = n.ended.saturating_add(jobs));
    }
}

/// Jobs `ids` end when this transaction commits: their awaiters return.
/// Noted whether or not anyone awaits now: one who starts to before the commit
/// must be found by it.
pub fn note_ended_jobs(ids: impl Iterator<Item = i64>) {
    if !shared::available() {
        return;
    }
    ENDED.with_borrow_mut(|ended| {
        for id in ids {
            match ended {
                EndedJobs::Many => return,
                EndedJobs::None => *ended = EndedJobs::These(vec![id]),
                EndedJobs::These(these) if these.len() == ENDED_BY_ID => *ended = EndedJobs::Many,
                EndedJobs::These(these) => these.push(id),
            }
        }
    });
}

/// At a commit, the notes wake waiters; otherwise they are forgotten.
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
        // SAFETY: MyDatabaseId is set when the backend connects to its
        // database and never changes after.
        XACT_EVENT_COMMIT => at_commit(unsafe { pg_sys::MyDatabaseId }),
        XACT_EVENT_ABORT | XACT_EVENT_PREPARE | XACT_EVENT_PARALLEL_ABORT => {
            NOTES.with_borrow_mut(HashMap::clear);
            ENDED.with_borrow_mut(std::mem::take);
        }
        _ => {}
    }
}

/// The transaction committed in `database`: wakes the waiters its notes
/// call for.
fn at_commit(database: pg_sys::Oid) {
    let notes = NOTES.with_borrow_mut(std::mem::take);
    let ended = ENDED.with_borrow_mut(std::mem::take);
    let Some(header) = header() else {
        return;
    };
    if header.waiting.load(Ordering::SeqCst) == 0 {
        return;
    }
    let now = crate::time::now_us();
    if header.awaiting.load(Ordering::SeqCst) > 0 {
        wake_awaiters(database, ended, now);
    }
    for (queue, note) in notes {
        if note.all {
            wake(database, Target::Queue(queue), None, now);
            continue;
        }
        if note.due_now > 0 {
            wake(database, Target::Queue(queue), Some(note.due_now), now);
        }
        for (at, jobs) in note.later {
            wake(database, Target::Queue(queue), Some(jobs), at);
        }
        if note.ended > 0 {
            wake(database, Target::Held(queue), Some(note.ended), now);
        }
    }
}

/// Wakes the awaiters in `database` of the jobs `ended`.
fn wake_awaiters(database: pg_sys::Oid, ended: EndedJobs, now: i64) {
    let ended: Option<std::collections::HashSet<i64>> = match ended {
        EndedJobs::None => return,
        EndedJobs::These(ids) => Some(ids.into_iter().collect()),
        EndedJobs::Many => None,
    };
    for (procno, slot) in waiting_in(database) {
        let job = slot.job.load(Ordering::SeqCst);
        if job != 0 && ended.as_ref().is_none_or(|ids| ids.contains(&job)) {
            slot.wake_at.store(now.max(1), Ordering::SeqCst);
            shared::set_latch(procno as i32);
        }
    }
}

/// The slots of waiters in `database`, with their proc numbers.
fn waiting_in(database: pg_sys::Oid) -> impl Iterator<Item = (usize, &'static Slot)> {
    let database = database.to_u32();
    slots()
        .iter()
        .enumerate()
        .filter(move |(_, s)| s.database.load(Ordering::SeqCst) == database)
}

/// Wakes up to `count` waiters (None: all) of `target` in `database` for
/// jobs due at `at`: first those no commit has asked yet, then those asked
/// for a later time.
fn wake(database: pg_sys::Oid, target: Target, count: Option<usize>, at: i64) {
    let mut left = count.unwrap_or(usize::MAX);
    let passes: &[bool] = if count.is_some() {
        &[true, false]
    } else {
        &[false]
    };
    for &free_only in passes {
        for slot in waiting_in(database).filter(|(_, s)| target.matches(s)) {
            if left == 0 {
                return;
            }
            if claim_wake(slot.1, at, free_only, database.to_u32(), target) {
                shared::set_latch(slot.0 as i32);
                left = left.saturating_sub(1);
            }
        }
    }
}

/// Asks the waiter in `slot` to look at `at`: when no commit asked it yet
/// (`free_only`), or asked for a later time. False when it was asked for
/// `at` or earlier already, or left meanwhile.
fn claim_wake(slot: &Slot, at: i64, free_only: bool, database: u32, target: Target) -> bool {
    let was = slot.wake_at.load(Ordering::SeqCst);
    // Zero is free; otherwise it was asked for `was`.
    if was != 0 && (free_only || was <= at) {
        return false;
    }
    if slot
        .wake_at
        .compare_exchange(was, at, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    // it may have left between the look at its database and the exchange:
    // then take the wake-up back, for another waiter (`free` clears
    // wake_at after it marks the slot free, and hands on what it finds)
    let stayed = slot.database.load(Ordering::SeqCst) == database && target.matches(slot);
    if !stayed {
        let _ = slot
            .wake_at
            .compare_exchange(at, was, Ordering::SeqCst, Ordering::SeqCst);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::QueueNote;

    /// Enqueues in one transaction, each at another time: those due by
    /// then are one count, the later ones at most 16 times, every job
    /// counted. (Before 0.4 the 17th note of a transaction woke every
    /// waiter of every queue in the database.)
    #[test]
    fn a_queue_note_stays_bounded_and_counts_every_job() {
        let now = 1_000_000;
        let mut note = QueueNote::default();
        for n in 0..1_000 {
            note.due(1, now - n, now);
        }
        assert_eq!(note.due_now, 1_000);
        assert!(note.later.is_empty());
        for n in 1..=100 {
            note.due(2, now + n * 1_000, now);
        }
        note.due(1, now + 1_000, now);
        assert_eq!(note.later.len(), super::TIMES_PER_QUEUE);
        assert_eq!(note.later.iter().map(|(_, jobs)| jobs).sum::<usize>(), 201);
        assert_eq!(
            note.later.iter().map(|(at, _)| *at).min(),
            Some(now + 1_000)
        );
    }
}
