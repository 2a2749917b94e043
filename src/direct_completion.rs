//! One `queue_complete(id, lease)` without the executor.
//!
//! complete.sql costs about 35 µs a call even when it finds nothing: the
//! set-up of its three writing nodes (BENCHMARKS.md, item 4c). For a job of
//! a queue that keeps no history, in a READ COMMITTED transaction that may
//! write, a call here does that statement's work through the access
//! methods, as PostgreSQL's catalog code does:
//! - it locks the tables as the statement would, then takes its snapshot
//!   (so that a rotation that committed meanwhile is seen whole);
//! - it finds the job through the `id` index of each live partition and
//!   checks its lease;
//! - it deletes it; a concurrent change is waited for and the newest
//!   version checked again, as the statement's DELETE does in READ
//!   COMMITTED (an extended lease still completes, a lost one does not);
//! - it appends the job's tally row to `queue_tallies` (no index).
//!
//! Every other case runs the statement: a queue that keeps history (or is
//! gone), another isolation level, a read-only transaction or parallel
//! mode, triggers, rules or row security added to these tables, an index
//! or a CHECK constraint added to `queue_tallies` (the insert here would
//! not maintain or check it), an `id` index that is not valid, ready and
//! live, and tables not shaped as this code expects. (The checks a DELETE
//! makes that still apply here are made here: a publication's need for a
//! replica identity.)
//!
//! What it knows of the tables (oids, column numbers, the index) follows
//! the catalog as PostgreSQL's relation cache does: a relation cache
//! invalidation of any relation it looked at (REINDEX, ALTER TABLE, a new
//! index or constraint, VACUUM's statistics) makes it look them up again.
//! PostgreSQL delivers the invalidations of other sessions' commits when a
//! lock is taken, so a call checks again, once it holds its locks, that
//! nothing it relies on changed meanwhile.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;

use pgrx::datum::Uuid;
use pgrx::pg_sys::{self, Oid};

use crate::catalog;
use crate::db;
use crate::errors::QueueError;
use crate::versions;

/// A live partition as this code reads it: its oid, its index on `id`
/// alone, and the numbers of the columns it reads.
#[derive(Clone, Copy)]
struct Partition {
    oid: Oid,
    id_index: Oid,
    queue_id: i16,
    lease: i16,
    has_children: i16,
}

#[derive(Clone, Copy)]
struct Tables {
    live: Oid,
    partitions: [Partition; 2],
    tallies: Oid,
}

/// The columns of `queue_tallies`, in order: the row `tally` writes.
const TALLY_COLUMNS: [(&CStr, Oid); 9] = [
    (c"queue_id", pg_sys::INT4OID),
    (c"slot", pg_sys::INT2OID),
    (c"enqueued_total", pg_sys::INT8OID),
    (c"succeeded_total", pg_sys::INT8OID),
    (c"failed_total", pg_sys::INT8OID),
    (c"succeeded", pg_sys::INT8OID),
    (c"cancelled", pg_sys::INT8OID),
    (c"failed", pg_sys::INT8OID),
    (c"live", pg_sys::INT8OID),
];

thread_local! {
    /// The tables, looked up until a relation they were looked up from
    /// changes; `Some(None)`: they are not as this code expects, and every
    /// call runs the statement until one of them changes.
    static TABLES: Cell<Option<Option<Tables>>> = const { Cell::new(None) };
    /// Every relation that the look-up of TABLES read, each added before
    /// it is opened: a relation cache invalidation of one of them forgets
    /// TABLES.
    static WATCHED: RefCell<Vec<Oid>> = const { RefCell::new(Vec::new()) };
    /// Counts what `relation_changed` forgot: a look-up or a call that saw
    /// it move while it read the tables or took its locks looks again.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// `relation_changed` is registered in this backend.
    static CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// How many completions this backend answered here (the tests read it).
    static ANSWERED: Cell<u64> = const { Cell::new(0) };
}

/// How many calls this backend answered without the statement so far.
#[cfg(any(test, feature = "pg_test"))]
pub fn answered() -> u64 {
    ANSWERED.get()
}

fn forget_tables() {
    TABLES.set(None);
    WATCHED.with(|w| {
        if let Ok(mut watched) = w.try_borrow_mut() {
            watched.clear();
        }
    });
    GENERATION.set(GENERATION.get() + 1);
}

/// A relation cache invalidation: forget the tables when it concerns a
/// relation they were looked up from, or every relation.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the relation cache callback that `tables`
/// registers, with the oid of the relation invalidated.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relid: Oid) {
    let watched = WATCHED.try_with(|w| w.try_borrow().map(|w| w.contains(&relid)));
    let watched = !matches!(watched, Ok(Ok(false)));
    if relid == Oid::INVALID || watched {
        forget_tables();
    }
}

/// What `complete` did.
pub enum Outcome {
    /// The job, of this queue, succeeded.
    Completed { queue_id: i32 },
    /// Its lease is not held (or it is not there).
    NotHeld,
    /// Not done here: the caller runs the statement instead.
    UseStatement,
}

/// Completes job `id` under `lease` as complete.sql does with status
/// 'succeeded', where it can.
pub fn complete(id: i64, lease: Uuid) -> Outcome {
    complete_many(&[(id, lease)])
        .and_then(|mut outcomes| outcomes.pop())
        .unwrap_or(Outcome::UseStatement)
}

/// `complete` for each (id, lease) pair, with the tables opened once and
/// one snapshot, as one statement of complete.sql would (queue_complete_
/// batch); one outcome per pair, in order. None: every pair is for the
/// statement (another isolation level, tables not as expected).
pub fn complete_many(pairs: &[(i64, Uuid)]) -> Option<Vec<Outcome>> {
    // SAFETY: plain reads of this backend's transaction state.
    let plain =
        db::read_committed() && unsafe { !pg_sys::XactReadOnly && !pg_sys::IsInParallelMode() };
    if !plain {
        return None;
    }
    // Takes in changes committed meanwhile: a queue's new retention, a rebuilt index.
    db::accept_invalidations();
    let open = open()?;
    let mut tallied: Vec<(i32, i64)> = Vec::new();
    let outcomes: Vec<Outcome> = pairs
        .iter()
        .map(|(id, lease)| {
            let lease = *lease.as_bytes();
            match open.find(*id, &lease) {
                None => Outcome::NotHeld,
                Some(found) => {
                    match keeps_history(found.queue_id) {
                        Some(false) if !found.has_children => {}
                        _ => return Outcome::UseStatement,
                    }
                    if open.delete(&found, &lease) {
                        match tallied.iter_mut().find(|(q, _)| *q == found.queue_id) {
                            Some((_, n)) => *n += 1,
                            None => tallied.push((found.queue_id, 1)),
                        }
                        Outcome::Completed {
                            queue_id: found.queue_id,
                        }
                    } else {
                        Outcome::NotHeld
                    }
                }
            }
        })
        .collect();
    for (queue_id, jobs) in tallied {
        open.tally(queue_id, jobs);
    }
    let answered = outcomes
        .iter()
        .filter(|o| !matches!(o, Outcome::UseStatement))
        .count();
    ANSWERED.set(ANSWERED.get() + answered as u64);
    Some(outcomes)
}

/// Whether queue `queue_id` keeps history (catalog.rs's cache of queues);
/// None when it is gone.
fn keeps_history(queue_id: i32) -> Option<bool> {
    catalog::cached_by_id(queue_id)
        .or_else(|| db::with_tables(|client| catalog::find_by_id(client, queue_id)))
        .map(|q| q.keeps_history)
}

/// The tables opened and locked for one call, as they are now: a change
/// that reached this backend while the locks were taken makes it look the
/// tables up again (a few times at most: each look ends with the locks
/// held, so only the relations a look-up newly found can still move).
fn open() -> Option<Open> {
    for _ in 0..4 {
        let tables = tables()?;
        let generation = GENERATION.get();
        match Open::tables(tables, generation) {
            Opened::Open(open) => return Some(open),
            Opened::Unfit => return None,
            Opened::Changed => continue,
        }
    }
    None
}

fn tables() -> Option<Tables> {
    if let Some(found) = TABLES.get() {
        return found;
    }
    let schema = db::schema();
    db::forget_with_extension(forget_tables);
    if !CALLBACK.replace(true) {
        // SAFETY: registered once per backend (CALLBACK), as PostgreSQL's
        // table of relcache callbacks is small and never shrinks;
        // relation_changed has the callback's signature and lives as long
        // as the process (the library is never unloaded).
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0))
        };
    }
    // A relation that changed while it was read is read again; a few
    // tries, then this call runs the statement and the next looks again.
    for _ in 0..4 {
        forget_tables();
        let generation = GENERATION.get();
        let found = look_up(schema);
        if GENERATION.get() == generation {
            TABLES.set(Some(found));
            return found;
        }
    }
    None
}

/// Watches `oid` (WATCHED) from now on.
fn watch(oid: Oid) {
    WATCHED.with(|w| w.borrow_mut().push(oid));
}

/// The tables as this code needs them, or None.
fn look_up(schema: Oid) -> Option<Tables> {
    let tallies = relation(c"queue_tallies", schema)?;
    for (at, (name, type_oid)) in TALLY_COLUMNS.iter().enumerate() {
        if column(tallies, name, *type_oid)? as usize != at + 1 {
            return None;
        }
    }
    // SAFETY: opens and closes the table with the same lock, inside the
    // caller's transaction; rd_att, its constr and rd_rel are valid while
    // it is open; the index list is a copy that is only measured.
    let plain = unsafe {
        let rel = pg_sys::table_open(tallies, pg_sys::AccessShareLock as _);
        let desc = (*rel).rd_att;
        let constr = (*desc).constr;
        let plain = (*(*rel).rd_rel).relam == pg_sys::HEAP_TABLE_AM_OID
            && (*desc).natts == TALLY_COLUMNS.len() as i32
            && (constr.is_null() || (*constr).num_check == 0)
            && pg_sys::RelationGetIndexList(rel).is_null();
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        plain
    };
    if !plain {
        return None;
    }
    Some(Tables {
        live: relation(c"queue_live", schema)?,
        partitions: [
            partition(c"queue_live_0", schema)?,
            partition(c"queue_live_1", schema)?,
        ],
        tallies,
    })
}

/// The relation `name` of `schema`, watched.
fn relation(name: &CStr, schema: Oid) -> Option<Oid> {
    // SAFETY: a syscache look-up with a NUL-terminated name, inside the
    // caller's transaction; a missing relation gives InvalidOid.
    let oid = unsafe { pg_sys::get_relname_relid(name.as_ptr(), schema) };
    (oid != Oid::INVALID).then(|| {
        watch(oid);
        oid
    })
}

/// The number of column `name` of `rel` if it has type `type_oid`.
fn column(rel: Oid, name: &CStr, type_oid: Oid) -> Option<i16> {
    // SAFETY: syscache look-ups inside the caller's transaction; a missing
    // or dropped column gives InvalidAttrNumber (0).
    unsafe {
        let at = pg_sys::get_attnum(rel, name.as_ptr());
        (at > 0 && pg_sys::get_atttype(rel, at) == type_oid).then_some(at)
    }
}

fn partition(name: &CStr, schema: Oid) -> Option<Partition> {
    let oid = relation(name, schema)?;
    let id = column(oid, c"id", pg_sys::INT8OID)?;
    let id_index = id_index(oid, id)?;
    Some(Partition {
        oid,
        id_index,
        queue_id: column(oid, c"queue_id", pg_sys::INT4OID)?,
        lease: column(oid, c"lease", pg_sys::UUIDOID)?,
        has_children: column(oid, c"has_children", pg_sys::BOOLOID)?,
    })
}

/// A valid b-tree index of `table` on column `id` alone, without a
/// predicate. Every index of the table is watched.
fn id_index(table: Oid, id: i16) -> Option<Oid> {
    // SAFETY: inside the caller's transaction. Every relation opened here
    // is closed with the lock it was opened with; RelationGetIndexList
    // returns a list of oids that this code only reads; rd_index and
    // rd_rel are valid while the index is open, and indkey has indnatts
    // elements.
    unsafe {
        let rel = pg_sys::table_open(table, pg_sys::AccessShareLock as _);
        let indexes = pg_sys::RelationGetIndexList(rel);
        let mut found = None;
        let n = if indexes.is_null() {
            0
        } else {
            (*indexes).length
        };
        for at in 0..n {
            let oid = (*(*indexes).elements.add(at as usize)).oid_value;
            watch(oid);
            if found.is_some() {
                continue;
            }
            let index = pg_sys::index_open(oid, pg_sys::AccessShareLock as _);
            let form = (*index).rd_index;
            let fits = (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID
                && (*form).indnatts == 1
                && usable(index)
                && *(*form).indkey.values.as_ptr() == id
                && pg_sys::RelationGetIndexPredicate(index).is_null()
                && pg_sys::RelationGetIndexExpressions(index).is_null();
            pg_sys::index_close(index, pg_sys::AccessShareLock as _);
            if fits {
                found = Some(oid);
            }
        }
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        found
    }
}

/// A job found under its lease: where it is and its queue.
struct Found {
    partition: usize,
    tid: pg_sys::ItemPointerData,
    queue_id: i32,
    /// Jobs wait for it: its end settles them (the statement does).
    has_children: bool,
}

/// A live partition opened for one call, with its id index and a slot.
struct OpenPartition {
    rel: pg_sys::Relation,
    index: pg_sys::Relation,
    slot: *mut pg_sys::TupleTableSlot,
    columns: Partition,
}

/// The tables of one call, locked as complete.sql locks them, and the
/// snapshot taken after the locks. Drop closes them (keeping the locks to
/// the end of the transaction, as the executor does); on an error the
/// transaction's abort releases all of it.
struct Open {
    live: pg_sys::Relation,
    partitions: Vec<OpenPartition>,
    tallies: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
}

const WRITE_LOCK: pg_sys::LOCKMODE = pg_sys::RowExclusiveLock as _;

/// What opening the tables for a call gave.
enum Opened {
    Open(Open),
    /// Not as this code expects: run the statement.
    Unfit,
    /// A relation they were looked up from changed meanwhile: look again.
    Changed,
}

/// Whether an index may be used: valid, ready and live (an index that
/// CREATE INDEX CONCURRENTLY is building, or that REINDEX CONCURRENTLY or
/// DROP INDEX CONCURRENTLY is taking away, is not).
///
/// # Safety
///
/// `index` is open.
unsafe fn usable(index: pg_sys::Relation) -> bool {
    // SAFETY: as the caller promises, index and its rd_index are valid.
    unsafe {
        let form = (*index).rd_index;
        (*form).indisvalid && (*form).indisready && (*form).indislive
    }
}

/// Whether a table has anything the executor would apply to a write that
/// this code does not: triggers, rules, row security.
///
/// # Safety
///
/// `rel` is open.
unsafe fn plain_table(rel: pg_sys::Relation) -> bool {
    // SAFETY: as the caller promises, rel and its rd_rel are valid.
    unsafe {
        (*rel).trigdesc.is_null() && (*rel).rd_rules.is_null() && !(*(*rel).rd_rel).relrowsecurity
    }
}

impl Open {
    /// Opens `tables`, looked up when GENERATION was `generation`.
    fn tables(tables: Tables, generation: u64) -> Opened {
        let changed = || GENERATION.get() != generation;
        // SAFETY: inside the caller's transaction. Each relation is opened
        // with the lock complete.sql takes on it (RowExclusiveLock on the
        // tables it writes and on the indexes of the table it deletes from)
        // and closed by Drop, also when this returns early. Taking a lock
        // delivers the invalidations sent before it, so once the tables are
        // locked and nothing they were looked up from changed (GENERATION),
        // their oids and their lists of indexes are current and stay so: a
        // change to them needs a lock that conflicts with ours, and the
        // concurrent forms of REINDEX and DROP INDEX wait for this
        // transaction before they take an index away. Only then are the
        // indexes opened. The snapshot is registered (a copy, so that later
        // snapshots do not overwrite it) and unregistered by Drop. An error
        // raised meanwhile (a lock, the replica identity check) leaves all
        // of it to the transaction's abort.
        unsafe {
            let mut open = Open {
                live: pg_sys::table_open(tables.live, WRITE_LOCK),
                partitions: Vec::with_capacity(2),
                tallies: std::ptr::null_mut(),
                snapshot: std::ptr::null_mut(),
            };
            for columns in tables.partitions {
                let rel = pg_sys::table_open(columns.oid, WRITE_LOCK);
                open.partitions.push(OpenPartition {
                    rel,
                    index: std::ptr::null_mut(),
                    slot: pg_sys::table_slot_create(rel, std::ptr::null_mut()),
                    columns,
                });
            }
            open.tallies = pg_sys::table_open(tables.tallies, WRITE_LOCK);
            if changed() {
                return Opened::Changed;
            }
            for p in &mut open.partitions {
                p.index = pg_sys::index_open(p.columns.id_index, WRITE_LOCK);
            }
            if changed() {
                return Opened::Changed;
            }
            let plain = plain_table(open.live)
                && plain_table(open.tallies)
                && open
                    .partitions
                    .iter()
                    .all(|p| plain_table(p.rel) && usable(p.index));
            if !plain {
                return Opened::Unfit;
            }
            // A publication that publishes deletes from a table without a
            // replica identity refuses them, as for the statement.
            for p in &open.partitions {
                pg_sys::CheckCmdReplicaIdentity(p.rel, pg_sys::CmdType::CMD_DELETE);
            }
            // What earlier commands of this transaction wrote (a claim in
            // the same statement) is seen, as by the statement's own
            // command.
            pg_sys::CommandCounterIncrement();
            open.snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            Opened::Open(open)
        }
    }

    /// The job `id` if it holds `lease` now.
    fn find(&self, id: i64, lease: &[u8; 16]) -> Option<Found> {
        for (at, p) in self.partitions.iter().enumerate() {
            // SAFETY: the relations are open and locked and the snapshot
            // registered (Open); the scan key outlives the scan, which
            // ends here. The slot is the partition's own; what it holds is
            // read before the next tuple replaces it.
            unsafe {
                let mut key = pg_sys::ScanKeyData::default();
                pg_sys::ScanKeyInit(
                    &mut key,
                    1,
                    pg_sys::BTEqualStrategyNumber as _,
                    Oid::from(pg_sys::F_INT8EQ),
                    pg_sys::Datum::from(id),
                );
                let scan = versions::index_beginscan(p.rel, p.index, self.snapshot);
                pg_sys::index_rescan(scan, &mut key, 1, std::ptr::null_mut(), 0);
                let mut found = None;
                while pg_sys::index_getnext_slot(
                    scan,
                    pg_sys::ScanDirection::ForwardScanDirection,
                    p.slot,
                ) {
                    if holds(p, lease) {
                        found = Some(Found {
                            partition: at,
                            tid: (*p.slot).tts_tid,
                            queue_id: int4(p.slot, p.columns.queue_id),
                            has_children: boolean(p.slot, p.columns.has_children),
                        });
                        break;
                    }
                }
                pg_sys::index_endscan(scan);
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// Deletes the job found, unless a concurrent change took its lease
    /// first; whether it did.
    fn delete(&self, found: &Found, lease: &[u8; 16]) -> bool {
        let p = &self.partitions[found.partition];
        let mut tid = found.tid;
        loop {
            let mut failure = pg_sys::TM_FailureData::default();
            // SAFETY: the partition is open with RowExclusiveLock, `tid`
            // names a version of the job that the snapshot saw (or, after
            // the lock below, its newest version); `failure` is a local
            // the access method fills in.
            let result = unsafe {
                pg_sys::table_tuple_delete(
                    p.rel,
                    &mut tid,
                    pg_sys::GetCurrentCommandId(true),
                    self.snapshot,
                    std::ptr::null_mut(),
                    true,
                    &mut failure,
                    false,
                )
            };
            match result {
                pg_sys::TM_Result::TM_Ok => return true,
                // Deleted by a cancel, a completion or a burial that
                // committed first, or by this transaction already.
                pg_sys::TM_Result::TM_Deleted | pg_sys::TM_Result::TM_SelfModified => return false,
                pg_sys::TM_Result::TM_Updated => {}
                other => unexpected("deleting", other),
            }
            // Changed by a transaction that committed meanwhile: lock the
            // newest version and look at its lease again.
            // SAFETY: as above; the slot is the partition's own and
            // receives the newest version, locked.
            let locked = unsafe {
                pg_sys::table_tuple_lock(
                    p.rel,
                    &mut tid,
                    self.snapshot,
                    p.slot,
                    pg_sys::GetCurrentCommandId(true),
                    pg_sys::LockTupleMode::LockTupleExclusive,
                    pg_sys::LockWaitPolicy::LockWaitBlock,
                    pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION as u8,
                    &mut failure,
                )
            };
            match locked {
                // SAFETY: the slot holds the version just locked.
                pg_sys::TM_Result::TM_Ok => unsafe {
                    if !holds(p, lease) {
                        return false;
                    }
                    tid = (*p.slot).tts_tid;
                },
                pg_sys::TM_Result::TM_Deleted | pg_sys::TM_Result::TM_SelfModified => return false,
                other => unexpected("locking", other),
            }
        }
    }

    /// Appends the tally of `jobs` jobs of `queue_id` succeeded and not
    /// kept, as complete.sql's `tally` does (slot -1).
    fn tally(&self, queue_id: i32, jobs: i64) {
        let mut values = [
            pg_sys::Datum::from(queue_id),
            pg_sys::Datum::from(-1i16),
            pg_sys::Datum::from(0i64),
            pg_sys::Datum::from(jobs),
            pg_sys::Datum::from(0i64),
            pg_sys::Datum::from(0i64),
            pg_sys::Datum::from(0i64),
            pg_sys::Datum::from(0i64),
            pg_sys::Datum::from(-jobs),
        ];
        let mut nulls = [false; TALLY_COLUMNS.len()];
        // SAFETY: queue_tallies is open with RowExclusiveLock, a heap table
        // of exactly these nine columns of these types, all by value
        // (look_up checked it); the tuple is formed, inserted and freed
        // here.
        unsafe {
            let tuple = pg_sys::heap_form_tuple(
                (*self.tallies).rd_att,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            );
            pg_sys::simple_heap_insert(self.tallies, tuple);
            pg_sys::heap_freetuple(tuple);
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        // On error the (sub)transaction's abort releases the relations,
        // the slots' buffer pins and the snapshot.
        if std::thread::panicking() {
            return;
        }
        // SAFETY: releases what Open::tables acquired, once; NoLock keeps
        // the locks to the end of the transaction.
        unsafe {
            if !self.snapshot.is_null() {
                pg_sys::UnregisterSnapshot(self.snapshot);
            }
            if !self.tallies.is_null() {
                pg_sys::table_close(self.tallies, pg_sys::NoLock as _);
            }
            for p in &self.partitions {
                pg_sys::ExecDropSingleTupleTableSlot(p.slot);
                if !p.index.is_null() {
                    pg_sys::index_close(p.index, pg_sys::NoLock as _);
                }
                pg_sys::table_close(p.rel, pg_sys::NoLock as _);
            }
            pg_sys::table_close(self.live, pg_sys::NoLock as _);
        }
    }
}

/// Whether the job in the partition's slot holds `lease`.
///
/// # Safety
///
/// The slot holds a tuple of the partition.
unsafe fn holds(p: &OpenPartition, lease: &[u8; 16]) -> bool {
    let mut null = false;
    // SAFETY: as the caller promises; a uuid datum points to its 16 bytes
    // inside the tuple, which the slot keeps pinned.
    unsafe {
        let datum = pg_sys::slot_getattr(p.slot, p.columns.lease as _, &mut null);
        !null && *datum.cast_mut_ptr::<[u8; 16]>() == *lease
    }
}

/// Column `at` of the tuple in `slot`, an integer that is never NULL.
///
/// # Safety
///
/// The slot holds a tuple whose column `at` is a NOT NULL int4.
unsafe fn int4(slot: *mut pg_sys::TupleTableSlot, at: i16) -> i32 {
    let mut null = false;
    // SAFETY: as the caller promises.
    unsafe { pg_sys::slot_getattr(slot, at as _, &mut null).value() as i32 }
}

/// Column `at` of the tuple in `slot`, a boolean that is never NULL.
///
/// # Safety
///
/// As for `int4`.
unsafe fn boolean(slot: *mut pg_sys::TupleTableSlot, at: i16) -> bool {
    let mut null = false;
    // SAFETY: as the caller promises.
    unsafe { pg_sys::slot_getattr(slot, at as _, &mut null).value() != 0 }
}

fn unexpected(what: &str, result: pg_sys::TM_Result::Type) -> ! {
    QueueError::StatementShape {
        statement: "direct_completion.rs",
        detail: format!("{what} a job gave the table access method's result {result}"),
    }
    .raise()
}
