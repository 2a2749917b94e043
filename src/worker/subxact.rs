//! Running a piece of work in a subtransaction of its own, as PL/pgSQL's
//! exception blocks do: an error inside rolls back only that work and comes
//! back as a value, and the worker's transaction goes on.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::PgTryBuilder;

/// An error raised inside the subtransaction.
pub struct Raised {
    pub message: String,
    /// Its SQLSTATE, as PostgreSQL encodes it (MAKE_SQLSTATE).
    pub code: i32,
}

thread_local! {
    /// The SQLSTATE of the last error reported below our error context
    /// callback. (pgrx keeps only the codes it knows by name.)
    static LAST_CODE: Cell<i32> = const { Cell::new(0) };
}

/// Runs as an error context callback: PostgreSQL calls it while it reports
/// an error raised below it, before unwinding.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the error context callback that `run`
/// installs, while it reports a message.
unsafe extern "C-unwind" fn note_error_code(_arg: *mut std::ffi::c_void) {
    // SAFETY: PostgreSQL runs context callbacks while it reports a message
    // (errfinish), with that message's entry on the error data stack,
    // which is what geterrcode reads.
    LAST_CODE.set(unsafe { pg_sys::geterrcode() });
}

/// Runs `f` in a subtransaction: committed (released) when it returns,
/// rolled back when it raises. The memory context and resource owner are
/// the caller's again afterwards either way; a rollback also undoes role
/// and setting changes and pops snapshots made inside.
pub fn run<R>(f: impl FnOnce() -> R) -> Result<R, Raised> {
    // SAFETY: plain reads of three globals of this backend, on its only
    // thread.
    let (context, owner, errcontext) = unsafe {
        (
            pg_sys::CurrentMemoryContext,
            pg_sys::CurrentResourceOwner,
            pg_sys::error_context_stack,
        )
    };
    // SAFETY: puts back the caller's memory context, resource owner and
    // error context stack, read above: all three outlive the
    // subtransaction, as they belong to the caller, who is still running
    // (PL/pgSQL restores the same after a subtransaction).
    let back_to_caller = move || unsafe {
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        pg_sys::error_context_stack = errcontext;
    };
    let mut callback = pg_sys::ErrorContextCallback {
        previous: errcontext,
        callback: Some(note_error_code),
        arg: std::ptr::null_mut(),
    };
    // SAFETY: callers are inside a transaction (a worker's), where a
    // subtransaction may begin; its name may be NULL. The switch back to
    // the caller's live context is what PL/pgSQL does after it.
    unsafe {
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
    }
    LAST_CODE.set(0);
    let callback = &raw mut callback;
    PgTryBuilder::new(AssertUnwindSafe(|| {
        // SAFETY: callback points to a local of run(), whose frame outlives
        // every use: it is unlinked again below, on both paths, before run
        // returns; its `previous` is the stack it is pushed on.
        unsafe { pg_sys::error_context_stack = callback };
        let result = f();
        // SAFETY: unlinks our callback; the subtransaction begun above is
        // the current one again (f leaves none of its own open), so it is
        // the one released.
        unsafe {
            pg_sys::error_context_stack = errcontext;
            pg_sys::ReleaseCurrentSubTransaction();
        }
        back_to_caller();
        Ok(result)
    }))
    .catch_others(|error| {
        // SAFETY: unlinks our callback (pgrx has flushed the error state);
        // the rollback, in the caller's memory context as PL/pgSQL's
        // exception handler does it, ends the subtransaction begun above,
        // the current one after an error inside it.
        unsafe {
            pg_sys::error_context_stack = errcontext;
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        back_to_caller();
        let message = match error {
            CaughtError::PostgresError(e)
            | CaughtError::ErrorReport(e)
            | CaughtError::RustPanic { ereport: e, .. } => e.message().to_string(),
        };
        Err(Raised {
            message,
            code: LAST_CODE.get(),
        })
    })
    .execute()
}

/// MAKE_SQLSTATE of a five-character SQLSTATE.
pub const fn sqlstate(code: [u8; 5]) -> i32 {
    let mut value = 0;
    let mut i = 0;
    while i < 5 {
        value |= ((code[i].wrapping_sub(b'0')) as i32 & 0x3F) << (6 * i);
        i += 1;
    }
    value
}

#[cfg(test)]
mod tests {
    #[test]
    fn sqlstate_encoding_matches_postgres() {
        assert_eq!(
            super::sqlstate(*b"57014"),
            pgrx::PgSqlErrorCode::ERRCODE_QUERY_CANCELED as i32
        );
        assert_eq!(
            super::sqlstate(*b"42501"),
            pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE as i32
        );
    }
}
