//! Looking at a queue's groups (docs/groups.md).

use pgrx::datum::Interval;
use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use crate::catalog;
use crate::db::{self, args};
use crate::errors::{required, OrRaise};
use crate::queries;
use crate::rules;

/// The groups of `queue` with unfinished jobs, for the queue's owner and
/// for monitoring roles (pg_monitor), as the views are.
// The column names live in the signature, where pgrx reads them.
#[allow(clippy::type_complexity)]
#[pg_extern(stable, parallel_restricted)]
fn queue_groups(
    queue: Option<&str>,
) -> TableIterator<
    'static,
    (
        name!(group_key, String),
        name!(pending, i64),
        name!(processing, i64),
        name!(oldest_due_age, Option<Interval>),
        name!(head_id, Option<i64>),
    ),
> {
    let name = required(queue, "queue");
    rules::check_name(name).or_raise();
    let caller = db::calling_role();
    let rows: Vec<_> = db::with_tables(|client| {
        // Reads only, so it works on a hot standby too.
        let queue = catalog::require_read(client, name).or_raise();
        if !monitors(caller) {
            queue.check_owner(caller, "list the groups of").or_raise();
        }
        db::read(
            client,
            &queries::GROUPS,
            args![queue_id = queue.id, ordered = queue.limits.ordered],
        )
        .map(|r| {
            (
                r.value("group_key"),
                r.value("pending"),
                r.value("processing"),
                r.get("oldest_due_age"),
                r.get("head_id"),
            )
        })
        .collect()
    });
    TableIterator::new(rows)
}

/// Whether `role` has the privileges of pg_monitor.
fn monitors(role: Oid) -> bool {
    // SAFETY: a syscache lookup inside the caller's transaction; the oids
    // are plain values.
    unsafe { pg_sys::has_privs_of_role(role, Oid::from(pg_sys::ROLE_PG_MONITOR)) }
}
