//! Creating, altering, pausing, purging and dropping queues.

use pgrx::datum::{DatumWithOid, Interval};
use pgrx::prelude::*;

use super::duration;
use crate::catalog;
use crate::db::{self, args};
use crate::errors::{required, OrRaise, QueueError};
use crate::queries;
use crate::rules::{self, at_least_zero, positive};
use crate::worker::wake;

/// Runs `f` on the queue named `name`, which the calling role must own to
/// `action` it.
pub(super) fn with_owned_queue<R>(
    name: &str,
    action: &'static str,
    f: impl FnOnce(&mut pgrx::spi::SpiClient<'_>, catalog::Queue) -> R,
) -> R {
    let caller = db::calling_role();
    db::with_tables(|client| {
        let queue = catalog::require(client, name).or_raise();
        queue.check_owner(caller, action).or_raise();
        f(client, queue)
    })
}

/// The policy options of a queue, each checked against its range. `None`
/// means "not given" (only `queue_alter` allows that).
struct Options<'a> {
    max_attempts: Option<i32>,
    backoff: Option<&'a str>,
    retry_delay: Option<Interval>,
    max_retry_delay: Option<Interval>,
    lease: Option<Interval>,
    retention: Option<Interval>,
}

impl Options<'_> {
    fn check(&self) -> Result<(), QueueError> {
        if let Some(n) = self.max_attempts {
            rules::check_max_attempts(n)?;
        }
        if let Some(word) = self.backoff {
            rules::parse_backoff(word)?;
        }
        let intervals = [
            ("retry_delay", &self.retry_delay),
            ("max_retry_delay", &self.max_retry_delay),
            ("retention", &self.retention),
        ];
        for (option, value) in intervals {
            if let Some(v) = value {
                at_least_zero(option, &duration(v))?;
            }
        }
        if let Some(v) = &self.lease {
            positive("lease", &duration(v))?;
        }
        Ok(())
    }

    /// Runs `stmt` with the `leading` arguments, then the options, in the
    /// order of their columns (queue_create's and queue_alter's statements).
    fn run(
        &self,
        client: &mut pgrx::spi::SpiClient<'_>,
        stmt: &'static db::Statement,
        leading: Vec<(&'static str, DatumWithOid<'_>)>,
    ) {
        let (mut names, mut values): (Vec<_>, Vec<_>) = leading.into_iter().unzip();
        names.extend([
            "max_attempts",
            "backoff",
            "retry_delay",
            "max_retry_delay",
            "lease",
            "retention",
        ]);
        values.extend([
            self.max_attempts.into(),
            self.backoff.into(),
            self.retry_delay.into(),
            self.max_retry_delay.into(),
            self.lease.into(),
            self.retention.into(),
        ]);
        db::run(client, stmt, (&names, &values));
    }
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_create(
    queue: Option<&str>,
    max_attempts: default!(Option<i32>, 5),
    backoff: default!(Option<&str>, "'exponential'"),
    retry_delay: default!(Option<Interval>, "'1 second'"),
    max_retry_delay: default!(Option<Interval>, "'1 hour'"),
    lease: default!(Option<Interval>, "'5 minutes'"),
    retention: default!(Option<Interval>, "'1 day'"),
) {
    let name = required(queue, "queue");
    let options = Options {
        max_attempts: Some(required(max_attempts, "max_attempts")),
        backoff: Some(required(backoff, "backoff")),
        retry_delay: Some(required(retry_delay, "retry_delay")),
        max_retry_delay: Some(required(max_retry_delay, "max_retry_delay")),
        lease: Some(required(lease, "lease")),
        retention: Some(required(retention, "retention")),
    };
    rules::check_name(name).or_raise();
    options.check().or_raise();
    let owner = db::calling_role();
    db::with_tables(|client| {
        options.run(
            client,
            &queries::CREATE_QUEUE,
            vec![("name", name.into()), ("owner", owner.into())],
        );
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_alter(
    queue: Option<&str>,
    max_attempts: default!(Option<i32>, "NULL"),
    backoff: default!(Option<&str>, "NULL"),
    retry_delay: default!(Option<Interval>, "NULL"),
    max_retry_delay: default!(Option<Interval>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    retention: default!(Option<Interval>, "NULL"),
) {
    let name = required(queue, "queue");
    let options = Options {
        max_attempts,
        backoff,
        retry_delay,
        max_retry_delay,
        lease,
        retention,
    };
    rules::check_name(name).or_raise();
    options.check().or_raise();
    with_owned_queue(name, "alter", |client, queue| {
        options.run(
            client,
            &queries::ALTER_QUEUE,
            vec![("queue_id", queue.id.into())],
        );
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_drop(queue: Option<&str>, force: default!(Option<bool>, false)) -> bool {
    let name = required(queue, "queue");
    let force = required(force, "force");
    let caller = db::calling_role();
    db::with_tables(|client| {
        let Some(queue) = catalog::find(client, name).or_raise() else {
            return false;
        };
        queue.check_owner(caller, "drop").or_raise();
        catalog::lock_queue(queue.id, true);
        let row = db::run(
            client,
            &queries::DROP_QUEUE,
            args![queue_id = queue.id, force = force],
        )
        .first()
        .expect("one row");
        let dropped: i64 = row.value("dropped");
        let unfinished: i64 = row.value("unfinished");
        if dropped == 0 && unfinished > 0 {
            QueueError::UnfinishedJobs {
                name: name.to_string(),
                unfinished,
            }
            .raise();
        }
        dropped > 0
    })
}

/// Pausing and resuming: a paused queue still takes jobs, but hands none out.
fn set_paused(queue: Option<&str>, paused: bool) {
    let name = required(queue, "queue");
    rules::check_name(name).or_raise();
    let action = if paused { "pause" } else { "resume" };
    with_owned_queue(name, action, |client, queue| {
        db::run(
            client,
            &queries::SET_PAUSED,
            args![queue_id = queue.id, paused = paused],
        );
        if !paused {
            wake::on_commit(queue.sender.is_some());
        }
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_pause(queue: Option<&str>) {
    set_paused(queue, true)
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_resume(queue: Option<&str>) {
    set_paused(queue, false)
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_purge(queue: Option<&str>, status: default!(Option<&str>, "NULL")) -> i64 {
    let name = required(queue, "queue");
    rules::check_name(name).or_raise();
    let status = status.map(|s| rules::check_status(s).or_raise());
    with_owned_queue(name, "purge", |client, queue| {
        db::run(
            client,
            &queries::PURGE,
            args![queue_id = queue.id, status = status],
        )
        .first()
        .expect("one row")
        .value::<i64>("purged")
    })
}
