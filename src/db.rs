//! How the API reaches its tables: prepared statements kept for the life of
//! the backend, run as the extension's owner.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, Oid, PgOid};
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiTupleTable};
use pgrx::Spi;

/// One SQL statement of the API: its text (from `sql/queries/`) and the
/// types of its parameters.
pub struct Statement {
    pub sql: &'static str,
    pub args: &'static [PgOid],
}

thread_local! {
    /// Plans prepared in this backend, by statement text. Leaked on purpose:
    /// there are a few dozen and they live as long as the backend.
    static PLANS: RefCell<HashMap<usize, &'static OwnedPreparedStatement>> =
        RefCell::new(HashMap::new());
    /// What we know of the installed extension (NONE: look it up).
    static EXTENSION: Cell<Extension> = const { Cell::new(Extension::NONE) };
    /// `forget_extension` is registered in this backend.
    static CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// How many statements this backend has prepared (the test of plan
    /// reuse reads it).
    static PREPARED: Cell<u64> = const { Cell::new(0) };
}

/// How many statements this backend has prepared so far.
#[cfg(any(test, feature = "pg_test"))]
pub fn prepared_count() -> u64 {
    PREPARED.get()
}

/// A relation cache invalidation: forget the extension, and the queues
/// cached (`catalog::require_cached`), when it concerns `queue_queues` or
/// every relation.
///
/// # Safety
///
/// Only PostgreSQL calls it, as the relation cache callback that
/// `extension()` registers, with the oid of the relation invalidated.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forget_extension(_arg: pg_sys::Datum, relid: Oid) {
    let cached = EXTENSION.with(Cell::get);
    if relid == Oid::INVALID || relid == cached.queues_table {
        EXTENSION.with(|c| c.set(Extension::NONE));
        crate::catalog::forget_all();
    }
}

fn plan(client: &SpiClient<'_>, stmt: &Statement) -> &'static OwnedPreparedStatement {
    let key = stmt.sql.as_ptr() as usize;
    if let Some(found) = PLANS.with(|p| p.borrow().get(&key).copied()) {
        return found;
    }
    PREPARED.set(PREPARED.get() + 1);
    let prepared = client
        .prepare_mut(stmt.sql, stmt.args)
        .unwrap_or_else(|e| panic!("cannot prepare a statement of the queue extension: {e}"))
        .keep();
    let leaked: &'static OwnedPreparedStatement = Box::leak(Box::new(prepared));
    PLANS.with(|p| p.borrow_mut().insert(key, leaked));
    leaked
}

/// Runs one statement and returns its rows.
pub fn run<'c>(
    client: &mut SpiClient<'c>,
    stmt: &Statement,
    args: &[DatumWithOid<'_>],
) -> SpiTupleTable<'c> {
    let plan = plan(client, stmt);
    client
        .update(plan, None, args)
        .unwrap_or_else(|e| panic!("a statement of the queue extension failed: {e}"))
}

/// Runs `f` with an SPI connection, as the owner of the extension's tables
/// (callers may use the API without any privilege on the tables
/// themselves), with the extension's own search path and plan settings.
/// All of it is undone afterwards, and by PostgreSQL on error.
///
/// The API functions carry no `SET search_path` clause: in PostgreSQL 15
/// such a clause makes every call save and restore the whole GUC state
/// (measured: about a seventh of a batch enqueue). An override search path
/// is a push and a pop.
pub fn with_tables<R>(f: impl FnOnce(&mut SpiClient<'_>) -> R) -> R {
    let extension = extension();
    let (mut user, mut context) = (Oid::INVALID, 0);
    // SAFETY: the out-pointers are locals. Called from an API function or a
    // worker's transaction, where the current user is set; the owner's oid
    // comes from pg_extension. The identity read here is put back by
    // Restore's drop, on return and on unwinding, and by the
    // (sub)transaction's abort on error.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            extension.owner,
            context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
        );
    }
    struct Restore(Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the user and security context that
            // GetUserIdAndSecContext returned above; two plain assignments
            // that cannot fail, so it is safe while unwinding too.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) }
        }
    }
    let _restore = Restore(user, context);
    let _path = SearchPath::push(&search_path_of(extension.schema));
    let _plans = PlanSettings::apply();
    Spi::connect_mut(f)
}

/// The search path of our statements while they are parsed, planned or
/// replanned: pg_catalog, then the extension's schema, then the temporary
/// schema (which is never searched for functions and operators, and comes
/// last for tables), so that no object a caller creates can stand in for
/// ours. Set in a GUC nest level of its own, as a function's SET clause
/// would, and undone when the call ends; on error the (sub)transaction's
/// abort undoes it. Cached plans remember it and are reparsed only under
/// another path.
struct SearchPath {
    nest: i32,
}

impl SearchPath {
    fn push(path: &std::ffi::CStr) -> SearchPath {
        // SAFETY: a nest level opened here is closed by drop(), or by the
        // transaction's abort, which unwinds every open level.
        let nest = unsafe { pg_sys::NewGUCNestLevel() };
        crate::gucs::set_for_scope(c"search_path", path);
        SearchPath { nest }
    }
}

/// Runs `f` with `path` as the search_path, and every setting made
/// meanwhile undone afterwards (the worker's statements, and the settings
/// its senders make, end with it).
pub fn with_search_path<R>(path: &std::ffi::CStr, f: impl FnOnce() -> R) -> R {
    let _path = SearchPath::push(path);
    f()
}

impl Drop for SearchPath {
    fn drop(&mut self) {
        // On error the (sub)transaction's abort undoes it.
        if !std::thread::panicking() {
            // SAFETY: closes the level push() opened; nothing opened a
            // level inside it that is still open (those close first).
            unsafe { pg_sys::AtEOXact_GUC(false, self.nest) };
        }
    }
}

/// The extension installed now: its oid and the search path of its
/// statements (search_path_of); None when it is not installed. (The
/// worker's look-up, from the same cache as the API's.)
pub fn installed_extension() -> Option<(Oid, std::ffi::CString)> {
    // SAFETY: a catalog lookup inside the caller's transaction, with a
    // NUL-terminated literal; missing_ok makes a missing extension
    // InvalidOid, not an ERROR.
    let oid = unsafe { pg_sys::get_extension_oid(c"queue".as_ptr(), true) };
    if oid == Oid::INVALID {
        return None;
    }
    let found = extension();
    Some((found.oid, search_path_of(found.schema)))
}

/// `pg_catalog, <the schema, quoted>, pg_temp`, looked up at every call
/// (a syscache probe), so that a renamed schema is followed.
fn search_path_of(schema: Oid) -> std::ffi::CString {
    // SAFETY: get_namespace_name returns a palloc'd copy, or NULL for a
    // schema that is gone; quote_identifier returns its argument or a
    // palloc'd quoted copy; both live until the call's memory is reset.
    let quoted = unsafe {
        let name = pg_sys::get_namespace_name(schema);
        assert!(!name.is_null(), "the extension's schema exists");
        std::ffi::CStr::from_ptr(pg_sys::quote_identifier(name))
            .to_string_lossy()
            .into_owned()
    };
    std::ffi::CString::new(format!("pg_catalog, {quoted}, pg_temp"))
        .expect("a schema name without NUL")
}

/// Our statements are small and index-driven: one generic plan each,
/// prepared once per backend, serves every call, and JIT compilation would
/// cost more than running them. Left to itself PostgreSQL replans the first
/// calls, and then estimates the generic plans of statements over
/// partitioned tables high enough to JIT-compile them on every execution
/// (measured: 30 ms for a claim that runs in 3 ms). A plan kept for the life
/// of the backend must not rest on the statistics of its first minute
/// either: a live partition that was empty then may hold the backlog after a
/// rotation, so sequential scans are ruled out.
///
/// They matter only while a statement is planned, which happens inside our
/// calls; the variables are set directly and put back when the call ends
/// (also when it fails: the error unwinds through the guard), which costs
/// nothing next to a GUC nest level. No code but ours runs meanwhile.
struct PlanSettings {
    plan_cache_mode: i32,
    jit: bool,
    seqscan: bool,
}

impl PlanSettings {
    fn apply() -> PlanSettings {
        // SAFETY: plain reads and writes of three planner GUC variables of
        // this backend, from its only thread; the values written are valid
        // for their types (a PlanCacheMode member, bools). Drop puts the
        // saved values back.
        unsafe {
            let saved = PlanSettings {
                plan_cache_mode: pg_sys::plan_cache_mode,
                jit: pg_sys::jit_enabled,
                seqscan: pg_sys::enable_seqscan,
            };
            pg_sys::plan_cache_mode =
                pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as i32;
            pg_sys::jit_enabled = false;
            pg_sys::enable_seqscan = false;
            saved
        }
    }
}

impl Drop for PlanSettings {
    fn drop(&mut self) {
        // SAFETY: as in apply(): writes back the values apply() read.
        unsafe {
            pg_sys::plan_cache_mode = self.plan_cache_mode;
            pg_sys::jit_enabled = self.jit;
            pg_sys::enable_seqscan = self.seqscan;
        }
    }
}

#[derive(Clone, Copy)]
struct Extension {
    oid: Oid,
    owner: Oid,
    schema: Oid,
    queues_table: Oid,
}

impl Extension {
    const NONE: Extension = Extension {
        oid: Oid::INVALID,
        owner: Oid::INVALID,
        schema: Oid::INVALID,
        queues_table: Oid::INVALID,
    };
}

/// The installed extension, looked up once and kept until the relation
/// cache says that `queue_queues` changed (DROP EXTENSION, a new schema or
/// owner), or was reset as a whole.
fn extension() -> Extension {
    let cached = EXTENSION.with(Cell::get);
    if cached.oid != Oid::INVALID {
        return cached;
    }
    // SAFETY: a catalog lookup inside the caller's transaction, with a
    // NUL-terminated literal; missing_ok false raises an ERROR (a panic
    // through pgrx's guard) when the extension is not installed.
    let oid = unsafe { pg_sys::get_extension_oid(c"queue".as_ptr(), false) };
    if !CALLBACK.replace(true) {
        // SAFETY: registered once per backend (CALLBACK), as PostgreSQL's
        // table of relcache callbacks is small and never shrinks;
        // forget_extension has the callback's signature and lives as long
        // as the process (the library is never unloaded).
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(Some(forget_extension), pg_sys::Datum::from(0))
        };
    }
    let (owner, schema, queues_table) = Spi::get_three_with_args::<Oid, Oid, Oid>(
        "SELECT e.extowner, e.extnamespace, c.oid FROM pg_catalog.pg_extension e \
           JOIN pg_catalog.pg_class c \
             ON c.relnamespace = e.extnamespace AND c.relname = 'queue_queues' \
          WHERE e.oid = $1",
        &[oid.into()],
    )
    .expect("the queue extension and its tables are installed");
    let found = Extension {
        oid,
        owner: owner.expect("an extension owner"),
        schema: schema.expect("the extension's schema"),
        queues_table: queues_table.expect("the queue_queues table"),
    };
    EXTENSION.with(|c| c.set(found));
    found
}

/// The oid of `queue_queues`, the class of the locks taken on queues.
pub fn queues_table() -> Oid {
    extension().queues_table
}

/// The role calling the API (the current user, before any switch).
pub fn calling_role() -> Oid {
    // SAFETY: reads the current user, which InitPostgres sets in every
    // backend before any SQL function or worker code runs.
    unsafe { pg_sys::GetUserId() }
}

/// Whether `role` may act as the owner `owner` of a queue: a member of the
/// owning role, or a superuser.
pub fn acts_as(role: Oid, owner: Oid) -> bool {
    // SAFETY: syscache lookups inside the caller's transaction; the oids
    // are plain values, and one with no role behind it is no error.
    unsafe { pg_sys::superuser_arg(role) || pg_sys::is_member_of_role(role, owner) }
}

pub fn timestamp(us: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(us).expect("a valid timestamp")
}
