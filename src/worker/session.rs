//! How the worker runs its own statements: as `db::with_tables` does for
//! the API, with the extension's schema on the search_path, and with every
//! setting undone afterwards, so that no sender ever runs with them.

use std::ffi::CString;
use std::panic::AssertUnwindSafe;

use pgrx::pg_sys;
use pgrx::spi::SpiClient;

use crate::db;

/// Runs `f` in a transaction of its own. (The worker's state that `f`
/// touches is only ever used by this process, and an error ends it.)
///
/// A commit whose wait for a synchronous standby was cancelled, because
/// the postmaster died (a failover manager killed it) or this process was
/// told to end, may be on this server alone: nothing may act on it (send
/// the webhook requests of a claim, claim on). PostgreSQL then marks the
/// process to end (ProcDiePending) but raises no interrupt, and a busy
/// worker would go on for a while: it ends here, as on SIGTERM.
pub fn transaction<R>(f: impl FnOnce() -> R) -> R {
    let result = pgrx::bgworkers::BackgroundWorker::transaction(AssertUnwindSafe(f));
    // SAFETY: plain reads and a write of this process's interrupt flags,
    // from its only thread that runs PostgreSQL code, as die() writes them;
    // the check then ends the process through ProcessInterrupts.
    unsafe {
        if std::ptr::read_volatile(&raw const pg_sys::ProcDiePending) != 0 {
            std::ptr::write_volatile(&raw mut pg_sys::InterruptPending, 1);
        }
    }
    pgrx::check_for_interrupts!();
    result
}

/// The search_path of the worker's statements: the extension's schema
/// after pg_catalog, so that nothing another role creates can stand in
/// for what they call.
#[derive(Clone)]
pub struct Session {
    extension: pg_sys::Oid,
    search_path: CString,
}

impl Session {
    /// The session of the extension installed now; None when it is not
    /// installed (the caller is in a transaction). `known` is kept while
    /// the extension is the same one. (A worker whose extension moved to
    /// another schema fails its next statement, and its successor looks
    /// the schema up again.)
    pub fn find(known: Option<Session>) -> Option<Session> {
        let (extension, search_path) = db::installed_extension()?;
        if let Some(known) = known.filter(|k| k.extension == extension) {
            return Some(known);
        }
        Some(Session {
            extension,
            search_path,
        })
    }

    /// Whether the extension installed now is still this session's (the
    /// caller is in a transaction).
    pub fn current(&self) -> bool {
        db::extension_oid() == Some(self.extension)
    }

    /// Runs `f` with the extension's tables (the caller is in a transaction).
    pub fn tables<R>(&self, f: impl FnOnce(&mut SpiClient<'_>) -> R) -> R {
        self.scoped(|| db::with_tables(f))
    }

    /// Runs `f` with the worker's search_path, then undoes every setting
    /// made meanwhile.
    pub fn scoped<R>(&self, f: impl FnOnce() -> R) -> R {
        db::with_search_path(&self.search_path, f)
    }
}

/// A background worker reports its table statistics itself (PostgreSQL 15),
/// or autovacuum never hears of its dead tuples. Outside a transaction.
pub fn report_stat() {
    // SAFETY: callers call it between the worker's transactions, never
    // inside one, as pgstat_report_stat requires.
    unsafe { pg_sys::pgstat_report_stat(false) };
}
