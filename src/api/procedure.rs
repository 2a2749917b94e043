//! What the procedures that wait (`queue_wait`, `queue_await`) share: they
//! are bare C functions (pgrx makes functions, not procedures), called with
//! CALL outside a transaction block so that they may end their transaction
//! as PL/pgSQL's COMMIT does: each look runs in a transaction of its own,
//! committed at once (giving back its snapshot and its locks), and the wait
//! in between holds nothing but an empty transaction.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Whether the call may end transactions: a CALL at the top level, not
/// in a transaction block (CallContext.atomic false).
///
/// # Safety
///
/// `fcinfo` is a valid call's.
pub unsafe fn outside_transaction_block(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: the context, when set, is a Node; a CallContext when the
    // function is a procedure run by CALL.
    unsafe {
        let context = (*fcinfo).context;
        !context.is_null()
            && (*context).type_ == pg_sys::NodeTag::T_CallContext
            && !(*(context as *mut pg_sys::CallContext)).atomic
    }
}

/// The procedure's row of OUT parameters, `values` in their order (None:
/// NULL).
///
/// # Safety
///
/// `fcinfo` is the call's, in the memory context of the call; `values` are
/// datums of the OUT parameters' types, live in that context.
pub unsafe fn result_row(
    fcinfo: pg_sys::FunctionCallInfo,
    values: &[Option<pg_sys::Datum>],
) -> pg_sys::Datum {
    // SAFETY: the call's result type is the record of its OUT parameters,
    // which get_call_result_type describes; the tuple descriptor is blessed
    // so that the caller can look it up, and the row is formed from as many
    // values as it has attributes.
    unsafe {
        let mut desc: pg_sys::TupleDesc = std::ptr::null_mut();
        let class = pg_sys::get_call_result_type(fcinfo, std::ptr::null_mut(), &mut desc);
        if class != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE
            || desc.is_null()
            || (*desc).natts as usize != values.len()
        {
            error!("queue: the procedure's result is not the row of its OUT parameters");
        }
        let desc = pg_sys::BlessTupleDesc(desc);
        let mut datums: Vec<pg_sys::Datum> = values
            .iter()
            .map(|v| v.unwrap_or(pg_sys::Datum::from(0usize)))
            .collect();
        let mut nulls: Vec<bool> = values.iter().map(Option::is_none).collect();
        let tuple = pg_sys::heap_form_tuple(desc, datums.as_mut_ptr(), nulls.as_mut_ptr());
        (*fcinfo).isnull = false;
        pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
    }
}

/// Runs `f` in a non-atomic SPI connection, which may commit; it is closed
/// after, or by the abort of the transaction on error.
pub fn nonatomic<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: called from a procedure outside a transaction block
    // (outside_transaction_block), where a non-atomic connection may commit.
    let connected = unsafe { pg_sys::SPI_connect_ext(pg_sys::SPI_OPT_NONATOMIC as i32) };
    if connected != pg_sys::SPI_OK_CONNECT as i32 {
        error!("queue: SPI_connect_ext failed: {connected}");
    }
    let result = f();
    // SAFETY: closes the connection opened above (the last one open).
    unsafe { pg_sys::SPI_finish() };
    result
}

/// Runs `f` with a fresh snapshot, then commits: its snapshot and locks are
/// given back, and a new transaction, which holds neither, goes on.
pub fn in_own_transaction<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: in a transaction (the CALL's, or the one SPI_commit started),
    // inside `nonatomic`; the snapshot pushed is popped before the commit,
    // which the non-atomic connection allows.
    unsafe { pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot()) };
    let result = f();
    // SAFETY: as above.
    unsafe {
        pg_sys::PopActiveSnapshot();
        pg_sys::SPI_commit();
    }
    result
}

/// Sleeps up to `micros` on the latch, or less when it is set; an
/// interrupt (cancel, statement_timeout, termination) is raised here.
pub fn sleep_until(micros: i64) {
    let millis = (micros + 999) / 1000;
    // SAFETY: MyLatch is this process's latch; WaitLatch returns on a set
    // latch, the timeout or (exiting) the postmaster's death, and the latch
    // is reset before the interrupts are looked at, so that a set latch is
    // never lost.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            millis.clamp(1, i64::from(i32::MAX)) as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    check_for_interrupts!();
}
