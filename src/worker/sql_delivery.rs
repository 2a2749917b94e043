//! Delivery to SQL senders, as docs/push.md's delivery protocol says. A
//! queue without limits that count (ordered or not), or with only limits
//! of the queue as a whole and no order, gets one transaction per batch:
//! its jobs locked but not claimed (an ordered queue's groups' heads; under
//! a reservation that the claims beside it count, for those limits), the
//! sender called for each in a subtransaction of its own, the jobs
//! delivered deleted and an attempt counted for each that failed, one
//! commit (the batch's ids written down meanwhile: delivery_log.rs). Any other
//! queue has its claim committed first, then the
//! jobs still in flight locked (a cancel, purge or drop now waits) for the
//! calls and their outcomes. At most 64 subtransactions that wrote go into
//! one commit (the subxid cache of a backend). Also: the claim again of a
//! job that a stopped worker left in flight.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use pgrx::datum::Uuid;
use pgrx::pg_sys::{self, Oid};

use super::batches::{self, Taking, Tally};
use super::delivery_log;
use super::sender_call::{Outcome, Prepared, Sender};
use super::session::{self, Session};
use super::shared::{State, SHARED};
use crate::announce;
use crate::catalog::{self, Queue};
use crate::contract::WORKER_NAME;
use crate::db::{self, args};
use crate::ends;
use crate::jobs;
use crate::jsonb::Jsonb;
use crate::limits::{self, Pick, Turn};
use crate::policy::add_delay;
use crate::queries;
use crate::sender_check::{self, Refusal};
use crate::spans;

/// Subtransactions with a transaction id that one commit may hold before
/// PostgreSQL's per-backend cache of them overflows (PGPROC_MAX_CACHED_SUBXIDS).
const WRITES_PER_COMMIT: usize = 64;

thread_local! {
    /// The queues whose sender wrote in their last batch delivered in one
    /// transaction: their next batch locks no more jobs than one commit
    /// may call (the rest would be locked for nothing).
    static WRITING: RefCell<HashSet<i32>> = RefCell::new(HashSet::new());
}

/// A job claimed for delivery: its id and the lease it is held under.
#[derive(Clone, Copy)]
pub struct InFlight {
    pub id: i64,
    pub lease: Uuid,
}

/// Step 2 of the protocol for jobs of queue `queue_id` claimed under
/// leases in an earlier transaction, in as many transactions as the
/// sender's writes need, by the worker in `slot`.
pub fn deliver(session: &Session, slot: usize, queue_id: i32, mut batch: Vec<InFlight>) {
    set_state(slot, State::Delivering);
    while !batch.is_empty() {
        let tally;
        (batch, tally) = session::transaction(|| deliver_some(session, queue_id, batch));
        session::report_stat();
        tally.note(slot);
    }
    set_state(slot, State::Idle);
}

/// Delivers jobs of `batch` until one commit's worth of writes; returns
/// the jobs left for the next transaction.
fn deliver_some(session: &Session, queue_id: i32, batch: Vec<InFlight>) -> (Vec<InFlight>, Tally) {
    // each job's place in claim order, and its lease
    let claimed: HashMap<i64, (usize, Uuid)> = batch
        .iter()
        .enumerate()
        .map(|(i, job)| (job.id, (i, job.lease)))
        .collect();
    let (check, locked) = session.tables(|client| {
        let (check, queue) = check_sender(client, queue_id);
        let Some((name, max_attempts)) = queue else {
            return (check, Vec::new());
        };
        let ids: Vec<i64> = batch.iter().map(|j| j.id).collect();
        let leases: Vec<Uuid> = batch.iter().map(|j| j.lease).collect();
        let rows = db::run(
            client,
            &queries::DELIVER_LOCK,
            args![
                ids = ids,
                leases = leases,
                queue = name.as_str(),
                max_attempts = max_attempts,
            ],
        );
        let mut locked: Vec<(i64, Jsonb)> = rows.map(|r| (r.value("id"), r.value("job"))).collect();
        // in claim order (a cancelled job is no longer there)
        locked.sort_by_key(|(id, _)| claimed[id].0);
        (check, locked)
    });
    let lease_of = |id: i64| claimed[&id].1;
    let mut sender = match check {
        Check::NoSender => {
            let ids: Vec<i64> = locked.iter().map(|(id, _)| *id).collect();
            session.tables(|client| {
                db::run(client, &queries::RELEASE, args![ids = ids]);
            });
            return (Vec::new(), Tally::default());
        }
        Check::Refused(problem) => {
            let failed: Vec<(i64, String, bool)> = locked
                .iter()
                .map(|(id, _)| (*id, problem.clone(), false))
                .collect();
            let tally = record(session, Taken::Claimed, Vec::new(), failed, &lease_of);
            return (Vec::new(), tally);
        }
        Check::Ready(sender) => sender.prepare(),
    };
    let calls = call_each(&mut sender, &locked);
    let tally = record(
        session,
        Taken::Claimed,
        calls.delivered,
        calls.failed,
        &lease_of,
    );
    let left = locked[calls.done..]
        .iter()
        .map(|(id, _)| InFlight {
            id: *id,
            lease: lease_of(*id),
        })
        .collect();
    (left, tally)
}

/// How the jobs of a batch were taken.
#[derive(Clone, Copy, PartialEq)]
enum Taken {
    /// Claimed in an earlier transaction, the attempt counted there.
    Claimed,
    /// Locked by this transaction (jobs::lock_next) at `began`, nothing
    /// written.
    Locked { began: i64 },
}

/// The outcomes of a transaction's calls: delivered jobs succeed, failed
/// ones follow their queue's retry policy (QU001: straight to failed).
/// The failed jobs of a locked batch have had their attempt counted.
fn record(
    session: &Session,
    taken: Taken,
    delivered: Vec<(i64, Option<Jsonb>)>,
    failed: Vec<(i64, String, bool)>,
    lease_of: &dyn Fn(i64) -> Uuid,
) -> Tally {
    let tally = Tally {
        delivered: delivered.len(),
        failures: failed.len(),
        last_error: failed.last().map(|(_, message, _)| message.clone()),
    };
    session.tables(|client| {
        if !delivered.is_empty() {
            let (ids, results) = delivered.into_iter().unzip();
            match taken {
                Taken::Claimed => {
                    jobs::succeed(client, ids, results);
                }
                Taken::Locked { began } => {
                    jobs::succeed_locked(client, ids, results, WORKER_NAME, began)
                }
            }
        }
        for (id, message, permanent) in &failed {
            let failed = jobs::fail(client, *id, lease_of(*id), message, None, *permanent, false);
            if let Some(failed) = &failed {
                announce::attempt_failed(failed);
            }
        }
    });
    tally
}

fn set_state(slot: usize, state: State) {
    let mut shared = SHARED.exclusive();
    if shared.workers[slot].state.running() {
        shared.workers[slot].state = state;
    }
}

/// Whether a queue's sender can be called now.
enum Check {
    NoSender,
    /// The problem, as the jobs' last_error says it.
    Refused(String),
    Ready(Sender),
}

/// Checked again before every transaction of calls: the registering role
/// may have been dropped or lost EXECUTE, the function dropped, renamed or
/// made again as another kind (sender_check::check, as at registration), its
/// login settings changed. Also returns the queue's name and max_attempts,
/// when it still exists.
fn check_sender(
    client: &mut pgrx::spi::SpiClient<'_>,
    queue_id: i32,
) -> (Check, Option<(String, i32)>) {
    // SAFETY: MyDatabaseId is set when the worker connects to its database
    // and never changes after.
    let database = unsafe { pg_sys::MyDatabaseId };
    let Some(row) = db::run(
        client,
        &queries::SENDER_CHECK,
        args![queue_id = queue_id, database = database],
    )
    .first() else {
        return (Check::NoSender, None);
    };
    let queue = (
        row.value::<String>("name"),
        row.value::<i32>("max_attempts"),
    );
    let Some(registered) = row.get::<String>("sender") else {
        return (Check::NoSender, Some(queue));
    };
    if row.value::<bool>("webhook") {
        // The queue became a webhook queue since the claim: its jobs go back,
        // for the webhook's own round.
        return (Check::NoSender, Some(queue));
    }
    let role: Oid = row.value("role");
    let role_name: String = row.value("role_name");
    let settings: Vec<String> = row.value("settings");
    let check = match row.get::<Oid>("function") {
        // The refusal is worded by the registered signature alone.
        None => Check::Refused(Refusal::Missing.at_delivery(
            &registered,
            &role_name,
            pg_sys::Oid::INVALID,
            None,
        )),
        Some(_) if !db::in_syscache(pg_sys::SysCacheIdentifier::AUTHOID, role) => {
            Check::Refused(format!(
                "the role that registered sender {registered} (oid {role_name}) no longer exists"
            ))
        }
        Some(function) => match sender_check::check(function, role) {
            Ok(()) => Check::Ready(Sender {
                function,
                role,
                settings,
            }),
            Err(refusal) => {
                let named = sender_check::signature(client, function);
                Check::Refused(refusal.at_delivery(&registered, &role_name, function, named))
            }
        },
    };
    (check, Some(queue))
}

/// What a batch took: how many jobs, whether as many as it asked for (more
/// may be due), and whether a limit or the order of the queue kept some
/// back.
#[derive(Default)]
pub struct Claimed {
    pub jobs: usize,
    pub full: bool,
    pub held_back: bool,
}

/// Claims up to `size` due jobs of queue `queue_id` (`name`) for the worker
/// in `slot`, and delivers them. A queue without limits that count, or
/// with only limits of the queue as a whole and no order, is delivered in
/// one transaction per batch (`deliver_locked`); any other has its claim
/// committed first (a claim of an ordered queue with limits, or of one with
/// limits per group, must see the jobs in flight), then `deliver`. So has
/// an ordered queue's batch when no head lies at the front of the claim
/// order (the claim's walk finds them).
pub fn claim_and_deliver(
    session: &Session,
    slot: usize,
    queue_id: i32,
    name: &str,
    size: usize,
) -> Claimed {
    set_state(slot, State::Delivering);
    let (claimed, claimed_first, tally) = session::transaction(|| {
        let Some(queue) = session.tables(|c| batches::queue_for_worker(c, queue_id, name)) else {
            return (Claimed::default(), Vec::new(), Tally::default());
        };
        let in_one = match batches::taking(&queue, size) {
            Taking::InOne => Some(deliver_locked(session, slot, &queue, size, None)),
            Taking::InOneWithTurn(turn) => {
                Some(deliver_locked(session, slot, &queue, size, Some(turn)))
            }
            Taking::ClaimedFirst => None,
        };
        if let Some((claimed, tally)) = in_one {
            // An ordered queue whose heads lie past the front's turns has them
            // claimed by the claim's walk.
            if claimed.jobs > 0 || !queue.limits.ordered {
                return (claimed, Vec::new(), tally);
            }
        }
        let claim = session.tables(|c| batches::claim_for_worker(c, &queue, size, false));
        let claimed = Claimed {
            jobs: claim.jobs.len(),
            full: claim.jobs.len() == size,
            held_back: claim.held_back || order_waits(&queue, claim.jobs.len()),
        };
        let batch = claim
            .jobs
            .into_iter()
            .map(|job| InFlight {
                id: job.id,
                lease: job.lease,
            })
            .collect();
        (claimed, batch, Tally::default())
    });
    // Jobs were taken and none claimed first: deliver_locked wrote their ids
    // down, and their transaction has committed.
    if claimed.jobs > 0 && claimed_first.is_empty() {
        delivery_log::clear(slot);
    }
    session::report_stat();
    tally.note(slot);
    deliver(session, slot, queue_id, claimed_first);
    claimed
}

/// Whether the later jobs of an ordered queue's groups wait for the `jobs`
/// of a batch: once these end, the next of each group may be taken, and no
/// commit of another session announces it.
fn order_waits(queue: &Queue, jobs: usize) -> bool {
    queue.limits.ordered && jobs > 0
}

/// A batch of `queue` in the caller's transaction: up to `size` due jobs
/// locked (jobs::lock_next: no claim written), their ids written down
/// (delivery_log.rs), the sender called for each, the jobs delivered deleted,
/// an attempt counted for each that failed. Jobs left uncalled once the
/// sender's writes fill the commit (WRITES_PER_COMMIT) stay ready, for the
/// next batch. With `turn`, the batch's turn beside the claims under way
/// of a queue with limits of the queue as a whole: it takes what they
/// leave room for, its reservation (cut to what it locked) stands for its
/// jobs in flight until it commits, and the rate windows count them as
/// claimed when it locked them.
fn deliver_locked(
    session: &Session,
    slot: usize,
    queue: &Queue,
    size: usize,
    turn: Option<Turn>,
) -> (Claimed, Tally) {
    let mut size = if WRITING.with(|w| w.borrow().contains(&queue.id)) {
        size.min(WRITES_PER_COMMIT)
    } else {
        size
    };
    let wanted = size;
    let mut now = crate::time::now_us();
    let mut held_back = false;
    if let Some(turn) = &turn {
        let chosen =
            session.tables(|c| limits::choose(c, queue, turn, size, &mut now, &HashSet::new()));
        held_back = chosen.held_back;
        // Limits of the queue as a whole choose no job by id.
        size = match chosen.pick {
            Pick::Next(room) => room,
            Pick::These(ids) => ids.len(),
        };
        if size == 0 {
            return (
                Claimed {
                    held_back,
                    ..Claimed::default()
                },
                Tally::default(),
            );
        }
    }
    let began = crate::time::now_us();
    let locked = session.tables(|c| jobs::lock_next(c, queue, size));
    if let Some(turn) = &turn {
        turn.took(locked.len());
    }
    let claimed = Claimed {
        jobs: locked.len(),
        full: locked.len() == wanted,
        held_back: held_back || order_waits(queue, locked.len()),
    };
    if locked.is_empty() {
        return (claimed, Tally::default());
    }
    let groups: Vec<Option<String>> = locked.iter().map(|job| job.group.clone()).collect();
    let locked: Vec<(i64, Jsonb)> = locked.into_iter().map(|job| (job.id, job.job)).collect();
    delivery_log::write(slot, &locked.iter().map(|(id, _)| *id).collect::<Vec<_>>());
    let (check, _) = session.tables(|c| check_sender(c, queue.id));
    if !matches!(check, Check::NoSender) && turn.is_some() {
        // An attempt is made of each, or counted as failed: each is a claim.
        session.tables(|c| limits::note(c, queue, now, groups.iter().map(Option::as_deref)));
    }
    let (delivered, failed) = match check {
        // The queue has no sender any more: the jobs stay as they are.
        Check::NoSender => return (claimed, Tally::default()),
        Check::Refused(problem) => {
            let failed = locked
                .iter()
                .map(|(id, _)| (*id, problem.clone(), false))
                .collect();
            (Vec::new(), failed)
        }
        Check::Ready(sender) => {
            let calls = call_each(&mut sender.prepare(), &locked);
            WRITING.with(|w| {
                let mut writing = w.borrow_mut();
                if calls.writes > 0 {
                    writing.insert(queue.id);
                } else {
                    writing.remove(&queue.id);
                }
            });
            (calls.delivered, calls.failed)
        }
    };
    // A failed attempt counts, and is then recorded as for a claimed job; one
    // that the sender itself moved on is left as it is. No statement runs when
    // all went well, as in a worker's first round each statement is planned anew.
    let failed_ids: Vec<i64> = failed.iter().map(|(id, _, _)| *id).collect();
    let leases: HashMap<i64, Uuid> = if failed_ids.is_empty() {
        HashMap::new()
    } else {
        session
            .tables(|c| jobs::count_attempts(c, failed_ids, WORKER_NAME, began))
            .into_iter()
            .map(|job| (job.id, job.lease))
            .collect()
    };
    let failed = failed
        .into_iter()
        .filter(|(id, _, _)| leases.contains_key(id))
        .collect();
    let tally = record(session, Taken::Locked { began }, delivered, failed, &|id| {
        leases[&id]
    });
    (claimed, tally)
}

/// What the calls of one transaction gave.
struct Calls {
    /// Each with what its sender returned, when it keeps its result.
    delivered: Vec<(i64, Option<Jsonb>)>,
    /// (id, error, whether with QU001)
    failed: Vec<(i64, String, bool)>,
    /// How many jobs were called, and how many calls wrote.
    done: usize,
    writes: usize,
}

/// Calls the sender for each job, in order, until the writes of one commit
/// (WRITES_PER_COMMIT).
fn call_each(sender: &mut Prepared, jobs: &[(i64, Jsonb)]) -> Calls {
    let mut calls = Calls {
        delivered: Vec::new(),
        failed: Vec::new(),
        done: 0,
        writes: 0,
    };
    for (id, job) in jobs {
        if calls.writes == WRITES_PER_COMMIT {
            break;
        }
        calls.done += 1;
        let attempt = spans::enabled().then(|| spans::Attempt::of_job(*job));
        match sender.call(job.datum()) {
            Outcome::Delivered { wrote, result } => {
                calls.writes += wrote as usize;
                calls.delivered.push((*id, result));
                if let Some(attempt) = attempt {
                    attempt.ended(ends::Outcome::Succeeded, None);
                }
            }
            Outcome::Failed { message, permanent } => {
                if let Some(attempt) = attempt {
                    attempt.ended(ends::Outcome::Failed, Some(&message));
                }
                calls.failed.push((*id, message, permanent))
            }
        }
    }
    calls
}

/// The jobs of a one-transaction delivery that a stopped worker left under
/// way (delivery_log.rs) are left in flight, their attempt counted, for
/// `recover_one`.
pub fn mark_suspects(session: &Session) {
    let left = delivery_log::left();
    if !left.ids.is_empty() {
        let ids = left.ids.clone();
        session::transaction(|| {
            session.tables(|c| {
                let marked = jobs::count_attempts(c, ids, WORKER_NAME, crate::time::now_us());
                note_lost_claims(c, &marked);
            })
        });
    }
    left.forget();
}

/// A batch of a queue with a rate limit, delivered in one transaction,
/// counted its jobs in the rate windows in that transaction, which the
/// stop rolled back; the attempts under way still count, as claimed now
/// (later than they were: the windows hold them a little longer, never
/// shorter).
fn note_lost_claims(client: &mut pgrx::spi::SpiClient<'_>, marked: &[jobs::Attempted]) {
    let mut by_queue: HashMap<i32, Vec<Option<&str>>> = HashMap::new();
    for job in marked {
        by_queue
            .entry(job.queue_id)
            .or_default()
            .push(job.group.as_deref());
    }
    let now = crate::time::now_us();
    for (queue_id, groups) in by_queue {
        if let Some(queue) = catalog::by_id(client, queue_id) {
            limits::note(client, &queue, now, groups.into_iter());
        }
    }
}

/// What becomes of a job a stopped worker left in flight.
pub enum Recovery {
    /// Claimed again: to be delivered alone, by its queue's sender.
    Deliver(i32, InFlight),
    /// Buried, made ready again, or already ended.
    Done,
    /// Still in flight until this time, when its queue's rate window has
    /// room for its claim.
    Later(i64),
}

/// A job a stopped worker left in flight: claimed again (a new attempt,
/// counted in its queue's rate windows), buried when it has none left, or
/// ready again when its queue no longer has a sender; in flight a while
/// longer when a rate window is full.
pub fn recover_one(client: &mut pgrx::spi::SpiClient<'_>, id: i64) -> Recovery {
    let Some(row) = db::run(
        client,
        &queries::RECOVER_LOCK,
        args![id = id, worker = WORKER_NAME],
    )
    .first() else {
        return Recovery::Done;
    };
    let attempts: i32 = row.value("attempts");
    let max_attempts: i32 = row.value("max_attempts");
    let lease: pgrx::datum::Interval = row.value("lease");
    let sql_sender: bool = row.value("sql_sender");
    let queue_id: i32 = row.value("queue_id");
    let group: Option<String> = row.get("group_key");
    let mut now = crate::time::now_us();
    let stopped = format!("the queue worker stopped during attempt {attempts} of {max_attempts}");
    if !sql_sender {
        db::run(client, &queries::RELEASE_ONE, args![id = id]);
        return Recovery::Done;
    }
    if attempts >= max_attempts {
        jobs::bury(client, vec![id], now, Some(&stopped));
        return Recovery::Done;
    }
    let Some(queue) = catalog::by_id(client, queue_id) else {
        return Recovery::Done;
    };
    let turn = match limits::turn_to_claim_again(client, &queue, group.as_deref(), &mut now) {
        Ok(turn) => turn,
        Err(frees_at) => {
            // Its lease must outlast the wait: an expired one would hand the
            // job to an ordinary claim, in a batch.
            let until = add_delay(frees_at, catalog::micros(&lease));
            db::run(
                client,
                &queries::RECOVER_LATER,
                args![id = id, until = db::timestamp(until)],
            );
            return Recovery::Later(frees_at);
        }
    };
    let expires = db::timestamp(add_delay(now, catalog::micros(&lease)));
    let Some(row) = db::run(
        client,
        &queries::RECOVER_CLAIM,
        args![id = id, lease_until = expires, error = stopped.as_str()],
    )
    .first() else {
        return Recovery::Done;
    };
    let lease: Uuid = row.value("lease");
    if let Some(turn) = turn {
        limits::note(client, &queue, now, std::iter::once(group.as_deref()));
        turn.took(1);
    }
    Recovery::Deliver(queue_id, InFlight { id, lease })
}
