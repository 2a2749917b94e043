//! Jobs that wait for other jobs (docs/dependencies.md). A child enqueued
//! with `depends_on` is `blocked` until each of its parents has ended as it
//! needs: an edge (queue_edges) from each parent not yet ended, and a count
//! of them on the child's row (waiting_for). A parent's end settles its
//! children in its own transaction, through its edges: each edge it counts
//! is deleted, and the child's count goes down on the child's row, where
//! parents that end at once take turns (a row lock), so the one that counts
//! the last parent releases the child, exactly once. A parent that fails
//! (or is cancelled, or purged unfinished) cancels the children that cancel
//! with it, and so on down the graph, keeping those edges; a retry of it
//! puts them back. Jobs without parents or children touch none of it: a
//! job's row says whether jobs wait for it (has_children).

use std::collections::{HashMap, HashSet};

use pgrx::spi::SpiClient;

use crate::announce;
use crate::db::{self, args};
use crate::ended_rows;
use crate::ends::{Ended, Outcome};
use crate::errors::QueueError;
use crate::queries;

/// What the enqueue of children with parents did to them.
#[derive(Debug, PartialEq, Eq)]
pub enum Children {
    /// Due as enqueued: every parent had ended as they need.
    Due,
    /// Blocked until their parents end.
    Blocked,
    /// Cancelled at once: a parent had failed or been cancelled.
    Cancelled,
}

/// Jobs `children`, just enqueued in this transaction, depend on `parents`
/// (distinct, in the caller's order); `cancels`: a parent's failure cancels
/// them (on_parent_failure 'cancel'), else they run once every parent has
/// ended. 23503 when a parent does not exist or is no longer retained.
pub fn wait_for(
    client: &mut SpiClient<'_>,
    children: Vec<i64>,
    parents: Vec<i64>,
    cancels: bool,
) -> Children {
    // Locked first: a parent that ends now waits for this transaction, or has
    // ended before the look that follows, which sees it.
    let unfinished: HashSet<i64> =
        db::run(client, &queries::LOCK_PARENTS, args![ids = parents.clone()])
            .map(|r| r.value::<i64>("id"))
            .collect();
    let others: Vec<i64> = parents
        .iter()
        .copied()
        .filter(|p| !unfinished.contains(p))
        .collect();
    let ended: HashMap<i64, Outcome> = if others.is_empty() {
        HashMap::new()
    } else {
        db::look(client, &queries::PARENTS_ENDED, args![ids = others.clone()])
            .map(|r| {
                (
                    r.value("id"),
                    Outcome::of_status(&r.value::<String>("status")),
                )
            })
            .collect()
    };
    if let Some(missing) = others.iter().find(|p| !ended.contains_key(p)) {
        // A parent made after this transaction's snapshot, in REPEATABLE READ:
        // a serialization failure, not a missing job.
        let live = db::look(client, &queries::LIVE_IDS, args![ids = vec![*missing]]);
        if !live.is_empty() {
            QueueError::SerializationFailure {
                what:
                    "a parent of the jobs enqueued was enqueued after this transaction's snapshot",
            }
            .raise();
        }
        QueueError::MissingParent { id: *missing }.raise();
    }
    let waiting: Vec<i64> = parents
        .iter()
        .copied()
        .filter(|p| unfinished.contains(p))
        .collect();
    // the first parent that failed (or was cancelled), when that cancels
    let failed: Vec<(i64, Outcome)> = match cancels {
        true => parents
            .iter()
            .filter_map(|p| ended.get(p).map(|o| (*p, *o)))
            .filter(|(_, o)| *o != Outcome::Succeeded)
            .collect(),
        false => Vec::new(),
    };
    db::run(
        client,
        &queries::DEPEND,
        args![
            children = children.clone(),
            depends_on = parents,
            waiting = waiting.clone(),
            cancels = cancels,
            failed = failed.iter().map(|(p, _)| *p).collect::<Vec<i64>>(),
        ],
    );
    if let Some((parent, outcome)) = failed.first() {
        cancel(
            client,
            children.iter().map(|c| (*c, *parent, *outcome)).collect(),
        );
        return Children::Cancelled;
    }
    if waiting.is_empty() {
        Children::Due
    } else {
        Children::Blocked
    }
}

/// Jobs `parents` ended as each says, in this transaction: their children
/// are settled, round after round down the graph (a child cancelled by a
/// parent's failure is a parent that ended in turn).
pub fn settle(client: &mut SpiClient<'_>, mut parents: Vec<(i64, Outcome)>) {
    while !parents.is_empty() {
        let (ids, outcomes): (Vec<i64>, Vec<&str>) =
            parents.iter().map(|(id, o)| (*id, o.word())).unzip();
        let counted: Vec<i64> = db::run(
            client,
            &queries::SETTLE_EDGES,
            args![parents = ids.clone(), outcomes = outcomes.clone()],
        )
        .map(|r| r.value("child"))
        .collect();
        if !counted.is_empty() {
            count(client, counted);
        }
        let cancelling: Vec<(i64, i64, Outcome)> = db::run(
            client,
            &queries::CANCELLING_EDGES,
            args![parents = ids, outcomes = outcomes],
        )
        .map(|r| {
            let outcome = Outcome::of_status(&r.value::<String>("outcome"));
            (r.value("child"), r.value("parent"), outcome)
        })
        .collect();
        parents = cancel(client, cancelling)
            .into_iter()
            .filter(|job| job.has_children)
            .map(|job| (job.id, Outcome::Cancelled))
            .collect();
    }
}

/// Children `counted` (one element per parent counted) wait for fewer
/// parents; those released are announced, as an enqueue's jobs are.
fn count(client: &mut SpiClient<'_>, counted: Vec<i64>) {
    let now = crate::time::now_us();
    let changed: Vec<(i64, bool, i32, i64, bool)> = db::run(
        client,
        &queries::COUNT_PARENTS,
        args![children = counted.clone(), now = db::timestamp(now)],
    )
    .map(|r| {
        let run_at: pgrx::datum::TimestampWithTimeZone = r.value("run_at");
        (
            r.value("id"),
            r.value("released"),
            r.value("queue_id"),
            run_at.into_inner(),
            r.value("pushed"),
        )
    })
    .collect();
    for (_, released, queue_id, run_at, pushed) in &changed {
        if *released {
            announce::work_due(*queue_id, *pushed, 1, *run_at);
        }
    }
    if !db::read_committed() && changed.len() < counted.iter().collect::<HashSet<_>>().len() {
        // A child that this transaction's snapshot does not see, which a
        // resume committed since (REPEATABLE READ, SERIALIZABLE): its count
        // would be lost.
        let seen: HashSet<i64> = changed.iter().map(|c| c.0).collect();
        let unseen: Vec<i64> = counted.into_iter().filter(|c| !seen.contains(c)).collect();
        if !db::look(client, &queries::LIVE_IDS, args![ids = unseen]).is_empty() {
            QueueError::SerializationFailure {
                what: "a job that waits for the job ended was put back after this transaction's snapshot",
            }
            .raise();
        }
    }
}

/// Cancels jobs (child, parent, how the parent ended) that are still
/// unfinished; returns those it ended.
fn cancel(client: &mut SpiClient<'_>, children: Vec<(i64, i64, Outcome)>) -> Vec<Ended> {
    if children.is_empty() {
        return Vec::new();
    }
    let mut ids = Vec::with_capacity(children.len());
    let mut parents = Vec::with_capacity(children.len());
    let mut outcomes = Vec::with_capacity(children.len());
    let mut seen = HashSet::new();
    for (child, parent, outcome) in children {
        // A child that two failing parents cancel is cancelled by the first.
        if seen.insert(child) {
            ids.push(child);
            parents.push(parent);
            outcomes.push(outcome.word());
        }
    }
    cancel_children(client, ids, parents, outcomes)
}

/// Job `parent` was put back (queue_retry): the jobs its end cancelled
/// wait for it again, and so do, down the graph, the jobs their
/// cancellation cancelled.
pub fn resume(client: &mut SpiClient<'_>, parent: i64) {
    let mut parents = vec![parent];
    let run_at = db::timestamp(crate::time::now_us());
    while let Some(parent) = parents.pop() {
        let children: Vec<i64> = db::run(client, &queries::RESUME_FIND, args![parent = parent])
            .map(|r| r.value("id"))
            .collect();
        if children.is_empty() {
            continue;
        }
        let mut waiting: HashMap<i64, i32> = HashMap::new();
        for row in db::run(
            client,
            &queries::LOCK_EDGES,
            args![children = children.clone()],
        ) {
            *waiting.entry(row.value("child")).or_default() += 1;
        }
        let counts: Vec<i32> = children
            .iter()
            .map(|c| waiting.get(c).copied().unwrap_or(1))
            .collect();
        for row in db::run(
            client,
            &queries::RESUME,
            args![ids = children, waiting = counts, run_at = run_at],
        ) {
            if row.value::<bool>("has_children") {
                parents.push(row.value("id"));
            }
        }
    }
}

/// Jobs `ids` end cancelled because their `parents` (one per job) ended as
/// `outcomes` say; returns those it ended (`settle` settles theirs).
fn cancel_children(
    client: &mut SpiClient<'_>,
    ids: Vec<i64>,
    parents: Vec<i64>,
    outcomes: Vec<&str>,
) -> Vec<Ended> {
    let now = db::timestamp(crate::time::now_us());
    ended_rows::announced(
        db::run(
            client,
            &queries::CANCEL_CHILDREN,
            args![
                ids = ids,
                at = now,
                status = "cancelled",
                parents = parents,
                outcomes = outcomes
            ],
        ),
        Outcome::Cancelled,
    )
}
