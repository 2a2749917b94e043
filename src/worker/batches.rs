//! What both delivery paths (SQL senders and webhooks) share: claiming a
//! batch of a sender queue for the worker, and the tally of outcomes that
//! queue_workers shows once their transaction commits.

use pgrx::spi::SpiClient;

use super::shared::SHARED;
use crate::catalog::{self, Queue};
use crate::contract::WORKER_NAME;
use crate::jobs;
use crate::limits::{self, Turn};

/// What a transaction recorded, for queue_workers once it commits.
#[derive(Default)]
pub struct Tally {
    pub delivered: usize,
    pub failures: usize,
    pub last_error: Option<String>,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.delivered += other.delivered;
        self.failures += other.failures;
        if other.last_error.is_some() {
            self.last_error = other.last_error;
        }
    }

    /// Shows the tally in queue_workers (after the commit): jobs delivered,
    /// failed attempts, the last error.
    pub fn note(self, slot: usize) {
        if self.delivered + self.failures == 0 {
            return;
        }
        let mut shared = SHARED.exclusive();
        let me = &mut shared.workers[slot];
        me.delivered += self.delivered as i64;
        me.failed += self.failures as i64;
        me.last_active_at = crate::time::now_us();
        if let Some(message) = self.last_error {
            me.set_last_error(&message);
        }
    }
}

/// Queue `queue_id` (`name`) as the latest committed change to a queue left
/// it, if the worker is to deliver it: none when it is gone, paused or no
/// longer delivered.
pub fn queue_for_worker(client: &mut SpiClient<'_>, queue_id: i32, name: &str) -> Option<Queue> {
    // The batch in this transaction must follow the rules read here: they are
    // read under the rules lock, which a change waits for. The round's
    // sender_queues.sql cached the queue, so this runs no statement unless a
    // change to a queue made this backend forget it since.
    catalog::lock_rules(queue_id, false);
    let found = catalog::by_id(client, queue_id)?;
    (found.name == name && !found.paused && found.sender.is_some()).then_some(found)
}

/// How a batch of a queue is taken by the worker.
pub enum Taking {
    /// Locked and delivered in one transaction, as nothing counts its jobs
    /// in flight (an ordered queue's locked heads are still their groups'
    /// oldest unfinished jobs, which hold the later ones back).
    InOne,
    /// Locked and delivered in one transaction with its turn beside the
    /// claims under way (limits::turn_beside), whose reservation counts as
    /// jobs in flight (and claimed in the rate window) until it commits: a
    /// queue whose limits are all of the queue as a whole, not ordered.
    InOneWithTurn(Turn),
    /// Claimed in a transaction that commits first, delivered after.
    ClaimedFirst,
}

/// How a batch of up to `size` jobs of `queue` is taken.
pub fn taking(queue: &Queue, size: usize) -> Taking {
    let limits = &queue.limits;
    if !limits::takes_turn(limits) {
        return Taking::InOne;
    }
    if limits.ordered {
        return Taking::ClaimedFirst;
    }
    limits::turn_beside(queue, size).map_or(Taking::ClaimedFirst, Taking::InOneWithTurn)
}

/// Claims up to `size` due jobs of `queue` for the worker, under its lease
/// (SQL senders and webhooks alike; `bodies`: with the webhook requests'
/// bodies).
pub fn claim_for_worker(
    client: &mut SpiClient<'_>,
    queue: &Queue,
    size: usize,
    bodies: bool,
) -> jobs::Claim {
    jobs::claim(
        client,
        queue,
        size,
        queue.lease_us,
        Some(WORKER_NAME),
        bodies,
    )
}
