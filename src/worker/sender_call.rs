//! Calling a sender for one job: in a subtransaction of its own, as the
//! role that registered it, with the settings a new session of that role
//! in this database would start with, within queue.sender_timeout.
//! Whatever the sender does, the worker gets back "delivered" (with what it
//! returned, for a sender declared `RETURNS jsonb`) or the error it raised,
//! and is itself unchanged.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::CString;

use pgrx::pg_sys::{self, Oid};

use super::subxact::{self, sqlstate};
use crate::errors::OrRaise;
use crate::gucs;
use crate::jsonb::Jsonb;
use crate::rules;

/// A sender that may be called: its function, the role it runs as, and
/// that role's login settings in this database (`name=value`, as
/// pg_db_role_setting keeps them, lowest priority first).
pub struct Sender {
    pub function: Oid,
    pub role: Oid,
    pub settings: Vec<String>,
}

/// A sender looked up for the calls of one transaction. Its lookup info is
/// kept from call to call, so that a SQL or PL/pgSQL function is parsed
/// and planned once, not for every job.
pub struct Prepared {
    role: Oid,
    settings: Vec<(CString, CString)>,
    flinfo: Box<pg_sys::FmgrInfo>,
    /// It returns jsonb: a non-NULL value is the job's result.
    keeps_result: bool,
}

/// Settings that a login applies but a sender call does not: the role a
/// call runs as is the registering role, whatever its settings say.
const NOT_APPLIED: [&str; 2] = ["role", "session_authorization"];

thread_local! {
    /// Login settings that could not be applied, each warned about once
    /// per worker (a login warns about them once per session).
    static WARNED: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

pub enum Outcome {
    /// It returned. `wrote`: its subtransaction got a transaction id (it
    /// wrote to the database), which counts against the subxid cache.
    /// `result`: its non-NULL jsonb, when it returns one.
    Delivered { wrote: bool, result: Option<Jsonb> },
    /// It raised `message`; `permanent` when with SQLSTATE QU001.
    Failed { message: String, permanent: bool },
}

/// SQLSTATE QU001, which a sender raises to fail a job for good.
const PERMANENT: i32 = sqlstate(*b"QU001");

// From utils/timeout.h, which pgrx 0.18.1 does not bind: neither these two
// functions nor the enum TimeoutId are in its bindings for 15 or 18, so
// they are declared here, TimeoutId as the C int it is passed as.
// STATEMENT_TIMEOUT is TimeoutId's fourth member, 3 in both PostgreSQL 15
// and 18: the statement timeout that InitPostgres registers in every
// backend, background workers too. When it fires, the next
// CHECK_FOR_INTERRUPTS raises "canceling statement due to statement
// timeout". Neither function raises an ERROR (only a FATAL on misuse,
// which exits without unwinding), hence "C".
const STATEMENT_TIMEOUT: std::ffi::c_int = 3;
unsafe extern "C" {
    fn enable_timeout_after(id: std::ffi::c_int, delay_ms: std::ffi::c_int);
    fn disable_timeout(id: std::ffi::c_int, keep_indicator: bool);
}

impl Sender {
    /// Looks the function up, in the current memory context, which must
    /// last as long as the calls (the transaction's).
    pub fn prepare(self) -> Prepared {
        // SAFETY: FmgrInfo is a C struct of integers, booleans, pointers and
        // an Option of a function pointer, for all of which zero is valid
        // (0, false, NULL, None); fmgr_info fills it in next.
        let mut flinfo: Box<pg_sys::FmgrInfo> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: inside the worker's transaction (a catalog lookup);
        // self.function is the oid that the sender's signature resolved to
        // just now (a missing one raises an ERROR). The box keeps the
        // struct at one address, as the function's handler may keep
        // pointers to it (fn_extra) in the current memory context.
        unsafe { pg_sys::fmgr_info(self.function, &mut *flinfo) };
        // SAFETY: a catalog lookup of the function just looked up, inside
        // the transaction.
        let returns = unsafe { pg_sys::get_func_rettype(self.function) };
        Prepared {
            keeps_result: returns == pg_sys::JSONBOID,
            role: self.role,
            settings: self
                .settings
                .iter()
                .filter_map(|s| parse_setting(s))
                .collect(),
            flinfo,
        }
    }
}

impl Prepared {
    /// Calls the sender with `job` (a jsonb datum).
    pub fn call(&mut self, job: pg_sys::Datum) -> Outcome {
        let outcome = subxact::run(|| {
            let result = self.run(job);
            // SAFETY: reads the current (sub)transaction's id, if it has
            // one; we are inside the subtransaction that subxact::run began.
            let wrote =
                unsafe { pg_sys::GetCurrentTransactionIdIfAny() != pg_sys::InvalidTransactionId };
            (wrote, result)
        });
        // SAFETY: STATEMENT_TIMEOUT is registered by InitPostgres in every
        // process connected to a database, this worker too, and may be
        // disabled when it is not active; the declaration matches
        // timeout.h.
        unsafe { disable_timeout(STATEMENT_TIMEOUT, false) };
        // a timeout that fired as the call returned is not the
        // worker's own statement's
        // SAFETY: a plain write of a flag that signal handlers only set,
        // from the main thread, as PostgreSQL's own code clears it.
        unsafe { pg_sys::QueryCancelPending = 0 };
        match outcome {
            Ok((wrote, result)) => Outcome::Delivered { wrote, result },
            Err(raised) => Outcome::Failed {
                permanent: raised.code == PERMANENT,
                message: raised.message,
            },
        }
    }

    /// The call itself, inside the subtransaction; what it returned, when
    /// it keeps its result. On error the subtransaction's rollback undoes
    /// what this set up; a result over contract::MAX_RESULT_BYTES is such
    /// an error (54000), so that the attempt fails and its writes go.
    fn run(&mut self, job: pg_sys::Datum) -> Option<Jsonb> {
        // SAFETY: inside the subtransaction; the level is closed by
        // AtEOXact_GUC below, or by the subtransaction's rollback.
        let nest = unsafe { pg_sys::NewGUCNestLevel() };
        let (mut user, mut security) = (Oid::INVALID, 0);
        // SAFETY: the out-pointers are locals; self.role is the registering
        // role, which check_sender found still exists. The identity read
        // here is put back below, or by the subtransaction's rollback
        // (which restores the one saved when it began).
        unsafe {
            pg_sys::GetUserIdAndSecContext(&mut user, &mut security);
            // Not SET ROLE: inside a security-restricted operation the
            // sender can neither RESET ROLE back to the worker's identity
            // nor SET ROLE to anyone else.
            pg_sys::SetUserIdAndSecContext(
                self.role,
                security
                    | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                    | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
            );
        }
        // As the role, as a login applies them; the worker's own
        // statements set their search_path in a nest level of their own.
        for (name, value) in &self.settings {
            apply_login_setting(name, value);
        }
        // SAFETY: inside a transaction, so GetTransactionSnapshot gives a
        // valid snapshot; popped below, or by the rollback on error.
        unsafe { pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot()) };
        let timeout = gucs::SENDER_TIMEOUT_MS.get();
        if timeout > 0 {
            // SAFETY: STATEMENT_TIMEOUT is registered by InitPostgres in
            // every process connected to a database, this worker too; the
            // delay is positive; the declaration matches timeout.h.
            unsafe { enable_timeout_after(STATEMENT_TIMEOUT, timeout) };
        }
        // SAFETY: flinfo was filled in by fmgr_info in this transaction, for
        // a function whose signature takes one jsonb; job is a non-null
        // jsonb datum, copied into the transaction's memory; we are inside
        // a transaction, with a snapshot pushed.
        let returned = unsafe { call(&mut self.flinfo, job) };
        // SAFETY: as for enable_timeout_after above; disabling a timeout
        // that is not active is allowed.
        unsafe { disable_timeout(STATEMENT_TIMEOUT, false) };
        // a timeout or cancel that came in at the very end fails this job
        pgrx::check_for_interrupts!();
        // SAFETY: each undoes, in reverse order, what was set up above in
        // this subtransaction: the snapshot pushed, the identity read, the
        // nest level opened (the sender's SETs, LOCAL or not, end here);
        // CommandCounterIncrement, inside the transaction, makes the
        // sender's writes visible to the worker's next statements.
        unsafe {
            pg_sys::PopActiveSnapshot();
            pg_sys::SetUserIdAndSecContext(user, security);
            pg_sys::AtEOXact_GUC(false, nest);
            pg_sys::CommandCounterIncrement();
        }
        let result = returned.filter(|_| self.keeps_result).map(|datum| {
            // SAFETY: a non-NULL datum the function returned, of its declared
            // type jsonb; copied (detoasted) into the caller's memory
            // context, current here, which outlives the subtransaction.
            unsafe { Jsonb::copy_of(datum) }
        });
        if let Some(result) = result {
            rules::check_result_size(result.size()).or_raise();
        }
        result
    }
}

/// Calls the function of `flinfo` with `argument`; what it returned (None:
/// NULL). Unlike FunctionCall1Coll, a NULL result is fine: a `RETURNS void`
/// SQL function returns one.
///
/// # Safety
///
/// `flinfo` was filled in by fmgr_info, in a memory context still alive,
/// for a function that takes one argument, of the type of `argument`, a
/// non-null datum; the caller is inside a transaction, with an active
/// snapshot, on the main thread.
unsafe fn call(flinfo: &mut pg_sys::FmgrInfo, argument: pg_sys::Datum) -> Option<pg_sys::Datum> {
    let size = std::mem::size_of::<pg_sys::FunctionCallInfoBaseData>()
        + std::mem::size_of::<pg_sys::NullableDatum>();
    // SAFETY: palloc0 returns zeroed memory (or raises an ERROR) of the size
    // of a FunctionCallInfo with one argument (SizeForFunctionCallInfo(1)),
    // aligned for it, so its header and args[0] may be written.
    let fcinfo = unsafe {
        let fcinfo = pg_sys::palloc0(size) as *mut pg_sys::FunctionCallInfoBaseData;
        (*fcinfo).flinfo = flinfo;
        (*fcinfo).fncollation = pg_sys::InvalidOid;
        (*fcinfo).nargs = 1;
        *(*fcinfo).args.as_mut_ptr() = pg_sys::NullableDatum {
            value: argument,
            isnull: false,
        };
        fcinfo
    };
    let entry = flinfo.fn_addr.expect("a function's entry point");
    // the boundary turns an error raised inside into a Rust panic,
    // which subxact::run catches
    // SAFETY: fcinfo is set up for the function, as our caller guarantees;
    // on the main thread, and the closure only calls the C entry point,
    // which cannot panic (a Rust function has its own guard), and holds
    // nothing with a destructor that a longjmp would skip.
    let returned = unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| entry(fcinfo)) };
    // SAFETY: fcinfo was palloc'd above; isnull is what the call set. It is
    // used no more after. (After an ERROR it is left to its memory context,
    // freed with the transaction.)
    unsafe {
        let isnull = (*fcinfo).isnull;
        pg_sys::pfree(fcinfo.cast());
        (!isnull).then_some(returned)
    }
}

/// `name=value` as pg_db_role_setting keeps it (ParseLongOption's rules:
/// a `-` in the name stands for `_`); None for settings a call leaves alone.
fn parse_setting(setting: &str) -> Option<(CString, CString)> {
    let (name, value) = setting.split_once('=')?;
    let name = name.replace('-', "_");
    if NOT_APPLIED.contains(&name.to_ascii_lowercase().as_str()) {
        return None;
    }
    Some((CString::new(name).ok()?, CString::new(value).ok()?))
}

/// Applies one login setting until the current GUC nest level ends, with
/// the rights a login has (PGC_SUSET: pg_db_role_setting holds only what
/// its writer was allowed to set). A setting that cannot be applied is
/// skipped with a warning, once per worker, as a login skips it with one.
fn apply_login_setting(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // Runs inside the subtransaction, in the GUC nest level that run() opened.
    if !crate::gucs::try_set_for_scope(name, value) {
        let setting = format!("{}={}", name.to_string_lossy(), value.to_string_lossy());
        if WARNED.with(|w| w.borrow_mut().insert(setting.clone())) {
            pgrx::warning!(
                "queue worker: a sender's login setting \"{setting}\" cannot be applied; its calls run without it"
            );
        }
    }
}
