//! Push delivery in one database, as docs/push.md's delivery protocol
//! says: a round claims one batch of each sender queue with due jobs,
//! starting after the queue served last, and hands it to its path: SQL
//! senders (sql_delivery.rs) or webhooks (http.rs). Both claim and tally
//! through batches.rs; data flows one way, round -> path -> helpers.
//!
//! Jobs that a stopped worker left in flight are claimed again one per
//! transaction, so that a job that kills its worker (or the server) only
//! uses up its own attempts.

use super::http::{Http, Webhook};
use super::session::{self, report_stat, Session};
use super::sql_delivery::{self, Recovery};
use crate::catalog;
use crate::contract::WORKER_NAME;
use crate::db::{self, args};
use crate::gucs;
use crate::queries;

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
    /// made ready again when its queue lost its sender). Returns how many,
    /// and when to look again for those that wait for a rate window.
    pub fn recover(&mut self, session: &Session) -> (usize, Option<i64>) {
        sql_delivery::mark_suspects(session);
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
        let mut later: Option<i64> = None;
        for &id in &left {
            let recovery =
                session::transaction(|| session.tables(|c| sql_delivery::recover_one(c, id)));
            report_stat();
            match recovery {
                Recovery::Deliver(queue_id, job) => {
                    sql_delivery::deliver(session, self.slot, queue_id, vec![job]);
                }
                Recovery::Later(at) => later = Some(later.map_or(at, |l| l.min(at))),
                Recovery::Done => {}
            }
        }
        (left.len(), later)
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
                    round.held_back = true;
                    continue;
                }
                let batch = session::transaction(|| {
                    session.tables(|client| {
                        // What came back is recorded first: it makes room.
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
            let claimed =
                sql_delivery::claim_and_deliver(session, self.slot, queue.id, &queue.name, size);
            self.last_served = queue.id;
            if claimed.jobs == 0 {
                continue;
            }
            round.claimed += claimed.jobs;
            round.batches += 1;
            // A limit or an order that kept jobs back lets them go once these end.
            round.more |= claimed.full || claimed.held_back;
        }
        round
    }
}

/// How many jobs one batch of `queue` claims at most.
fn size_of(queue: &SenderQueue) -> usize {
    queue.batch_size.min(gucs::MAX_BATCH_SIZE.get()).max(1) as usize
}

fn sender_queues(client: &mut pgrx::spi::SpiClient<'_>) -> Vec<SenderQueue> {
    db::run(client, &queries::SENDER_QUEUES, args![])
        .map(|r| {
            // Kept in this backend's cache of queues: the round's claims then
            // look no queue up.
            let queue = catalog::cache_row(&r);
            SenderQueue {
                id: queue.id,
                name: queue.name,
                batch_size: r.value("batch_size"),
                webhook: Webhook::of_row(&r),
            }
        })
        .collect()
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
