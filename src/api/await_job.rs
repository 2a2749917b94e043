//! `CALL queue_await(id, timeout, OUT status, OUT result)`: waits until a
//! job has ended (succeeded, failed, cancelled) and gives its status and
//! result, without polling and without holding a snapshot, as `queue_wait`
//! waits for a queue (api/procedure.rs says how). The commit that ends the
//! job sets the awaiter's latch (worker/waiters.rs, through announce.rs).

use pgrx::datum::Interval;
use pgrx::fcinfo::pg_getarg;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgMemoryContexts;

use super::{duration, procedure};
use crate::db::{self, args};
use crate::errors::{required, OrRaise, QueueError};
use crate::jsonb::Jsonb;
use crate::queries;
use crate::rules;
use crate::worker::shared;
use crate::worker::waiters::{self, Wake};

extension_sql!(
    r#"
-- (PostgreSQL takes no OUT parameter of a procedure after one with a
-- default: the timeout's default of 30 seconds is the first form)
CREATE PROCEDURE queue_await(id bigint, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
CREATE PROCEDURE queue_await(id bigint, timeout interval, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
"#,
    name = "queue_await"
);

/// The timeout of the form without one.
const DEFAULT_TIMEOUT_S: f64 = 30.0;

/// The version-1 calling convention, as PG_FUNCTION_INFO_V1 declares it.
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_queue_await_wrapper() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The procedure `queue_await`.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the C function of the procedure created
/// above: `fcinfo` holds its arguments.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn queue_await_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is the call's: a bigint and, in the second form, an
    // interval (a CALL passes no OUT argument).
    let (id, timeout) = unsafe {
        let timeout = match (*fcinfo).nargs {
            1 => Some(Interval::from_seconds(DEFAULT_TIMEOUT_S)),
            _ => pg_getarg::<Interval>(fcinfo, 1),
        };
        (pg_getarg::<i64>(fcinfo, 0), timeout)
    };
    let id = required(id, "id");
    let timeout = rules::check_wait_timeout(&duration(&required(timeout, "timeout"))).or_raise();
    // SAFETY: as above.
    if !unsafe { procedure::outside_transaction_block(fcinfo) } {
        QueueError::WaitInTransaction {
            procedure: "queue_await",
        }
        .raise();
    }
    if !shared::available() {
        QueueError::WaitWithoutPreload {
            procedure: "queue_await",
        }
        .raise();
    }
    // The row and the result are made in the call's memory context, which
    // outlives the commits of the wait.
    // SAFETY: a plain read of the current memory context, the call's.
    let call_context = unsafe { pg_sys::CurrentMemoryContext };
    let found = procedure::nonatomic(|| await_job(id, timeout, call_context));
    let status = found.status.map(|s| s.into_datum().expect("a text datum"));
    // SAFETY: as above; the datums were made in the call's context.
    unsafe { procedure::result_row(fcinfo, &[status, found.result.map(Jsonb::datum)]) }
}

/// A job as one look found it.
struct Found {
    /// Its status word; None when it does not exist or is no longer
    /// retained.
    status: Option<String>,
    result: Option<Jsonb>,
}

impl Found {
    /// Whether the wait is over: the job has ended, or is not there.
    fn over(&self) -> bool {
        !matches!(self.status.as_deref(), Some("pending" | "processing"))
    }
}

/// Waits up to `timeout_us` for job `id` to end; what it is then, its
/// result copied into `context`.
fn await_job(id: i64, timeout_us: i64, context: pg_sys::MemoryContext) -> Found {
    let end = crate::time::now_us().saturating_add(timeout_us);
    let first = procedure::in_own_transaction(|| look(id, context));
    if first.over() || timeout_us == 0 {
        return first;
    }
    // the slot is taken before the look whose snapshot must see every
    // commit that did not find it (waiters.rs)
    // SAFETY: MyDatabaseId is set once the backend is connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let registration = waiters::register_await(database, id).unwrap_or_else(|| {
        QueueError::WaitWithoutPreload {
            procedure: "queue_await",
        }
        .raise()
    });
    let found = 'wait: loop {
        let found = procedure::in_own_transaction(|| look(id, context));
        if found.over() {
            break 'wait found;
        }
        loop {
            let now = crate::time::now_us();
            if now >= end {
                break 'wait procedure::in_own_transaction(|| look(id, context));
            }
            let until = match registration.take_wake(now) {
                Wake::Now => continue 'wait,
                Wake::At(at) => end.min(at),
                Wake::Nothing => end,
            };
            if until <= now {
                continue 'wait;
            }
            procedure::sleep_until(until - now);
        }
    };
    drop(registration);
    found
}

/// One look at job `id`; its result copied into `context`.
fn look(id: i64, context: pg_sys::MemoryContext) -> Found {
    db::with_tables(|client| {
        let Some(row) = db::read(client, &queries::AWAIT_CHECK, args![id = id]).first() else {
            return Found {
                status: None,
                result: None,
            };
        };
        let result = row.get::<Jsonb>("result").map(|r| {
            // SAFETY: `context` is the call's, live until it returns; the
            // result is a non-null jsonb datum of the SPI row, live until
            // the look's commit, copied before it.
            unsafe { PgMemoryContexts::For(context).switch_to(|_| Jsonb::copy_of(r.datum())) }
        });
        Found {
            status: Some(row.value("status")),
            result,
        }
    })
}
