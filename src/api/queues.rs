//! Creating, altering, pausing, purging and dropping queues.

use pgrx::datum::{DatumWithOid, Interval};
use pgrx::prelude::*;

use super::duration;
use crate::announce;
use crate::catalog;
use crate::db::{self, args};
use crate::ends::{Ended, Outcome};
use crate::errors::{no_null_elements, required, OrRaise, QueueError};
use crate::jobs;
use crate::queries;
use crate::rules::{self, at_least_zero, positive};

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
    ordered: Option<bool>,
    max_in_flight: Option<i32>,
    group_max_in_flight: Option<i32>,
    rate_limit: Option<&'a str>,
    group_rate_limit: Option<&'a str>,
}

/// A rate limit option as its two columns: how many jobs (0: no limit) and
/// the window. (None, None): not given.
type Rate = (Option<i32>, Option<Interval>);

/// Reads rate limit option `option` (`'<n>/<interval>'` or `'none'`); the
/// interval by PostgreSQL's own input function.
fn rate(option: &'static str, text: Option<&str>) -> Result<Rate, QueueError> {
    let Some(text) = text else {
        return Ok((None, None));
    };
    let Some((n, window)) = rules::split_rate(option, text)? else {
        return Ok((Some(0), None));
    };
    let interval = parse_interval(window);
    rules::check_rate_window(option, text, interval.as_ref().map(catalog::micros))?;
    Ok((Some(n), interval))
}

/// `text` as an interval, or None when PostgreSQL does not read it as one.
fn parse_interval(text: &str) -> Option<Interval> {
    let text = std::ffi::CString::new(text).ok()?;
    // In a subtransaction: a refusal raises an error, which becomes None.
    crate::worker::subxact::run(|| {
        // SAFETY: interval_in reads the NUL-terminated string, which
        // outlives the call, and takes the type modifier -1 (none).
        unsafe {
            pgrx::direct_function_call::<Interval>(
                pg_sys::interval_in,
                &[
                    text.as_c_str().into_datum(),
                    pg_sys::InvalidOid.into_datum(),
                    (-1i32).into_datum(),
                ],
            )
        }
    })
    .ok()
    .flatten()
}

impl Options<'_> {
    /// Whether it sets the order or a limit: what claims follow.
    fn changes_rules(&self) -> bool {
        self.ordered.is_some()
            || self.max_in_flight.is_some()
            || self.group_max_in_flight.is_some()
            || self.rate_limit.is_some()
            || self.group_rate_limit.is_some()
    }

    fn check(&self) -> Result<(), QueueError> {
        for (option, value) in [
            ("max_in_flight", self.max_in_flight),
            ("group_max_in_flight", self.group_max_in_flight),
        ] {
            if let Some(n) = value {
                rules::check_in_flight_limit(option, n)?;
            }
        }
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
        let (rate_limit, rate_window) = rate("rate_limit", self.rate_limit).or_raise();
        let (group_rate_limit, group_rate_window) =
            rate("group_rate_limit", self.group_rate_limit).or_raise();
        let (mut names, mut values): (Vec<_>, Vec<_>) = leading.into_iter().unzip();
        names.extend([
            "max_attempts",
            "backoff",
            "retry_delay",
            "max_retry_delay",
            "lease",
            "retention",
            "ordered",
            "max_in_flight",
            "group_max_in_flight",
            "rate_limit",
            "rate_window",
            "group_rate_limit",
            "group_rate_window",
        ]);
        values.extend([
            self.max_attempts.into(),
            self.backoff.into(),
            self.retry_delay.into(),
            self.max_retry_delay.into(),
            self.lease.into(),
            self.retention.into(),
            self.ordered.into(),
            self.max_in_flight.into(),
            self.group_max_in_flight.into(),
            rate_limit.into(),
            rate_window.into(),
            group_rate_limit.into(),
            group_rate_window.into(),
        ]);
        db::run(client, stmt, (&names, &values));
    }
}

// SQL's named arguments with defaults, as API.md gives them.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn queue_create(
    queue: Option<&str>,
    max_attempts: default!(Option<i32>, 5),
    backoff: default!(Option<&str>, "'exponential'"),
    retry_delay: default!(Option<Interval>, "'1 second'"),
    max_retry_delay: default!(Option<Interval>, "'1 hour'"),
    lease: default!(Option<Interval>, "'5 minutes'"),
    retention: default!(Option<Interval>, "'1 day'"),
    ordered: default!(Option<bool>, false),
    max_in_flight: default!(Option<i32>, "NULL"),
    group_max_in_flight: default!(Option<i32>, "NULL"),
    rate_limit: default!(Option<&str>, "NULL"),
    group_rate_limit: default!(Option<&str>, "NULL"),
) {
    let name = required(queue, "queue");
    let options = Options {
        max_attempts: Some(required(max_attempts, "max_attempts")),
        backoff: Some(required(backoff, "backoff")),
        retry_delay: Some(required(retry_delay, "retry_delay")),
        max_retry_delay: Some(required(max_retry_delay, "max_retry_delay")),
        lease: Some(required(lease, "lease")),
        retention: Some(required(retention, "retention")),
        ordered,
        max_in_flight,
        group_max_in_flight,
        rate_limit,
        group_rate_limit,
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

#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
fn queue_alter(
    queue: Option<&str>,
    max_attempts: default!(Option<i32>, "NULL"),
    backoff: default!(Option<&str>, "NULL"),
    retry_delay: default!(Option<Interval>, "NULL"),
    max_retry_delay: default!(Option<Interval>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    retention: default!(Option<Interval>, "NULL"),
    ordered: default!(Option<bool>, "NULL"),
    max_in_flight: default!(Option<i32>, "NULL"),
    group_max_in_flight: default!(Option<i32>, "NULL"),
    rate_limit: default!(Option<&str>, "NULL"),
    group_rate_limit: default!(Option<&str>, "NULL"),
) {
    let name = required(queue, "queue");
    let options = Options {
        max_attempts,
        backoff,
        retry_delay,
        max_retry_delay,
        lease,
        retention,
        ordered,
        max_in_flight,
        group_max_in_flight,
        rate_limit,
        group_rate_limit,
    };
    rules::check_name(name).or_raise();
    options.check().or_raise();
    with_owned_queue(name, "alter", |client, queue| {
        if options.changes_rules() {
            // Waits for the claims under way, which took jobs under the old
            // rules; those after it follow the new ones: see catalog.rs.
            catalog::lock_rules(queue.id, true);
        }
        options.run(
            client,
            &queries::ALTER_QUEUE,
            vec![("queue_id", queue.id.into())],
        );
        // A limit raised or removed lets held jobs go.
        announce::queue_changed(queue.id, queue.sender.is_some());
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
        // Its waiters learn that it is gone, and its jobs' awaiters too.
        announce::queue_dropped(queue.id);
        let gone: Vec<i64> = row.get("gone").unwrap_or_default();
        let parents: Vec<i64> = row.get("parents").unwrap_or_default();
        let ended = Ended::all_of(queue.id, gone, &parents);
        announce::ended(&ended);
        jobs::settle(client, &ended, Outcome::Failed);
        let unfinished: i64 = row.value("unfinished");
        let schedules: i64 = row.value("schedules");
        if dropped == 0 && schedules > 0 {
            QueueError::QueueHasSchedules {
                name: name.to_string(),
                schedules,
            }
            .raise();
        }
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
            announce::queue_changed(queue.id, queue.sender.is_some());
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
fn queue_purge(
    queue: Option<&str>,
    status: default!(Option<&str>, "NULL"),
    ids: default!(Option<Vec<Option<i64>>>, "NULL"),
) -> i64 {
    let name = required(queue, "queue");
    rules::check_name(name).or_raise();
    let status = status.map(|s| rules::check_status(s).or_raise());
    let ids = ids.map(|ids| {
        rules::check_batch_len("ids", ids.len()).or_raise();
        no_null_elements(ids, "ids")
    });
    with_owned_queue(name, "purge", |client, queue| {
        let rows = match ids {
            None => db::run(
                client,
                &queries::PURGE,
                args![queue_id = queue.id, status = status],
            ),
            Some(ids) => db::run(
                client,
                &queries::PURGE_IDS,
                args![queue_id = queue.id, status = status, ids = ids],
            ),
        };
        let row = rows.first().expect("one row");
        // Unfinished jobs purged end: their awaiters return, those in flight
        // or first in their group let others go, and the jobs that wait for
        // them take it as their failure.
        let unfinished: Vec<i64> = row.get("unfinished").unwrap_or_default();
        let parents: Vec<i64> = row.get("parents").unwrap_or_default();
        let purged = row.value::<i64>("purged");
        let ended = Ended::all_of(queue.id, unfinished, &parents);
        announce::ended(&ended);
        jobs::settle(client, &ended, Outcome::Failed);
        purged
    })
}
