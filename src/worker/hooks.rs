//! DROP DATABASE, CREATE DATABASE ... TEMPLATE, ALTER DATABASE and
//! RENAME of a database all need it without other connections, and a
//! worker is one. Before such a command runs, its database's worker is
//! asked to exit (SIGTERM, which ends a running statement too) and the
//! launcher keeps from starting another until the command is over.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::PgList;

use super::shared::{self, SHARED};

/// How long the command waits for the worker to go; after that it runs
/// anyway and PostgreSQL reports the database as in use.
const WAIT_US: i64 = 10_000_000;
/// Upper bound of the launcher's hold, should the command's backend die.
const HOLD_US: i64 = 120_000_000;
/// How long after the command the hold lasts, and when the launcher looks
/// at pg_database again.
const AFTER_US: i64 = crate::time::SECOND_US;

/// The hook that was installed before ours (another library's), if any.
static PREVIOUS: OnceLock<pg_sys::ProcessUtility_hook_type> = OnceLock::new();

thread_local! {
    /// This transaction ran a database command: when it ends (commit or
    /// abort), the launcher is let back in to the database it held off (if
    /// any) and rescans pg_database.
    static AFTER_COMMAND: Cell<Option<Option<Oid>>> = const { Cell::new(None) };
    /// `at_transaction_end` is registered in this backend.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

unsafe extern "C-unwind" {
    /// standard_ProcessUtility itself, not pgrx's guarded binding: an error
    /// it raises must reach the caller untouched (see process_utility).
    #[link_name = "standard_ProcessUtility"]
    fn standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}

pub fn install() {
    // SAFETY: _PG_init runs in the postmaster while it loads the preloaded
    // libraries, before any other process exists: nobody reads the hook
    // variable meanwhile.
    unsafe {
        PREVIOUS.get_or_init(|| pg_sys::ProcessUtility_hook);
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Runs every utility statement. Our own part runs before the command, in
/// `before_command`, which is guarded as usual. The command itself is
/// called directly: whatever error it raises travels from PostgreSQL's
/// ereport to the client exactly as without this hook (SQLSTATE, message,
/// detail, hint, position), since nothing here catches or re-raises it.
///
/// # Safety
///
/// Only PostgreSQL calls it, as ProcessUtility_hook, with the arguments of
/// ProcessUtility (a valid PlannedStmt of a utility statement).
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: pstmt is the statement PostgreSQL passes to every utility
    // hook. before_command is #[pg_guard]: a panic or an error in it is
    // raised as an ERROR at its own boundary.
    unsafe { before_command((*pstmt).utilityStmt) };
    // SAFETY: the arguments are passed on as PostgreSQL gave them. An ERROR
    // raised by the command longjmps through this frame, which is sound
    // only because the frame owns nothing with a destructor (only
    // pointers and plain values are alive here), so skipping it loses
    // nothing; what must happen after the command, error or not, runs at
    // the end of its transaction instead (at_transaction_end).
    unsafe {
        match PREVIOUS.get().copied().flatten() {
            Some(previous) => {
                previous(pstmt, query, read_only_tree, context, params, env, dest, qc)
            }
            None => standard_process_utility(
                pstmt,
                query,
                read_only_tree,
                context,
                params,
                env,
                dest,
                qc,
            ),
        }
    }
}

/// Before a command that needs a database without other connections (or
/// creates one): gets its worker out of the way, and arranges for the
/// launcher to be let back in when the transaction ends.
///
/// # Safety
///
/// `node` is NULL or a valid utility statement's parse tree, and the caller
/// is inside a transaction (as ProcessUtility is).
#[pg_guard]
unsafe extern "C-unwind" fn before_command(node: *mut pg_sys::Node) {
    // SAFETY: node is NULL or the utility statement of the PlannedStmt, as
    // our caller guarantees, inside a transaction.
    let (database, creates) = unsafe { database_needed_alone(node) };
    if database.is_none() && !creates {
        return;
    }
    if let Some(database) = database {
        release(database);
    }
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per backend (REGISTERED), as PostgreSQL
        // keeps a callback registered until the process ends;
        // at_transaction_end has the callback's signature and lives as long
        // as the process. It only touches shared memory under its lock and
        // never raises (an ERROR after a commit would be a PANIC).
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    AFTER_COMMAND.set(Some(database));
}

/// The command has committed or failed. Hold the launcher off a moment
/// longer, so that no worker connects before the database is free, and
/// have it read pg_database then (a new database, maybe a copy of a served
/// one, or one that takes no connections now). Until it has, whether the
/// database may be served is unknown.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the transaction callback registered in
/// `before_command`.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    if !matches!(
        event,
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT
    ) {
        return;
    }
    let Some(database) = AFTER_COMMAND.take() else {
        return;
    };
    let mut shared = SHARED.exclusive();
    let until = crate::time::now_us() + AFTER_US;
    if let Some(entry) = database.and_then(|d| shared.database_mut(d)) {
        entry.blocked_until = until;
        entry.scanned = false;
        entry.servable = false;
    }
    shared.rescan_at.store(until, Ordering::Relaxed);
    shared::set_latch(shared.launcher_procno);
}

/// The database a utility statement needs without other connections, and
/// whether it creates one.
///
/// # Safety
///
/// `node` is NULL or a valid parse tree of a utility statement, and the
/// caller is inside a transaction (the lookups read pg_database).
unsafe fn database_needed_alone(node: *mut pg_sys::Node) -> (Option<Oid>, bool) {
    if node.is_null() {
        return (None, false);
    }
    let oid_of = |name: *const std::ffi::c_char| -> Option<Oid> {
        if name.is_null() {
            return None;
        }
        // SAFETY: name is a non-null, NUL-terminated string of the parse
        // tree; a catalog lookup inside our caller's transaction, and
        // missing_ok makes an unknown name InvalidOid, not an ERROR.
        let oid = unsafe { pg_sys::get_database_oid(name, true) };
        (oid != Oid::INVALID).then_some(oid)
    };
    // SAFETY: node is a valid, non-null parse node (our caller guarantees
    // it; NULL returned above), so its tag can be read, and each cast is to
    // the struct its tag names. Their name fields are the parser's strings
    // or NULL (oid_of checks); CreatedbStmt.options is a List of DefElem
    // that the parser built, each with a non-null defname.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_DropdbStmt => {
                (oid_of((*(node as *mut pg_sys::DropdbStmt)).dbname), false)
            }
            pg_sys::NodeTag::T_AlterDatabaseStmt => (
                oid_of((*(node as *mut pg_sys::AlterDatabaseStmt)).dbname),
                false,
            ),
            pg_sys::NodeTag::T_RenameStmt => {
                let stmt = node as *mut pg_sys::RenameStmt;
                if (*stmt).renameType == pg_sys::ObjectType::OBJECT_DATABASE {
                    (oid_of((*stmt).subname), false)
                } else {
                    (None, false)
                }
            }
            pg_sys::NodeTag::T_CreatedbStmt => {
                let stmt = node as *mut pg_sys::CreatedbStmt;
                let options = PgList::<pg_sys::DefElem>::from_pg((*stmt).options);
                let template = options
                    .iter_ptr()
                    .find(|def| std::ffi::CStr::from_ptr((**def).defname).to_bytes() == b"template")
                    // TEMPLATE DEFAULT has no value: template1, never served
                    .filter(|def| !(**def).arg.is_null())
                    .and_then(|def| oid_of(pg_sys::defGetString(def)));
                (template, true)
            }
            _ => (None, false),
        }
    }
}

/// Holds the launcher off `database` and waits for its workers to exit.
fn release(database: Oid) {
    let deadline = crate::time::now_us() + WAIT_US;
    {
        let mut shared = SHARED.exclusive();
        let now = crate::time::now_us();
        if let Some(entry) = shared.database_entry(database) {
            entry.blocked_until = now + HOLD_US;
        }
        let slots: Vec<usize> = shared.workers_of(database).collect();
        if slots.is_empty() {
            return;
        }
        for &slot in &slots {
            shared.workers[slot].stop = true;
        }
    }
    // Signals every worker of the database, its helpers included, each once
    // its pid is known.
    let mut signalled: Vec<i32> = Vec::new();
    loop {
        let pids: Vec<i32> = {
            let shared = SHARED.share();
            shared
                .workers_of(database)
                .map(|slot| shared.workers[slot].pid)
                .collect()
        };
        if pids.is_empty() || crate::time::now_us() > deadline {
            return;
        }
        for pid in pids {
            if pid > 0 && !signalled.contains(&pid) {
                // SAFETY: kill only sends a signal and touches no memory of
                // ours; pid is a worker's, as it recorded it in its slot.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                signalled.push(pid);
            }
        }
        // SAFETY: a plain sleep; no precondition.
        unsafe { pg_sys::pg_usleep(10_000) };
        pgrx::check_for_interrupts!();
    }
}
