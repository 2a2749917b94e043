//! How the API reaches its tables: prepared statements kept for the life of
//! the backend, run as the extension's owner.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::datum::DatumWithOid;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, Oid, PgOid};
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiHeapTupleData, SpiTupleTable};
use pgrx::Spi;
use pgrx::{FromDatum, IntoDatum};

use crate::errors::QueueError;

/// One SQL statement of the extension (from `sql/queries/`), with the one
/// declaration of its shape (queries.rs): the names and types of its
/// parameters, in `$n` order, and the names of its result columns, in
/// order. Calls pass their arguments by name (`args!`) and read columns by
/// name (`Row`); the `#[pg_test]` statements_have_their_declared_shape
/// checks the declarations against the prepared statements.
pub struct Statement {
    /// The file (or files, joined) it comes from, for messages.
    pub file: &'static str,
    pub sql: &'static str,
    pub params: &'static [&'static str],
    pub types: &'static [PgOid],
    pub columns: &'static [&'static str],
}

impl Statement {
    /// The 1-based position of result column `name`.
    fn column(&self, name: &str) -> usize {
        match self.columns.iter().position(|c| *c == name) {
            Some(at) => at + 1,
            None => QueueError::StatementShape {
                statement: self.file,
                detail: format!("it declares no result column {name}"),
            }
            .raise(),
        }
    }
}

/// Arguments of a statement by the names it declares, in order:
/// `args![queue_id = queue.id, now = at]`. (`run` checks the names, so
/// that two arguments of one type cannot be swapped unnoticed.)
#[macro_export]
macro_rules! args {
    ($($name:ident = $value:expr),* $(,)?) => {
        (
            &[$(stringify!($name)),*][..],
            &[$(::pgrx::datum::DatumWithOid::from($value)),*][..],
        )
    };
}
pub use crate::args;

/// The rows of one run of a statement.
pub struct Rows<'c> {
    stmt: &'static Statement,
    source: Source<'c>,
}

/// Where the rows come from: pgrx's table of an SPI call, or the tuples of
/// a call made with a snapshot of its own (`look`), as SPI left them.
enum Source<'c> {
    Table(SpiTupleTable<'c>),
    Tuples {
        desc: pg_sys::TupleDesc,
        tuples: std::vec::IntoIter<*mut pg_sys::HeapTupleData>,
        _connection: std::marker::PhantomData<&'c ()>,
    },
}

impl<'c> Rows<'c> {
    pub fn is_empty(&self) -> bool {
        match &self.source {
            Source::Table(table) => table.is_empty(),
            Source::Tuples { tuples, .. } => tuples.len() == 0,
        }
    }

    /// The first row, for a statement that gives one or none.
    pub fn first(mut self) -> Option<Row<'c>> {
        self.next()
    }
}

impl<'c> Iterator for Rows<'c> {
    type Item = Row<'c>;

    fn next(&mut self) -> Option<Row<'c>> {
        let tuple = match &mut self.source {
            Source::Table(table) => table.next()?,
            Source::Tuples { desc, tuples, .. } => {
                let tuple = tuples.next()?;
                // SAFETY: `desc` and `tuple` are the descriptor and a row of
                // the result SPI left (SPI_tuptable) for this connection,
                // which lives until the connection ends ('c).
                unsafe { SpiHeapTupleData::new(*desc, tuple) }
                    .ok()
                    .flatten()
                    .expect("a row of the result")
            }
        };
        Some(Row {
            stmt: self.stmt,
            tuple,
        })
    }
}

/// A result row, read by column name. A column the statement does not
/// declare, or read as another type than it has, is a bug in the extension:
/// it raises XX000 naming the statement and column, never a silent None.
pub struct Row<'c> {
    stmt: &'static Statement,
    tuple: SpiHeapTupleData<'c>,
}

impl Row<'_> {
    /// Column `name`; None when it is NULL.
    pub fn get<T: IntoDatum + FromDatum>(&self, name: &str) -> Option<T> {
        self.tuple
            .get::<T>(self.stmt.column(name))
            .unwrap_or_else(|e| {
                QueueError::StatementShape {
                    statement: self.stmt.file,
                    detail: format!("column {name}: {e}"),
                }
                .raise()
            })
    }

    /// Column `name`, which the statement never leaves NULL.
    pub fn value<T: IntoDatum + FromDatum>(&self, name: &str) -> T {
        self.get(name).unwrap_or_else(|| {
            QueueError::StatementShape {
                statement: self.stmt.file,
                detail: format!("column {name} is NULL"),
            }
            .raise()
        })
    }
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
    /// What other modules cache of the extension's tables, forgotten with
    /// it (`forget_with_extension`).
    static FORGET_TOO: RefCell<Vec<fn()>> = const { RefCell::new(Vec::new()) };
    /// The search path of our statements (search_path_of), for the schema
    /// it was built for; forgotten when a schema changes.
    static SEARCH_PATH: RefCell<Option<(Oid, std::ffi::CString)>> = const { RefCell::new(None) };
    /// `forget_search_path` is registered in this backend.
    static SCHEMA_CALLBACK: Cell<bool> = const { Cell::new(false) };
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
        FORGET_TOO.with(|f| f.borrow().iter().for_each(|forget| forget()));
    }
}

fn plan(client: &SpiClient<'_>, stmt: &Statement) -> &'static OwnedPreparedStatement {
    let key = stmt.sql.as_ptr() as usize;
    if let Some(found) = PLANS.with(|p| p.borrow().get(&key).copied()) {
        return found;
    }
    PREPARED.set(PREPARED.get() + 1);
    let prepared = client
        .prepare_mut(stmt.sql, stmt.types)
        .unwrap_or_else(|e| {
            QueueError::StatementShape {
                statement: stmt.file,
                detail: format!("it does not prepare: {e}"),
            }
            .raise()
        })
        .keep();
    let leaked: &'static OwnedPreparedStatement = Box::leak(Box::new(prepared));
    PLANS.with(|p| p.borrow_mut().insert(key, leaked));
    leaked
}

/// Runs one statement with its arguments (`args!`) and returns its rows.
/// An error in the statement is raised as PostgreSQL raised it.
pub fn run<'c>(
    client: &mut SpiClient<'c>,
    stmt: &'static Statement,
    args: (&[&str], &[DatumWithOid<'_>]),
) -> Rows<'c> {
    check_args(stmt, args.0);
    // Every statement may write (SPI's update asks for a transaction id at
    // once, which a standby cannot give: XX000 otherwise).
    // SAFETY: reads the shared state of recovery (a local flag once it has
    // ended), in a backend attached to shared memory.
    if unsafe { pg_sys::RecoveryInProgress() } {
        QueueError::InRecovery.raise();
    }
    let plan = plan(client, stmt);
    let table = client.update(plan, None, args.1);
    Rows {
        stmt,
        source: Source::Table(table.unwrap_or_else(|e| refused(stmt, e))),
    }
}

/// `run` for a statement that only reads, in the snapshot of the statement
/// that called the API (a stable function's): it needs no transaction id,
/// so it runs on a hot standby too.
pub fn read<'c>(
    client: &mut SpiClient<'c>,
    stmt: &'static Statement,
    args: (&[&str], &[DatumWithOid<'_>]),
) -> Rows<'c> {
    check_args(stmt, args.0);
    let plan = plan(client, stmt);
    let table = client.select(plan, None, args.1);
    Rows {
        stmt,
        source: Source::Table(table.unwrap_or_else(|e| refused(stmt, e))),
    }
}

/// `run`, for what a claim counts and chooses after it has taken its turn
/// (limits.rs): the jobs as committed now. In READ COMMITTED that is what
/// every statement `run` sees; a transaction with one snapshot for all its
/// statements (REPEATABLE READ, SERIALIZABLE) reads them here in a fresh
/// snapshot instead, as PostgreSQL's foreign key checks do, so that it
/// counts the claims that committed since its snapshot. (What it then
/// claims is locked in its own snapshot, where a job changed since is a
/// serialization failure, 40001, and a job made since is not there.) The
/// statement only reads.
pub fn look<'c>(
    client: &mut SpiClient<'c>,
    stmt: &'static Statement,
    args: (&[&str], &[DatumWithOid<'_>]),
) -> Rows<'c> {
    if read_committed() {
        return run(client, stmt, args);
    }
    check_args(stmt, args.0);
    let plan = look_plan(stmt);
    let (mut values, mut nulls): (Vec<pg_sys::Datum>, Vec<std::ffi::c_char>) = args
        .1
        .iter()
        .map(|arg| match arg.datum() {
            Some(datum) => (datum.sans_lifetime(), b' ' as std::ffi::c_char),
            None => (pg_sys::Datum::from(0usize), b'n' as std::ffi::c_char),
        })
        .unzip();
    // SAFETY: inside an SPI connection (`client`) and a transaction that
    // has taken its snapshot (the claim's statements ran before), so
    // GetLatestSnapshot may be called; `plan` was prepared for `stmt`'s
    // parameters, which `values` and `nulls` hold in order (check_args);
    // read-only, the statement runs with exactly that snapshot.
    let status = unsafe {
        pg_sys::SPI_execute_snapshot(
            plan,
            values.as_mut_ptr(),
            nulls.as_mut_ptr(),
            pg_sys::GetLatestSnapshot(),
            std::ptr::null_mut(),
            true,
            false,
            0,
        )
    };
    if status < 0 {
        QueueError::StatementShape {
            statement: stmt.file,
            detail: format!("SPI_execute_snapshot returned {status}"),
        }
        .raise();
    }
    // SAFETY: the call succeeded, so SPI_tuptable is its result (or NULL
    // for none), with SPI_processed rows, valid until the connection ends.
    let (desc, tuples) = unsafe {
        let table = pg_sys::SPI_tuptable;
        if table.is_null() {
            (std::ptr::null_mut(), Vec::new())
        } else {
            let rows = (0..pg_sys::SPI_processed as usize)
                .map(|i| *(*table).vals.add(i))
                .collect();
            ((*table).tupdesc, rows)
        }
    };
    let _ = client;
    Rows {
        stmt,
        source: Source::Tuples {
            desc,
            tuples: tuples.into_iter(),
            _connection: std::marker::PhantomData,
        },
    }
}

thread_local! {
    /// Plans of `look`, by statement text: prepared apart from `PLANS`, whose
    /// pgrx statements run in the transaction's snapshot. Kept for the life
    /// of the backend.
    static LOOK_PLANS: RefCell<HashMap<usize, usize>> = RefCell::new(HashMap::new());
}

/// The plan of `stmt` for `look`, prepared and kept the first time.
fn look_plan(stmt: &'static Statement) -> pg_sys::SPIPlanPtr {
    let key = stmt.sql.as_ptr() as usize;
    if let Some(found) = LOOK_PLANS.with_borrow(|p| p.get(&key).copied()) {
        return found as pg_sys::SPIPlanPtr;
    }
    let sql = std::ffi::CString::new(stmt.sql).expect("a statement without NUL");
    let mut types: Vec<Oid> = stmt.types.iter().map(|t| t.value()).collect();
    // SAFETY: inside an SPI connection; `types` has one type per parameter;
    // a plan that does not prepare is an error raised by SPI_prepare or
    // reported as NULL; SPI_keepplan moves it into memory that lives as long
    // as the backend.
    let plan = unsafe {
        let plan = pg_sys::SPI_prepare(sql.as_ptr(), types.len() as i32, types.as_mut_ptr());
        if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
            QueueError::StatementShape {
                statement: stmt.file,
                detail: "it does not prepare".into(),
            }
            .raise();
        }
        plan
    };
    LOOK_PLANS.with_borrow_mut(|p| p.insert(key, plan as usize));
    plan
}

fn check_args(stmt: &'static Statement, names: &[&str]) {
    if names != stmt.params {
        QueueError::StatementShape {
            statement: stmt.file,
            detail: format!(
                "called with ({}), declared ({})",
                names.join(", "),
                stmt.params.join(", ")
            ),
        }
        .raise();
    }
}

fn refused(stmt: &'static Statement, e: pgrx::spi::SpiError) -> ! {
    QueueError::StatementShape {
        statement: stmt.file,
        detail: e.to_string(),
    }
    .raise()
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
    let _path = SEARCH_PATH.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached
            .as_ref()
            .is_none_or(|(schema, _)| *schema != extension.schema)
        {
            if !SCHEMA_CALLBACK.replace(true) {
                // SAFETY: registered once per backend (SCHEMA_CALLBACK), as
                // PostgreSQL's table of syscache callbacks is small and never
                // shrinks; forget_search_path has the callback's signature
                // and lives as long as the process.
                unsafe {
                    pg_sys::CacheRegisterSyscacheCallback(
                        pg_sys::SysCacheIdentifier::NAMESPACEOID as _,
                        Some(forget_search_path),
                        pg_sys::Datum::from(0),
                    )
                };
            }
            *cached = Some((extension.schema, search_path_of(extension.schema)));
        }
        SearchPath::push(&cached.as_ref().expect("just set").1)
    });
    let _plans = PlanSettings::apply();
    Spi::connect_mut(f)
}

/// Called on any change to pg_namespace (a renamed schema): the search path
/// is built again at the next call.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forget_search_path(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    SEARCH_PATH.with(|cached| {
        if let Ok(mut cached) = cached.try_borrow_mut() {
            *cached = None;
        }
    });
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
    extension_oid()?;
    let found = extension();
    Some((found.oid, search_path_of(found.schema)))
}

/// The oid of the extension installed in this database now, if it is
/// (the caller is in a transaction).
pub fn extension_oid() -> Option<Oid> {
    // SAFETY: a catalog lookup inside the caller's transaction, with a
    // NUL-terminated literal; missing_ok makes a missing extension
    // InvalidOid, not an ERROR.
    let oid = unsafe { pg_sys::get_extension_oid(c"queue".as_ptr(), true) };
    (oid != Oid::INVALID).then_some(oid)
}

/// `pg_catalog, <the schema, quoted>, pg_temp`, from the schema's name now
/// (the API caches it until a schema changes: forget_search_path).
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
    // Catalog reads, not a statement: planning a join of pg_extension and
    // pg_class costs a new worker about 1.5 ms, at every start.
    let (owner, schema) = extension_row(oid);
    // SAFETY: a syscache probe inside the caller's transaction, with a
    // NUL-terminated literal; a missing table gives InvalidOid.
    let queues_table = unsafe { pg_sys::get_relname_relid(c"queue_queues".as_ptr(), schema) };
    assert!(
        queues_table != Oid::INVALID,
        "the queue_queues table is installed"
    );
    let found = Extension {
        oid,
        owner,
        schema,
        queues_table,
    };
    EXTENSION.with(|c| c.set(found));
    found
}

/// The owner and schema of the extension `oid`, read from pg_extension by
/// its oid index (PostgreSQL 15 has no syscache for it, and exports no
/// get_extension_schema).
fn extension_row(oid: Oid) -> (Oid, Oid) {
    // SAFETY: inside the caller's transaction. The relation is opened and
    // closed here with the same lock; the scan key is initialised before
    // the scan reads it and outlives the scan; the tuple returned by
    // systable_getnext stays valid until systable_endscan, and its fixed
    // leading columns are read through GETSTRUCT before that.
    unsafe {
        let rel = pg_sys::table_open(pg_sys::ExtensionRelationId, pg_sys::AccessShareLock as _);
        let mut key = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyInit(
            &mut key,
            pg_sys::Anum_pg_extension_oid as _,
            pg_sys::BTEqualStrategyNumber as _,
            pg_sys::Oid::from(pg_sys::F_OIDEQ),
            pg_sys::Datum::from(oid),
        );
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::Oid::from(pg_sys::ExtensionOidIndexId),
            true,
            std::ptr::null_mut(),
            1,
            &mut key,
        );
        let tuple = pg_sys::systable_getnext(scan);
        assert!(!tuple.is_null(), "the queue extension is installed");
        let form = pg_sys::GETSTRUCT(tuple).cast::<pg_sys::FormData_pg_extension>();
        let found = ((*form).extowner, (*form).extnamespace);
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        found
    }
}

/// Has `forget` called whenever this backend forgets what it knew of the
/// extension (its tables changed, or it was dropped and made again): for
/// caches of what its tables hold. Registered once per `forget`.
pub fn forget_with_extension(forget: fn()) {
    FORGET_TOO.with(|f| {
        let mut f = f.borrow_mut();
        if !f.contains(&forget) {
            f.push(forget);
        }
    });
}

/// Whether the transaction reads committed rows afresh at each statement
/// (READ COMMITTED).
pub fn read_committed() -> bool {
    // SAFETY: a plain read of the transaction's isolation level, which
    // PostgreSQL sets at its start.
    // READ UNCOMMITTED is READ COMMITTED in PostgreSQL.
    unsafe { pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Delivers to this backend's caches the invalidations that other
/// sessions' committed changes sent (a queue altered or paused, an index
/// rebuilt), before a cache that follows them is used. PostgreSQL delivers
/// them when a lock is taken anew; a transaction that already holds its
/// locks would otherwise go on with what it cached, where a statement
/// would see the change.
pub fn accept_invalidations() {
    // SAFETY: reads the shared invalidation queue and runs the cache
    // callbacks, as any lock acquisition inside a transaction may; callers
    // hold no pointer into a cache across it.
    unsafe { pg_sys::AcceptInvalidationMessages() };
}

/// The oid of `queue_queues`, the class of the locks taken on queues.
pub fn queues_table() -> Oid {
    extension().queues_table
}

/// The schema the extension's tables are in.
pub fn schema() -> Oid {
    extension().schema
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

/// Whether syscache `cache` has an entry for `key` (the caller is in a
/// transaction).
pub fn in_syscache(cache: pg_sys::SysCacheIdentifier::Type, key: pg_sys::Oid) -> bool {
    let zero = pg_sys::Datum::from(0usize);
    // SAFETY: a syscache look-up by one oid key in the caller's
    // transaction, which only reads; the other keys are unused (zero).
    unsafe {
        pg_sys::SearchSysCacheExists(cache as i32, pg_sys::Datum::from(key), zero, zero, zero)
    }
}
