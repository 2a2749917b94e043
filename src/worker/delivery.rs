//! Push delivery in one database, as docs/push.md's delivery protocol says:
//!
//! 1. claim a batch of a sender queue under the queue's lease, and commit
//!    (the attempt is counted there);
//! 2. lock the jobs still in flight (a cancel, purge or drop now waits),
//!    call the sender for each in a subtransaction of its own, and commit
//!    the outcomes with the sender's writes. At most 64 subtransactions
//!    that wrote go into one commit (the subxid cache of a backend); the
//!    rest of the batch goes on in the next transaction.
//!
//! Jobs that a stopped worker left in flight are claimed again one per
//! transaction, so that a job that kills its worker (or the server) only
//! uses up its own attempts.

use std::collections::HashMap;

use pgrx::datum::Uuid;
use pgrx::pg_sys::{self, Oid};

use super::http::{Http, Webhook};
use super::sender::{Outcome, Sender};
use super::session::{self, Session};
use super::shared::{State, SHARED};
use super::wake;
use crate::catalog;
use crate::contract::WORKER_NAME;
use crate::db::{self, args};
use crate::gucs;
use crate::jobs;
use crate::jsonb::Jsonb;
use crate::policy::add_delay;
use crate::queries;
use crate::senders::{self, Refusal};

/// Subtransactions with a transaction id that one commit may hold before
/// PostgreSQL's per-backend cache of them overflows (PGPROC_MAX_CACHED_SUBXIDS).
const WRITES_PER_COMMIT: usize = 64;

/// A job claimed for delivery: its id and the lease it is held under.
#[derive(Clone, Copy)]
struct InFlight {
    id: i64,
    lease: Uuid,
}

/// A sender queue as a round sees it.
struct SenderQueue {
    id: i32,
    name: String,
    batch_size: i32,
    /// Delivered over HTTP instead of by a SQL sender.
    webhook: Option<Webhook>,
}

/// What one round did.
#[derive(Default)]
pub struct Round {
    /// Jobs claimed, and in how many batches.
    pub claimed: usize,
    pub batches: usize,
    /// Some queue filled its batch: more may be waiting.
    pub more: bool,
    /// A webhook queue was not served because the worker is handing its
    /// slot over: it may have jobs due.
    pub held_back: bool,
    /// Outcomes of webhook requests recorded.
    pub answered: usize,
}

/// The worker's side of delivery, kept from round to round.
pub struct Delivery {
    slot: usize,
    /// The queue served last, so that the next round starts after it.
    last_served: i32,
    /// Webhook requests in flight.
    http: Http,
}

impl Delivery {
    pub fn new(slot: usize) -> Delivery {
        Delivery {
            slot,
            last_served: 0,
            http: Http::default(),
        }
    }

    /// Whether webhook requests are open: the worker does not leave then.
    pub fn sending(&self) -> bool {
        self.http.sending()
    }

    /// Whether webhook requests have come back that are not recorded yet.
    pub fn any_answered(&mut self) -> bool {
        self.http.any_answered()
    }

    /// When the outcomes of webhook requests that came back are worth a
    /// transaction, in microseconds (0: at once); None: none came back.
    pub fn record_in_us(&mut self) -> Option<i64> {
        self.http.record_in().map(|d| d.as_micros() as i64)
    }

    /// A descriptor that becomes readable when a webhook request comes
    /// back (None: no request was ever sent).
    pub fn answered_fd(&self) -> Option<std::os::fd::RawFd> {
        self.http.answered_fd()
    }

    /// Leaves webhook requests still open to the next worker (http.rs),
    /// recording first the outcomes that came back.
    pub fn abandon(&mut self, session: &Session) {
        let tally = session::transaction(|| session.tables(|c| self.http.abandon(c)));
        report_stat();
        tally.note(self.slot);
    }

    /// While webhook requests are open and nothing else calls for a round:
    /// records the outcomes that came back and, unless `handing_over`,
    /// claims what they made room for in their webhook queues, in one
    /// transaction, then sends. (Other queues wait for the next round: a
    /// commit that gives them jobs wakes the worker for one, and one is due
    /// when their scheduled jobs are.) None: the extension is gone.
    pub fn refill(&mut self, session: &Session, handing_over: bool) -> Option<Round> {
        let mut round = Round::default();
        let serving = self.http.queues_in_flight();
        let (batches, mut tally) = session::transaction(|| {
            if !session.current() {
                return None;
            }
            Some(session.tables(|client| {
                let tally = self.http.record(client);
                let mut batches = Vec::new();
                if !handing_over {
                    for queue in self.in_turn(sender_queues(client)) {
                        if !serving.contains(&queue.id) {
                            continue;
                        }
                        if let Some(hook) = &queue.webhook {
                            let batch = self.http.claim(
                                client,
                                self.slot,
                                queue.id,
                                &queue.name,
                                hook,
                                size_of(&queue),
                            );
                            if batch.claimed > 0 {
                                self.last_served = queue.id;
                            }
                            batches.push(batch);
                        }
                    }
                }
                (batches, tally)
            }))
        })?;
        report_stat();
        round.answered = tally.delivered + tally.failures;
        for batch in batches {
            round.claimed += batch.claimed;
            round.batches += usize::from(batch.claimed > 0);
            tally.add(batch.tally);
            self.http.start(batch.requests);
        }
        tally.note(self.slot);
        Some(round)
    }

    /// The queues in round-robin order: those after the one served last
    /// come first.
    fn in_turn(&self, mut queues: Vec<SenderQueue>) -> Vec<SenderQueue> {
        queues.sort_by_key(|q| (q.id <= self.last_served, q.id));
        queues
    }

    /// Jobs left in flight by a worker that stopped: each is claimed again
    /// and delivered on its own (or buried when it has no attempt left, or
    /// made ready again when its queue lost its sender). Returns how many.
    pub fn recover(&mut self, session: &Session) -> usize {
        let left: Vec<i64> = session::transaction(|| {
            session.tables(|client| {
                db::run(
                    client,
                    &queries::LEFT_IN_FLIGHT,
                    args![worker = WORKER_NAME],
                )
                .map(|r| r.value::<i64>("id"))
                .collect()
            })
        });
        for &id in &left {
            let claimed = session::transaction(|| session.tables(|c| recover_one(c, id)));
            report_stat();
            if let Some((queue_id, job)) = claimed {
                self.deliver(session, queue_id, vec![job]);
            }
        }
        left.len()
    }

    /// One batch for each sender queue with due jobs, starting after the
    /// queue served last. Stops early when `stop()` says so. `handing_over`:
    /// the worker's turn is over, and webhook queues send nothing more.
    pub fn round(
        &mut self,
        session: &Session,
        handing_over: bool,
        stop: impl Fn() -> bool,
    ) -> Round {
        // (with the outcomes of webhook requests that came back)
        let (queues, tally) = session::transaction(|| {
            session.tables(|client| (sender_queues(client), self.http.record(client)))
        });
        report_stat();
        let mut round = Round {
            answered: tally.delivered + tally.failures,
            ..Round::default()
        };
        tally.note(self.slot);
        for queue in self.in_turn(queues) {
            if stop() {
                break;
            }
            let size = size_of(&queue);
            if let Some(hook) = &queue.webhook {
                if handing_over {
                    // (its turn is over: serve.rs)
                    round.held_back = true;
                    continue;
                }
                let batch = session::transaction(|| {
                    session.tables(|client| {
                        // (what came back first: it makes room)
                        let recorded = self.http.record(client);
                        let mut batch =
                            self.http
                                .claim(client, self.slot, queue.id, &queue.name, hook, size);
                        batch.tally.add(recorded);
                        batch
                    })
                });
                report_stat();
                self.last_served = queue.id;
                round.claimed += batch.claimed;
                round.batches += usize::from(batch.claimed > 0);
                round.answered += batch.tally.delivered + batch.tally.failures;
                batch.tally.note(self.slot);
                self.http.start(batch.requests);
                continue;
            }
            let (batch, held_back) =
                session::transaction(|| session.tables(|c| claim(c, &queue, size)));
            report_stat();
            self.last_served = queue.id;
            if batch.is_empty() {
                continue;
            }
            round.claimed += batch.len();
            round.batches += 1;
            // (a limit that kept jobs back has room again once these end)
            round.more |= batch.len() == size || held_back;
            self.deliver(session, queue.id, batch);
        }
        round
    }

    /// Step 2 of the protocol for jobs of queue `queue_id` claimed under
    /// leases, in as many transactions as the sender's writes need.
    fn deliver(&mut self, session: &Session, queue_id: i32, mut batch: Vec<InFlight>) {
        self.set_state(State::Delivering);
        while !batch.is_empty() {
            batch = session::transaction(|| self.deliver_some(session, queue_id, batch));
            report_stat();
        }
        self.set_state(State::Idle);
    }

    /// Delivers jobs of `batch` until one commit's worth of writes; returns
    /// the jobs left for the next transaction.
    fn deliver_some(
        &mut self,
        session: &Session,
        queue_id: i32,
        batch: Vec<InFlight>,
    ) -> Vec<InFlight> {
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
            let mut locked: Vec<(i64, Jsonb)> =
                rows.map(|r| (r.value("id"), r.value("job"))).collect();
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
                return Vec::new();
            }
            Check::Refused(problem) => {
                let failed: Vec<(i64, String, bool)> = locked
                    .iter()
                    .map(|(id, _)| (*id, problem.clone(), false))
                    .collect();
                self.record(session, Vec::new(), failed, &lease_of);
                return Vec::new();
            }
            Check::Ready(sender) => sender.prepare(),
        };
        let (mut delivered, mut failed) = (Vec::new(), Vec::new());
        let mut writes = 0;
        let mut done = 0;
        for (id, job) in &locked {
            if writes == WRITES_PER_COMMIT {
                break;
            }
            done += 1;
            match sender.call(job.datum()) {
                Outcome::Delivered { wrote } => {
                    writes += wrote as usize;
                    delivered.push(*id);
                }
                Outcome::Failed { message, permanent } => failed.push((*id, message, permanent)),
            }
        }
        self.record(session, delivered, failed, &lease_of);
        locked[done..]
            .iter()
            .map(|(id, _)| InFlight {
                id: *id,
                lease: lease_of(*id),
            })
            .collect()
    }

    /// The outcomes of a transaction's calls: delivered jobs succeed, failed
    /// ones follow their queue's retry policy (QU001: straight to failed).
    fn record(
        &self,
        session: &Session,
        delivered: Vec<i64>,
        failed: Vec<(i64, String, bool)>,
        lease_of: &dyn Fn(i64) -> Uuid,
    ) {
        let (succeeded, failures) = (delivered.len(), failed.len());
        let last_error = failed.last().map(|(_, message, _)| message.clone());
        session.tables(|client| {
            if !delivered.is_empty() {
                jobs::succeed(client, delivered);
            }
            for (id, message, permanent) in &failed {
                let failed =
                    jobs::fail(client, *id, lease_of(*id), message, None, *permanent, false);
                wake::on_commit(failed.is_some_and(|f| f.wake));
            }
        });
        note_outcomes(self.slot, succeeded, failures, last_error);
    }

    fn set_state(&self, state: State) {
        let mut shared = SHARED.exclusive();
        if shared.workers[self.slot].state.running() {
            shared.workers[self.slot].state = state;
        }
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
/// made again as another kind (senders::check, as at registration). Also
/// returns the queue's name and max_attempts, when it still exists.
fn check_sender(
    client: &mut pgrx::spi::SpiClient<'_>,
    queue_id: i32,
) -> (Check, Option<(String, i32)>) {
    let Some(row) = db::run(client, &queries::SENDER_CHECK, args![queue_id = queue_id]).first()
    else {
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
        // (made a webhook queue since the claim: its jobs go back, for
        // the webhook's own round)
        return (Check::NoSender, Some(queue));
    }
    let role: Oid = row.value("role");
    let role_name: String = row.value("role_name");
    let ready = |client: &mut pgrx::spi::SpiClient<'_>, function| {
        Check::Ready(Sender {
            function,
            role,
            settings: login_settings(client, role),
        })
    };
    let check = match row.get::<Oid>("function") {
        // (worded by the registered signature alone)
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
        Some(function) => match senders::check(function, role) {
            Ok(()) => ready(client, function),
            Err(refusal) => {
                let named = senders::signature(client, function);
                Check::Refused(refusal.at_delivery(&registered, &role_name, function, named))
            }
        },
    };
    (check, Some(queue))
}

/// The settings a new session of `role` in this database starts with.
fn login_settings(client: &mut pgrx::spi::SpiClient<'_>, role: Oid) -> Vec<String> {
    // SAFETY: MyDatabaseId is set when the worker connects to its database
    // and never changes after.
    let database = unsafe { pg_sys::MyDatabaseId };
    db::run(
        client,
        &queries::LOGIN_SETTINGS,
        args![role = role, database = database],
    )
    .map(|r| r.value::<String>("setting"))
    .collect()
}

/// How many jobs one batch of `queue` claims at most.
fn size_of(queue: &SenderQueue) -> usize {
    queue.batch_size.min(gucs::MAX_BATCH_SIZE.get()).max(1) as usize
}

fn sender_queues(client: &mut pgrx::spi::SpiClient<'_>) -> Vec<SenderQueue> {
    db::run(client, &queries::SENDER_QUEUES, args![])
        .map(|r| SenderQueue {
            id: r.value("id"),
            name: r.value("name"),
            batch_size: r.value("batch_size"),
            webhook: Webhook::of_row(&r),
        })
        .collect()
}

/// What queue_workers shows of a transaction of outcomes: jobs delivered,
/// failed attempts, the last error.
pub(super) fn note_outcomes(
    slot: usize,
    delivered: usize,
    failures: usize,
    last_error: Option<String>,
) {
    let mut shared = SHARED.exclusive();
    let me = &mut shared.workers[slot];
    me.delivered += delivered as i64;
    me.failed += failures as i64;
    me.last_active_at = crate::time::now_us();
    if let Some(message) = last_error {
        me.set_last_error(&message);
    }
}

/// Claims up to `size` due jobs of queue `queue_id` (`name`) for the worker,
/// with the queue as it stands now; none when it is gone, paused or no
/// longer delivered. (SQL senders and webhooks alike; `bodies`: with the
/// webhook requests' bodies.)
pub(super) fn claim_for_worker(
    client: &mut pgrx::spi::SpiClient<'_>,
    queue_id: i32,
    name: &str,
    size: usize,
    bodies: bool,
) -> jobs::Claim {
    let none = jobs::Claim {
        jobs: Vec::new(),
        held_back: false,
    };
    let found = match catalog::find(client, name) {
        Ok(Some(found)) => found,
        Ok(None) => return none,
        Err(e) => e.raise(),
    };
    if found.id != queue_id || found.paused || found.sender.is_none() {
        return none;
    }
    jobs::claim(
        client,
        &found,
        size,
        found.lease_us,
        Some(WORKER_NAME),
        bodies,
    )
}

/// Step 1: claims up to `size` due jobs of `queue` for the worker; true
/// when a limit of the queue kept some back.
fn claim(
    client: &mut pgrx::spi::SpiClient<'_>,
    queue: &SenderQueue,
    size: usize,
) -> (Vec<InFlight>, bool) {
    let claim = claim_for_worker(client, queue.id, &queue.name, size, false);
    let jobs = claim
        .jobs
        .into_iter()
        .map(|job| InFlight {
            id: job.id,
            lease: job.lease,
        })
        .collect();
    (jobs, claim.held_back)
}

/// A job a stopped worker left in flight: claimed again (a new attempt),
/// buried when it has none left, or ready again when its queue no longer
/// has a sender. Returns its queue and claim when it is to be delivered.
fn recover_one(client: &mut pgrx::spi::SpiClient<'_>, id: i64) -> Option<(i32, InFlight)> {
    let row = db::run(
        client,
        &queries::RECOVER_LOCK,
        args![id = id, worker = WORKER_NAME],
    )
    .first()?;
    let attempts: i32 = row.value("attempts");
    let max_attempts: i32 = row.value("max_attempts");
    let lease: pgrx::datum::Interval = row.value("lease");
    let sql_sender: bool = row.value("sql_sender");
    let queue_id: i32 = row.value("queue_id");
    let now = crate::time::now_us();
    let stopped = format!("the queue worker stopped during attempt {attempts} of {max_attempts}");
    if !sql_sender {
        db::run(client, &queries::RELEASE_ONE, args![id = id]);
        return None;
    }
    if attempts >= max_attempts {
        jobs::bury(client, vec![id], now, Some(&stopped));
        return None;
    }
    let expires = db::timestamp(add_delay(now, catalog::micros(&lease)));
    let lease: Uuid = db::run(
        client,
        &queries::RECOVER_CLAIM,
        args![id = id, lease_until = expires, error = stopped.as_str()],
    )
    .first()?
    .value("lease");
    Some((queue_id, InFlight { id, lease }))
}

/// A background worker reports its table statistics itself (PostgreSQL 15),
/// or autovacuum never hears of its dead tuples. Outside a transaction.
pub fn report_stat() {
    // SAFETY: callers call it between the worker's transactions, never
    // inside one, as pgstat_report_stat requires.
    unsafe { pg_sys::pgstat_report_stat(false) };
}

/// When queue_cleanup() next has a job to remove (see next_cleanup.sql).
pub fn next_cleanup(client: &mut pgrx::spi::SpiClient<'_>) -> Option<i64> {
    time_of(client, &queries::NEXT_CLEANUP)
}

/// When something falls due that no commit will announce (see
/// next_due.sql), in microseconds since 2000; None: nothing.
pub fn next_due(client: &mut pgrx::spi::SpiClient<'_>) -> Option<i64> {
    time_of(client, &queries::NEXT_DUE)
}

/// The one timestamp `at` that `stmt` returns (NULL: None).
fn time_of(client: &mut pgrx::spi::SpiClient<'_>, stmt: &'static db::Statement) -> Option<i64> {
    db::run(client, stmt, args![])
        .first()
        .expect("one row")
        .get::<pgrx::datum::TimestampWithTimeZone>("at")
        .map(|t| t.into_inner())
}
