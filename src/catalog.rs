//! Queues as the API sees them: looked up by name, with their policies.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::datum::Interval;
use pgrx::pg_sys::{self, Oid};
use pgrx::spi::SpiClient;

use crate::db::{self, args};
use crate::errors::QueueError;
use crate::policy::interval_micros;
use crate::queries;
use crate::rules;

#[derive(Clone)]
pub struct Queue {
    pub id: i32,
    pub name: String,
    pub owner: Oid,
    pub max_attempts: i32,
    pub lease_us: i64,
    pub paused: bool,
    /// The signature of its sender, when the background worker delivers it.
    pub sender: Option<String>,
    /// Groups, order and limits (docs/groups.md).
    pub limits: Limits,
    /// Whether finished jobs go to history (a retention above 0).
    pub keeps_history: bool,
}

/// What a claim of a queue must hold to: the options of docs/groups.md.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub ordered: bool,
    pub max_in_flight: Option<i32>,
    pub group_max_in_flight: Option<i32>,
    /// (jobs, window in microseconds)
    pub rate: Option<(i32, i64)>,
    pub group_rate: Option<(i32, i64)>,
}

impl Limits {
    fn of_row(row: &db::Row<'_>) -> Limits {
        let rate = |n: &str, window: &str| {
            let n: Option<i32> = row.get(n);
            n.zip(row.get::<Interval>(window).map(|w| micros(&w)))
        };
        Limits {
            ordered: row.value("ordered"),
            max_in_flight: row.get("max_in_flight"),
            group_max_in_flight: row.get("group_max_in_flight"),
            rate: rate("rate_limit", "rate_window"),
            group_rate: rate("group_rate_limit", "group_rate_window"),
        }
    }
}

pub fn micros(i: &Interval) -> i64 {
    interval_micros(i.months(), i.days(), i.micros())
}

/// The queue named `name`, if it exists. A name that breaks the naming rule
/// is an error, not a missing queue.
pub fn find(client: &mut SpiClient<'_>, name: &str) -> Result<Option<Queue>, QueueError> {
    find_by(client, name, db::run)
}

/// The runner of a statement: db::run, or db::read where the caller only
/// reads (and may be on a hot standby).
type Runner = for<'c> fn(
    &mut SpiClient<'c>,
    &'static db::Statement,
    (&[&str], &[pgrx::datum::DatumWithOid<'_>]),
) -> db::Rows<'c>;

fn find_by(
    client: &mut SpiClient<'_>,
    name: &str,
    runner: Runner,
) -> Result<Option<Queue>, QueueError> {
    rules::check_name(name)?;
    let row = runner(client, &queries::FIND_QUEUE, args![name = name]).first();
    Ok(row.map(|row| Queue::of_row(&row, name.to_string())))
}

/// `require` for a caller that only reads (db::read).
pub fn require_read(client: &mut SpiClient<'_>, name: &str) -> Result<Queue, QueueError> {
    find_by(client, name, db::read)?.ok_or_else(|| QueueError::UndefinedQueue {
        name: name.to_string(),
    })
}

/// The queue named `name`, or 42704.
pub fn require(client: &mut SpiClient<'_>, name: &str) -> Result<Queue, QueueError> {
    find(client, name)?.ok_or_else(|| QueueError::UndefinedQueue {
        name: name.to_string(),
    })
}

/// This backend's one cache of queues, by name and by id.
#[derive(Default)]
struct Cache {
    by_name: HashMap<String, Queue>,
    /// The names of the queues cached, by id.
    names: HashMap<i32, String>,
}

impl Cache {
    fn keep(&mut self, queue: &Queue) {
        self.names.insert(queue.id, queue.name.clone());
        self.by_name.insert(queue.name.clone(), queue.clone());
    }
}

thread_local! {
    /// Queues looked up by the hot paths (enqueue, claim, direct_completion.rs),
    /// kept until a change to any queue is announced (`forget_all`).
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// `require`, from this backend's cache when it can: an enqueue or a claim
/// then runs no statement to find its queue.
pub fn require_cached(client: &mut SpiClient<'_>, name: &str) -> Result<Queue, QueueError> {
    // Takes in a queue paused, altered or given a sender meanwhile.
    db::accept_invalidations();
    if let Some(queue) = CACHE.with(|c| c.borrow().by_name.get(name).cloned()) {
        return Ok(queue);
    }
    let queue = require(client, name)?;
    db::forget_with_extension(forget_all);
    CACHE.with(|c| c.borrow_mut().keep(&queue));
    Ok(queue)
}

/// The queue with id `id` if this backend has it cached (no statement, no
/// SPI connection: direct_completion.rs asks on every call). The caller has
/// accepted invalidations.
pub fn cached_by_id(id: i32) -> Option<Queue> {
    CACHE.with(|c| {
        let c = c.borrow();
        c.names
            .get(&id)
            .and_then(|name| c.by_name.get(name).cloned())
    })
}

/// The queue with id `id`, looked up and cached; None when it is gone.
pub fn find_by_id(client: &mut SpiClient<'_>, id: i32) -> Option<Queue> {
    let row = db::run(client, &queries::FIND_QUEUE_BY_ID, args![id = id]).first()?;
    Some(cache_row(&row))
}

/// The queue with id `id` as the latest committed change to a queue left
/// it: from this backend's cache when it has it (no statement), else
/// looked up and cached; None when it is gone.
pub fn by_id(client: &mut SpiClient<'_>, id: i32) -> Option<Queue> {
    db::accept_invalidations();
    cached_by_id(id).or_else(|| find_by_id(client, id))
}

/// Caches the queue of a row with find_queue_by_id.sql's columns (also the
/// worker's sender_queues.sql, so that its claims look no queue up).
pub fn cache_row(row: &db::Row<'_>) -> Queue {
    let queue = Queue::of_row(row, row.value("name"));
    db::forget_with_extension(forget_all);
    CACHE.with(|c| c.borrow_mut().keep(&queue));
    queue
}

/// Every backend forgets the queues it cached once the current transaction
/// commits (this one, at its next command). Called by a trigger on
/// `queue_queues` after every statement that writes it, whoever runs it. It
/// rides on PostgreSQL's invalidation of the table in the relation cache,
/// which reaches every backend, in order with the commit.
#[pgrx::pg_extern(volatile, parallel_unsafe)]
fn queue_queues_changed() {
    // SAFETY: an SQL function (called by the trigger on queue_queues), so
    // inside a transaction, as the invalidation requires; the oid is that
    // of queue_queues, which extension() just found in pg_class.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(db::queues_table()) };
}

/// Called on a relation cache invalidation of `queue_queues`, through
/// db::forget_with_extension.
fn forget_all() {
    CACHE.with(|c| *c.borrow_mut() = Cache::default());
}

impl Queue {
    /// A row of find_queue.sql (or find_queue_by_id.sql).
    fn of_row(row: &db::Row<'_>, name: String) -> Queue {
        Queue {
            id: row.value("id"),
            name,
            owner: row.value("owner"),
            max_attempts: row.value("max_attempts"),
            lease_us: micros(&row.value::<Interval>("lease")),
            paused: row.value("paused"),
            sender: row.get("sender"),
            limits: Limits::of_row(row),
            keeps_history: row.value("keeps_history"),
        }
    }

    /// 42501 unless `role` may administer this queue.
    pub fn check_owner(&self, role: Oid, action: &'static str) -> Result<(), QueueError> {
        if db::acts_as(role, self.owner) {
            Ok(())
        } else {
            Err(QueueError::NotOwner {
                name: self.name.clone(),
                action,
            })
        }
    }

    /// 55000 when the queue is delivered by a sender: its jobs are not
    /// handed to queue_claim callers.
    pub fn check_pulled(&self) -> Result<(), QueueError> {
        match &self.sender {
            None => Ok(()),
            Some(sender) => Err(QueueError::DeliveredBySender {
                name: self.name.clone(),
                sender: sender.clone(),
            }),
        }
    }
}

/// Taken on queue `id` by every enqueue and retry (shared) and by
/// `queue_drop` (exclusive) until the end of the transaction, so that a
/// queue is never dropped under a job being added to it. A lock, not a
/// row: enqueues write no shared row.
pub fn lock_queue(id: i32, exclusive: bool) {
    let mode = if exclusive {
        pg_sys::AccessExclusiveLock
    } else {
        pg_sys::AccessShareLock
    };
    lock_object(queue_object(id), QUEUE_LOCK, mode);
}

/// Taken by an enqueue (or retry) with a dedup key until the end of the
/// transaction: enqueues of one key run one at a time, and the second sees
/// the job of the first. Keys share a lock when their hashes collide, which
/// only makes them wait for each other.
///
/// The lock is named by a hash of the queue and the key, which must be the
/// same in every backend, whatever build of the library it loaded (after a
/// reinstall, backends of the old and of the new library run side by side
/// until they reconnect): PostgreSQL's hash_bytes (what hashtext and hash
/// indexes use, so its definition never changes under data on disk), never
/// Rust's DefaultHasher, whose algorithm may change with the Rust release
/// that built the library.
///
/// Each also takes the queue's dedup lock shared, which a batch with dedup
/// keys takes exclusive (`lock_dedup_keys`).
pub fn lock_dedup_key(queue_id: i32, key: &str) {
    lock_object(queue_object(queue_id), DEDUP_ALL_LOCK, pg_sys::ShareLock);
    lock_object(key_hash(queue_id, key), DEDUP_LOCK, pg_sys::ExclusiveLock);
}

/// Taken by a batch enqueue with dedup keys until the end of the
/// transaction: every enqueue with a dedup key into the queue waits for it
/// (and it for them). One lock for the whole batch, however many keys it
/// has: a lock per key could fill the lock table.
pub fn lock_dedup_keys(queue_id: i32) {
    lock_object(
        queue_object(queue_id),
        DEDUP_ALL_LOCK,
        pg_sys::ExclusiveLock,
    );
}

/// Taken by an enqueue with a group key into an ordered queue until the end
/// of the transaction: the jobs of one group commit in the order of their
/// ids, so a claim never sees a group's later job before an earlier one.
pub fn lock_group(queue_id: i32, key: &str) {
    lock_object(key_hash(queue_id, key), GROUP_LOCK, pg_sys::ExclusiveLock);
}

/// Taken by a claim of a queue with a limit that counts (limits::counted)
/// until the end of the transaction. Alone: such claims run one at a time,
/// each seeing what the last one claimed, so together they never pass a
/// limit. Side by side (`alone` false, reservations.rs): claims that
/// reserve what they may take run together, and a claim alone waits for
/// them all.
pub fn lock_claims(queue_id: i32, alone: bool) {
    let mode = match alone {
        true => pg_sys::ExclusiveLock,
        false => pg_sys::ShareLock,
    };
    lock_object(queue_object(queue_id), CLAIM_LOCK, mode);
}

/// The rules a claim follows (the queue's order and limits, and which job
/// heads an ordered group), held until the end of the transaction: shared
/// by every claim and every batch delivered in one transaction, before it
/// reads the queue's options and looks at its jobs; alone by what changes
/// them: `queue_alter` of the order or a limit, and `queue_retry` of a job
/// of a group back into an ordered queue (it becomes the group's head).
/// A change therefore waits for the claims under way, which have not
/// committed what they took, and the claims after it see it committed.
/// Without it, a claim would count in its own snapshot, which misses what a
/// claim beside it took under the old rules: a retried head beside a later job
/// of its group in flight, or jobs in flight that a new limit never counted.
pub fn lock_rules(queue_id: i32, change: bool) {
    let mode = match change {
        true => pg_sys::ExclusiveLock,
        false => pg_sys::ShareLock,
    };
    lock_object(queue_object(queue_id), RULES_LOCK, mode);
}

/// `queue` as it is for a claim: the rules lock taken (`lock_rules`), then
/// its options read again when a change committed meanwhile (taking the
/// lock accepts the invalidations that change sent), and, in a transaction
/// that does not read each statement in a fresh snapshot (REPEATABLE READ,
/// SERIALIZABLE), as committed now rather than as its snapshot saw them.
/// None when the queue is gone.
pub fn for_claim(client: &mut SpiClient<'_>, queue: &Queue) -> Option<Queue> {
    lock_rules(queue.id, false);
    if !db::read_committed() {
        let row = db::look(client, &queries::FIND_QUEUE_BY_ID, args![id = queue.id]).first()?;
        return Some(Queue::of_row(&row, row.value("name")));
    }
    cached_by_id(queue.id).or_else(|| find_by_id(client, queue.id))
}

/// A name for the lock of `key` in queue `queue_id` (see lock_dedup_key).
fn key_hash(queue_id: i32, key: &str) -> Oid {
    let mut bytes = queue_id.to_be_bytes().to_vec();
    bytes.extend_from_slice(key.as_bytes());
    let length = i32::try_from(bytes.len()).expect("a key of less than 2 GB");
    // SAFETY: hash_bytes reads `length` bytes from the pointer and keeps
    // nothing; the vector outlives the call.
    Oid::from(unsafe { hash_bytes(bytes.as_ptr(), length) })
}

// From common/hashfn.h, which pgrx does not bind.
unsafe extern "C-unwind" {
    fn hash_bytes(k: *const u8, keylen: std::ffi::c_int) -> u32;
}

/// The locks of the API are object locks of class `queue_queues`, a name
/// space of their own (advisory locks would share the users' one).
const QUEUE_LOCK: u16 = 0;
const DEDUP_LOCK: u16 = 1;
const DEDUP_ALL_LOCK: u16 = 2;
const GROUP_LOCK: u16 = 3;
const CLAIM_LOCK: u16 = 4;
const RULES_LOCK: u16 = 5;

/// The object a lock on queue `id` itself names.
fn queue_object(id: i32) -> Oid {
    Oid::from(id as u32)
}

fn lock_object(object: Oid, kind: u16, mode: u32) {
    // SAFETY: called inside a transaction (an API call), which owns the lock
    // until it ends; `mode` is one of PostgreSQL's lock mode constants.
    unsafe { pg_sys::LockDatabaseObject(db::queues_table(), object, kind, mode as _) }
}
