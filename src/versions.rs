//! Every difference between the PostgreSQL versions the extension supports
//! (15 and 18) that the code meets, in one place, each behind pgrx's
//! `pg15` / `pg18` features.

use pgrx::pg_sys;

/// A signal handler as PostgreSQL's `pqsigfunc` takes it.
pub type SignalHandler = unsafe extern "C-unwind" fn(std::ffi::c_int);

/// Installs `handler` for `signal` (PostgreSQL's pqsignal; 18 names the
/// backend's version pqsignal_be and returns nothing).
pub fn set_signal_handler(signal: u32, handler: SignalHandler) {
    // SAFETY: installs a handler in this process; the handlers given only
    // set flags and the process latch, as PostgreSQL's own handlers do.
    unsafe {
        #[cfg(feature = "pg15")]
        pg_sys::pqsignal(signal as i32, Some(handler));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(signal as i32, Some(handler));
    }
}

/// Ends this process through proc_exit, which runs the exit callbacks and
/// never returns (18's binding declares no `!`).
pub fn exit_process(code: i32) -> ! {
    // SAFETY: proc_exit is how a backend ends; called outside any critical
    // section, from the main thread.
    unsafe { pg_sys::proc_exit(code) };
    #[cfg(feature = "pg18")]
    unreachable!("proc_exit returned")
}

/// This process's index in ProcGlobal->allProcs, where its latch is (15:
/// PGPROC.pgprocno; 17 and later: MyProcNumber).
pub fn my_proc_number() -> i32 {
    // SAFETY: MyProc is set for every process attached to shared memory,
    // which the launcher and the workers are from their start.
    unsafe {
        #[cfg(feature = "pg15")]
        return (*pg_sys::MyProc).pgprocno;
        #[cfg(feature = "pg18")]
        return pg_sys::MyProcNumber;
    }
}

/// Whether `role` may execute function `function` (15: pg_proc_aclcheck;
/// 16 and later: object_aclcheck). The function exists.
pub fn may_execute(function: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    // SAFETY: both look the function's ACL up in the syscache, in the
    // caller's transaction, and only read; the caller has checked that the
    // function exists (they raise an error otherwise).
    let result = unsafe {
        #[cfg(feature = "pg15")]
        let result = pg_sys::pg_proc_aclcheck(function, role, pg_sys::ACL_EXECUTE as _);
        #[cfg(feature = "pg18")]
        let result = pg_sys::object_aclcheck(
            pg_sys::ProcedureRelationId,
            function,
            role,
            pg_sys::ACL_EXECUTE as _,
        );
        result
    };
    result == pg_sys::AclResult::ACLCHECK_OK
}

/// Begins a scan of `index` over `heap` with one key and no ordering (18
/// takes a pointer for instrumentation, which may be NULL).
///
/// # Safety
///
/// Both relations are open and locked by the caller, `index` is an index
/// of `heap`, and `snapshot` stays registered until the scan ends.
pub unsafe fn index_beginscan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
) -> pg_sys::IndexScanDesc {
    // SAFETY: as the caller promises.
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::index_beginscan(heap, index, snapshot, 1, 0);
        #[cfg(feature = "pg18")]
        return pg_sys::index_beginscan(heap, index, snapshot, std::ptr::null_mut(), 1, 0);
    }
}
