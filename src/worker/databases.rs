//! The databases the launcher knows, in shared memory: an open-addressing
//! hash table keyed by oid, sized at server start by queue.max_databases.
//!
//! It is guarded by the lock of `SHARED`: entries are looked up with the
//! lock held in share mode (a committing backend looks up its own database,
//! one probe), and added, changed or removed with it held exclusively. The
//! few fields that a commit changes while holding the lock in share mode
//! are atomics.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

use pgrx::pg_sys::Oid;

use super::segments::Segment;
use crate::gucs;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Installed {
    Unknown = 0,
    Yes = 1,
    No = 2,
}

/// One database. `oid` INVALID marks a free entry.
#[repr(C)]
pub struct Database {
    pub oid: Oid,
    installed: AtomicU8,
    /// Seen by a scan of pg_database, and whether it was connectable and
    /// not a template then.
    pub scanned: bool,
    pub servable: bool,
    /// Since when it wants a worker (its place in the line); 0: it does not.
    pub wanted_since: AtomicI64,
    /// When it needs a worker without any commit asking (a scheduled job
    /// falls due, a lease expires, its upkeep is due); 0: never.
    pub due_at: AtomicI64,
    /// No worker before this time (after a worker that failed).
    pub not_before: i64,
    pub failures: u32,
    /// A command needs the database without a worker until then.
    pub blocked_until: i64,
    /// No job can be left in flight by a stopped worker: one recovered the
    /// database since shared memory was set up (at server start, and after
    /// a crash), and every worker since exited cleanly, between rounds.
    /// Else the next worker looks for such jobs first.
    pub recovered: bool,
    /// It wants a worker because something fell due (a visit), not because
    /// a commit asked: its worker leaves as soon as nothing is due, unless
    /// it gets work meanwhile.
    pub visit: bool,
    /// When its queue_maintain() is owed (its last worker moved jobs, a
    /// pull queue's commit changed something, or a retention cleanup falls
    /// due); 0: nothing owed. The next worker runs it from then on.
    pub upkeep_at: AtomicI64,
    /// Its worker's last round found full batches: it may get helpers.
    pub busy: bool,
    /// A committed transaction changed its schedules: its worker looks at
    /// their next ticks again.
    pub schedules_changed: AtomicBool,
}

impl Database {
    fn free() -> Database {
        Database {
            oid: Oid::INVALID,
            installed: AtomicU8::new(Installed::Unknown as u8),
            scanned: false,
            servable: false,
            wanted_since: AtomicI64::new(0),
            due_at: AtomicI64::new(0),
            not_before: 0,
            failures: 0,
            blocked_until: 0,
            recovered: false,
            visit: false,
            upkeep_at: AtomicI64::new(0),
            busy: false,
            schedules_changed: AtomicBool::new(false),
        }
    }

    pub fn installed(&self) -> Installed {
        match self.installed.load(Ordering::Relaxed) {
            1 => Installed::Yes,
            2 => Installed::No,
            _ => Installed::Unknown,
        }
    }

    pub fn set_installed(&self, installed: Installed) {
        self.installed.store(installed as u8, Ordering::Relaxed);
    }

    /// Puts the database in the line for a worker, unless it already is.
    pub fn want(&self, now: i64) {
        let _ = self
            .wanted_since
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub fn wanted(&self) -> bool {
        self.wanted_since.load(Ordering::Relaxed) > 0
    }

    /// It needs a worker at `at` at the latest.
    pub fn due_by(&self, at: i64) {
        earliest(&self.due_at, at);
    }

    /// Its upkeep is owed from `at` at the latest (the earlier time wins).
    pub fn owe_upkeep_by(&self, at: i64) {
        earliest(&self.upkeep_at, at);
    }

    /// Wants a worker, is allowed one now, and its extension is not known
    /// to be missing.
    pub fn waiting(&self, now: i64) -> bool {
        self.oid != Oid::INVALID
            && self.servable
            && self.installed() != Installed::No
            && self.wanted()
            && self.blocked_until <= now
    }

    fn take_from(&mut self, other: &Database) {
        *self = Database {
            oid: other.oid,
            installed: AtomicU8::new(other.installed.load(Ordering::Relaxed)),
            scanned: other.scanned,
            servable: other.servable,
            wanted_since: AtomicI64::new(other.wanted_since.load(Ordering::Relaxed)),
            due_at: AtomicI64::new(other.due_at.load(Ordering::Relaxed)),
            not_before: other.not_before,
            failures: other.failures,
            blocked_until: other.blocked_until,
            recovered: other.recovered,
            visit: other.visit,
            upkeep_at: AtomicI64::new(other.upkeep_at.load(Ordering::Relaxed)),
            busy: other.busy,
            schedules_changed: AtomicBool::new(other.schedules_changed.load(Ordering::Relaxed)),
        };
    }
}

/// Sets `time` (0: none) to `at` unless it holds an earlier time already.
fn earliest(time: &AtomicI64, at: i64) {
    let at = at.max(1);
    let _ = time.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
        (was == 0 || at < was).then_some(at)
    });
}

/// The table, mapped at the same address in every process (the postmaster
/// sets it up before it forks any).
static TABLE: AtomicPtr<Database> = AtomicPtr::new(std::ptr::null_mut());
/// Its number of entries, a power of two, twice queue.max_databases or
/// more, so that probes stay short.
static CAPACITY: AtomicUsize = AtomicUsize::new(0);

fn capacity_for(max_databases: usize) -> usize {
    (max_databases * 2).next_power_of_two()
}

fn bytes() -> usize {
    capacity_for(gucs::MAX_DATABASES.get() as usize) * std::mem::size_of::<Database>()
}

/// The table's shared memory (segments.rs).
pub static SEGMENT: Segment = Segment {
    name: c"queue databases",
    bytes,
    attach,
};

/// Makes the table (`found`: finds it) in `memory`, of bytes() bytes.
fn attach(memory: *mut u8, found: bool) {
    let table = memory as *mut Database;
    let capacity = capacity_for(gucs::MAX_DATABASES.get() as usize);
    if !found {
        for i in 0..capacity {
            // SAFETY: the memory holds `capacity` entries (bytes()), aligned
            // for any type; written only when it was just made, before any
            // other process can look at it.
            unsafe { table.add(i).write(Database::free()) };
        }
    }
    TABLE.store(table, Ordering::Release);
    CAPACITY.store(capacity, Ordering::Release);
}

fn home(oid: Oid, capacity: usize) -> usize {
    (oid.to_u32().wrapping_mul(0x9E37_79B1) as usize) & (capacity - 1)
}

/// The entries, free ones included. Callers hold SHARED's lock (the
/// accessors in shared.rs take the guard's reference as proof).
pub(super) fn entries<'a>() -> &'a [Database] {
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() {
        return &[];
    }
    // SAFETY: startup() set TABLE to `CAPACITY` initialized entries in
    // shared memory that lives as long as the server; readers hold SHARED's
    // lock in share mode, so no writer (exclusive mode) changes the
    // non-atomic fields meanwhile.
    unsafe { std::slice::from_raw_parts(table, CAPACITY.load(Ordering::Acquire)) }
}

/// The entries, to change. The caller holds SHARED's lock exclusively.
pub(super) fn entries_mut<'a>() -> &'a mut [Database] {
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() {
        return &mut [];
    }
    // SAFETY: as in entries(); the exclusive lock means that no other
    // process reads or writes any entry meanwhile.
    unsafe { std::slice::from_raw_parts_mut(table, CAPACITY.load(Ordering::Acquire)) }
}

/// Where `oid` is, or the free entry where the probe for it ends.
fn probe(table: &[Database], oid: Oid) -> Option<usize> {
    let capacity = table.len();
    if capacity == 0 {
        return None;
    }
    let mut at = home(oid, capacity);
    for _ in 0..capacity {
        if table[at].oid == oid || table[at].oid == Oid::INVALID {
            return Some(at);
        }
        at = (at + 1) & (capacity - 1);
    }
    None
}

pub(super) fn find(table: &[Database], oid: Oid) -> Option<usize> {
    probe(table, oid).filter(|&at| table[at].oid == oid && oid != Oid::INVALID)
}

/// The entry of `oid`, made if need be; None when queue.max_databases
/// databases are known already.
pub(super) fn find_or_add(table: &mut [Database], oid: Oid) -> Option<usize> {
    let at = probe(table, oid)?;
    if table[at].oid == oid {
        return Some(at);
    }
    let used = table.iter().filter(|d| d.oid != Oid::INVALID).count();
    if used >= gucs::MAX_DATABASES.get() as usize {
        return None;
    }
    table[at] = Database {
        oid,
        ..Database::free()
    };
    Some(at)
}

/// Removes the entry at `at`, moving later entries of the same probe run
/// back so that every lookup still finds them (no tombstones).
pub(super) fn remove(table: &mut [Database], at: usize) {
    let capacity = table.len();
    let mut hole = at;
    let mut next = at;
    loop {
        next = (next + 1) & (capacity - 1);
        if table[next].oid == Oid::INVALID {
            break;
        }
        let want = home(table[next].oid, capacity);
        // the entry stays when its home lies cyclically in (hole, next]
        let stays = if hole <= next {
            hole < want && want <= next
        } else {
            hole < want || want <= next
        };
        if !stays {
            let (moved, rest) = if hole < next {
                let (low, high) = table.split_at_mut(next);
                (&mut low[hole], &high[0])
            } else {
                let (low, high) = table.split_at_mut(hole);
                (&mut high[0], &low[next])
            };
            moved.take_from(rest);
            hole = next;
        }
    }
    table[hole] = Database::free();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(capacity: usize) -> Vec<Database> {
        (0..capacity).map(|_| Database::free()).collect()
    }

    fn add(t: &mut [Database], oid: u32) {
        let at = probe(t, Oid::from(oid)).unwrap();
        t[at].oid = Oid::from(oid);
    }

    #[test]
    fn removal_keeps_every_other_entry_reachable() {
        // oids that collide in a table of 8, plus neighbours
        let mut t = table(8);
        let oids: Vec<u32> = (1..200)
            .filter(|o| home(Oid::from(*o), 8) == 3)
            .take(3)
            .collect();
        let others = [home_of(4), home_of(5)];
        for &o in oids.iter().chain(others.iter()) {
            add(&mut t, o);
        }
        let gone = oids[0];
        let at = find(&t, Oid::from(gone)).unwrap();
        remove(&mut t, at);
        assert!(find(&t, Oid::from(gone)).is_none());
        for &o in oids[1..].iter().chain(others.iter()) {
            assert!(find(&t, Oid::from(o)).is_some(), "oid {o} is still found");
        }
        assert_eq!(t.iter().filter(|d| d.oid != Oid::INVALID).count(), 4);
    }

    /// The first oid whose home in a table of 8 is `slot`.
    fn home_of(slot: usize) -> u32 {
        (1000..).find(|o| home(Oid::from(*o), 8) == slot).unwrap()
    }

    #[test]
    fn removal_wraps_around_the_end() {
        let mut t = table(8);
        let at_end: Vec<u32> = (1..500)
            .filter(|o| home(Oid::from(*o), 8) == 7)
            .take(3)
            .collect();
        for &o in &at_end {
            add(&mut t, o);
        }
        let at = find(&t, Oid::from(at_end[0])).unwrap();
        remove(&mut t, at);
        for &o in &at_end[1..] {
            assert!(find(&t, Oid::from(o)).is_some());
        }
    }
}
