//! `CALL queue_wait(queue, timeout, OUT ready)`: waits until the queue has a
//! job a claim could take, without polling and without holding a snapshot.
//!
//! A function called from a SELECT keeps its statement's snapshot (and so
//! the backend's xmin, which holds back vacuum) for as long as it runs. A
//! procedure called with CALL outside a transaction block may end its
//! transaction instead, as PL/pgSQL's COMMIT does: each look at the queue
//! runs in a transaction of its own, committed at once (giving back its
//! snapshot and its locks), and the wait in between holds nothing but an
//! empty transaction. Commits that make a job claimable set the waiter's
//! latch (worker/waiters.rs); jobs due by the clock are waited for with a
//! timeout.
//!
//! It is written as a bare C function (pgrx makes functions, not
//! procedures): the CREATE PROCEDURE is below, and the result row is built
//! here.

use std::collections::HashSet;

use pgrx::datum::Interval;
use pgrx::fcinfo::pg_getarg;
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::{duration, procedure};
use crate::catalog;
use crate::db::{self, args};
use crate::errors::{required, OrRaise, QueueError};
use crate::limits::{self, Pick, Turn};
use crate::queries;
use crate::rules;
use crate::worker::shared;
use crate::worker::waiters::{self, Wake};

extension_sql!(
    r#"
-- (PostgreSQL takes no OUT parameter of a procedure after one with a
-- default: the timeout's default of 30 seconds is the first form)
CREATE PROCEDURE queue_wait(queue text, OUT ready boolean)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_wait_wrapper';
CREATE PROCEDURE queue_wait(queue text, timeout interval, OUT ready boolean)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_wait_wrapper';
"#,
    name = "queue_wait"
);

/// The timeout of the form without one.
const DEFAULT_TIMEOUT_S: f64 = 30.0;

/// The version-1 calling convention, as PG_FUNCTION_INFO_V1 declares it.
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_queue_wait_wrapper() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The procedure `queue_wait`.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the C function of the procedure created
/// above: `fcinfo` holds its two arguments.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn queue_wait_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is the call's: a text and, in the second form, an
    // interval (a CALL passes no OUT argument).
    let (name, timeout) = unsafe {
        let timeout = match (*fcinfo).nargs {
            1 => Some(Interval::from_seconds(DEFAULT_TIMEOUT_S)),
            _ => pg_getarg::<Interval>(fcinfo, 1),
        };
        (pg_getarg::<String>(fcinfo, 0), timeout)
    };
    let name = required(name, "queue");
    let timeout = rules::check_wait_timeout(&duration(&required(timeout, "timeout"))).or_raise();
    rules::check_name(&name).or_raise();
    // SAFETY: as above.
    if !unsafe { procedure::outside_transaction_block(fcinfo) } {
        QueueError::WaitInTransaction {
            procedure: "queue_wait",
        }
        .raise();
    }
    if !shared::available() {
        QueueError::WaitWithoutPreload {
            procedure: "queue_wait",
        }
        .raise();
    }
    let ready = wait(&name, timeout);
    // SAFETY: as above; the row is made in the call's memory context,
    // which outlives the commits of the wait.
    unsafe { procedure::result_row(fcinfo, &[Some(pg_sys::Datum::from(ready))]) }
}

/// What one look at the queue found.
struct Look {
    queue_id: i32,
    ready: bool,
    /// Ready jobs are there that a limit or the order held back.
    held: bool,
    /// When the clock makes a job due, if it does.
    next_at: Option<i64>,
}

/// Waits up to `timeout_us` for queue `name`; true when a claim could take
/// a job.
fn wait(name: &str, timeout_us: i64) -> bool {
    procedure::nonatomic(|| wait_connected(name, timeout_us))
}

/// `wait`, once connected.
fn wait_connected(name: &str, timeout_us: i64) -> bool {
    let end = crate::time::now_us().saturating_add(timeout_us);
    let first = procedure::in_own_transaction(|| look(name));
    if first.ready {
        return true;
    }
    // the slot is taken before the look whose snapshot must see every
    // commit that did not find it (waiters.rs)
    let queue_id = first.queue_id;
    // SAFETY: MyDatabaseId is set once the backend is connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let registration = waiters::register(database, queue_id).unwrap_or_else(|| {
        QueueError::WaitWithoutPreload {
            procedure: "queue_wait",
        }
        .raise()
    });
    let ready = 'wait: loop {
        registration.before_look();
        let found = procedure::in_own_transaction(|| look(name));
        if found.queue_id != queue_id {
            // dropped and made again under the same name meanwhile
            break 'wait true;
        }
        registration.set_held(found.held);
        if found.ready {
            break 'wait true;
        }
        loop {
            let now = crate::time::now_us();
            if now >= end {
                break 'wait false;
            }
            let mut until = end.min(found.next_at.unwrap_or(i64::MAX));
            match registration.take_wake(now) {
                Wake::Now => continue 'wait,
                Wake::At(at) => until = until.min(at),
                Wake::Nothing => {}
            }
            if until <= now {
                continue 'wait;
            }
            procedure::sleep_until(until - now);
        }
    };
    drop(registration);
    ready
}

/// One look at queue `name`: is a job claimable, and if not, when the clock
/// makes one due.
fn look(name: &str) -> Look {
    db::with_tables(|client| {
        let queue = catalog::require_read(client, name).or_raise();
        queue.check_pulled().or_raise();
        let mut found = Look {
            queue_id: queue.id,
            ready: false,
            held: false,
            next_at: None,
        };
        if queue.paused {
            // Its resume wakes the waiters.
            return found;
        }
        let now = crate::time::now_us();
        let row = db::read(
            client,
            &queries::WAIT_CHECK,
            args![queue_id = queue.id, now = db::timestamp(now)],
        )
        .first()
        .expect("one row");
        let at = |column: &str| {
            row.get::<TimestampWithTimeZone>(column)
                .map(|t| t.into_inner())
        };
        found.next_at = at("next_at");
        if row.value::<bool>("due_or_expired") {
            found.ready = true;
        } else if row.value::<bool>("ready") {
            // A queue without limits or order is answered without a statement.
            // A look never waits, so `clock` stays `now`.
            let mut clock = now;
            let look = limits::choose(client, &queue, &Turn::Look, 1, &mut clock, &HashSet::new());
            found.ready = match look.pick {
                Pick::Next(n) => n > 0,
                Pick::These(ids) => !ids.is_empty(),
            };
            if !found.ready {
                found.held = true;
                found.next_at = [found.next_at, at("window_ends_at")]
                    .into_iter()
                    .flatten()
                    .min();
            }
        }
        found
    })
}
