//! DROP DATABASE, CREATE DATABASE ... TEMPLATE, ALTER DATABASE and
//! RENAME of a database all need it without other connections, and a
//! worker is one. Before such a command runs, its database's worker is
//! asked to exit (SIGTERM, which ends a running statement too) and the
//! launcher keeps from starting another until the command is over.

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
const AFTER_US: i64 = 1_000_000;

static mut PREVIOUS: pg_sys::ProcessUtility_hook_type = None;

pub fn install() {
    unsafe {
        PREVIOUS = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

#[pg_guard]
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
    let node = unsafe { (*pstmt).utilityStmt };
    let (database, creates) = unsafe { database_needed_alone(node) };
    if let Some(database) = database {
        release(database);
    }
    let run = || unsafe {
        match PREVIOUS {
            Some(previous) => {
                previous(pstmt, query, read_only_tree, context, params, env, dest, qc)
            }
            None => pg_sys::standard_ProcessUtility(
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
    };
    PgTryBuilder::new(run)
        .finally(|| {
            // The command commits after this hook returns: hold the
            // launcher off a moment longer, so that no worker connects
            // before the commit, and have it read pg_database then (a new
            // database, maybe a copy of a served one, or one that takes no
            // connections now). Until it has, whether the database may be
            // served is unknown.
            if database.is_none() && !creates {
                return;
            }
            let mut shared = SHARED.exclusive();
            let until = shared::now() + AFTER_US;
            if let Some(entry) = database.and_then(|d| shared.database(d)) {
                entry.blocked_until = until;
                entry.scanned = false;
                entry.servable = false;
            }
            shared.rescan_at = until;
        })
        .execute()
}

/// The database a utility statement needs without other connections, and
/// whether it creates one.
unsafe fn database_needed_alone(node: *mut pg_sys::Node) -> (Option<Oid>, bool) {
    if node.is_null() {
        return (None, false);
    }
    let oid_of = |name: *const std::ffi::c_char| -> Option<Oid> {
        if name.is_null() {
            return None;
        }
        let oid = unsafe { pg_sys::get_database_oid(name, true) };
        (oid != Oid::INVALID).then_some(oid)
    };
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
                    .and_then(|def| oid_of(pg_sys::defGetString(def)));
                (template, true)
            }
            _ => (None, false),
        }
    }
}

/// Holds the launcher off `database` and waits for its worker to exit.
fn release(database: Oid) {
    let deadline = shared::now() + WAIT_US;
    let pid = {
        let mut shared = SHARED.exclusive();
        let now = shared::now();
        if let Some(entry) = shared.database_entry(database) {
            entry.blocked_until = now + HOLD_US;
        }
        match shared.worker_of(database) {
            Some(slot) => {
                shared.workers[slot].stop = true;
                shared.workers[slot].pid
            }
            None => return,
        }
    };
    let mut signalled = false;
    loop {
        let (running, pid_now) = {
            let shared = SHARED.share();
            match shared.worker_of(database) {
                Some(slot) => (true, shared.workers[slot].pid),
                None => (false, 0),
            }
        };
        if !running || shared::now() > deadline {
            return;
        }
        let pid = if pid > 0 { pid } else { pid_now };
        if pid > 0 && !signalled {
            unsafe { libc::kill(pid, libc::SIGTERM) };
            signalled = true;
        }
        unsafe { pg_sys::pg_usleep(10_000) };
        pgrx::check_for_interrupts!();
    }
}
