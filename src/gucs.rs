//! Every setting of the extension, in one place. The prefix `queue.` is
//! reserved, so a typo in postgresql.conf is reported instead of ignored.

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Whether the launcher starts workers at all. On by default: preloading
/// the library is the opt-in. Off stops every worker within a poll interval.
pub static ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);

/// How many databases are served at once. Each takes a background worker
/// slot (`max_worker_processes`, shared with parallel query), so the default
/// is small; databases beyond it wait their turn. Fixed at server start
/// because the slots live in shared memory.
pub static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(4);

/// How many workers may serve one database at once. A database whose
/// worker keeps finding full batches gets helpers while slots are free and
/// no other database waits (they deliver its SQL senders' jobs alongside,
/// and leave as soon as another database waits or the backlog is gone), so
/// that one busy database can use more than one core.
pub static MAX_WORKERS_PER_DATABASE: GucSetting<i32> = GucSetting::<i32>::new(2);

/// How many databases the launcher can keep track of: the size of a table
/// in shared memory (128 bytes a database: a table of twice as many 64-byte
/// entries). Databases beyond it are not served. Fixed at server start;
/// generous, because clusters with thousands of tenant databases exist and
/// an entry costs little.
pub static MAX_DATABASES: GucSetting<i32> = GucSetting::<i32>::new(4096);

/// How many queues of the cluster the latency histograms can keep (a slot
/// of about 800 bytes each, in shared memory: fixed at server start). A
/// queue takes one the first time one of its jobs is claimed or ends, and
/// keeps it until the server stops; queues beyond them are not measured
/// (their observations are counted as dropped: queue_metrics_status()).
pub static METRICS_QUEUES: GucSetting<i32> = GucSetting::<i32>::new(1024);

/// Seconds a worker stays with nothing to do before it gives its slot back.
/// Long enough that a steady trickle of jobs keeps its worker; a worker
/// with nothing due gives its slot up at once when another database waits.
pub static IDLE_EXIT_S: GucSetting<i32> = GucSetting::<i32>::new(60);

/// Milliseconds between a worker's looks at its database when nothing
/// wakes it. Only a fallback: commits wake the worker at once (a prepared
/// transaction's COMMIT PREPARED does not).
pub static POLL_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(5_000);

/// Seconds between the launcher's scans of pg_database for new, dropped or
/// copied databases. CREATE EXTENSION is noticed at once without it.
pub static DATABASE_SCAN_S: GucSetting<i32> = GucSetting::<i32>::new(10);

/// The most jobs a worker takes in one batch, whatever a sender asks for.
pub static MAX_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(10_000);

/// Milliseconds one sender call may take before it is cancelled (and the
/// attempt fails). 0: no limit.
pub static SENDER_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(60_000);

/// Seconds between a worker's runs of queue_maintain() (retention cleanup,
/// counters, live-table rotation) in its database. Short, because under a
/// snapshot held open only the rotation gives claims a ready index without
/// the dead entries of the jobs claimed since the last one; a run with
/// nothing to do costs a few index probes.
pub static UPKEEP_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(10);

/// Which endpoints webhooks may reach: a comma-separated list of URLs
/// (webhooks::allow). Empty by default, so that nothing is sent until a
/// superuser allows it; may be set per database (ALTER DATABASE ... SET),
/// which the worker reads again before every batch of requests.
pub static WEBHOOK_ALLOW: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);

/// A PEM file of certificates that webhook TLS trusts besides the system's
/// trust store (for private CAs). Empty: the system's alone.
pub static WEBHOOK_CA_FILE: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);

/// W3C Trace Context for the jobs a transaction enqueues whose headers have
/// none (`SET LOCAL queue.traceparent = '00-...'`): copied into their
/// headers. A malformed value is refused when it is set (22023).
pub static TRACEPARENT: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);
pub static TRACESTATE: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);

/// Where the workers send a span of each delivery attempt: an
/// OpenTelemetry collector's OTLP/HTTP base URL (`/v1/traces` is added).
/// Empty: no span is made.
pub static OTLP_ENDPOINT: GucSetting<Option<std::ffi::CString>> =
    GucSetting::<Option<std::ffi::CString>>::new(None);

/// A string setting's value ("" when unset).
pub fn text(setting: &GucSetting<Option<std::ffi::CString>>) -> String {
    setting
        .get()
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The most worker slots `queue.max_workers` can ask for (shared memory is
/// sized for this many).
pub const WORKER_SLOTS: usize = 64;

pub fn init() {
    GucRegistry::define_string_guc(
        c"queue.webhook_allow",
        c"Which endpoints webhooks may reach: a comma-separated list of URLs.",
        c"A target is allowed when its scheme, host and port equal an entry's and its path starts with the entry's path at a / boundary. Empty: none.",
        &WEBHOOK_ALLOW,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"queue.webhook_ca_file",
        c"A PEM file of certificates that webhook TLS trusts besides the system's.",
        c"For endpoints whose certificates a private CA signed. Empty: the system's trust store alone.",
        &WEBHOOK_CA_FILE,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: both check hooks are #[pg_guard]ed and have the signature
    // PostgreSQL calls them with; the settings are statics.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"queue.traceparent",
            c"W3C traceparent of the jobs this transaction enqueues without one in their headers.",
            c"00-<trace id>-<parent id>-<flags>, as the W3C Trace Context recommendation writes it.",
            &TRACEPARENT,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_traceparent),
            None,
            None,
        );
        GucRegistry::define_string_guc_with_hooks(
            c"queue.tracestate",
            c"W3C tracestate that goes with queue.traceparent.",
            c"",
            &TRACESTATE,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_tracestate),
            None,
            None,
        );
    }
    GucRegistry::define_string_guc(
        c"queue.otlp_endpoint",
        c"The OpenTelemetry collector the workers send a span of each delivery attempt to.",
        c"Its OTLP/HTTP base URL, such as http://localhost:4318 (/v1/traces is added). Empty: no spans.",
        &OTLP_ENDPOINT,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"queue.enabled",
        c"Whether background workers deliver jobs.",
        c"Off: the launcher starts no worker and running workers exit; the SQL API works as before.",
        &ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    // A PGC_POSTMASTER setting can only be defined while preloading; a
    // backend that loads the library later has no workers to size anyway.
    // SAFETY: a plain read of a flag that PostgreSQL sets around loading
    // the preloaded libraries; init() runs in _PG_init, on the process's
    // only thread.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        define_max_workers();
    }
    GucRegistry::define_int_guc(
        c"queue.max_workers_per_database",
        c"How many workers may serve one busy database at once.",
        c"",
        &MAX_WORKERS_PER_DATABASE,
        1,
        WORKER_SLOTS as i32,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"queue.idle_exit",
        c"How long a worker with nothing to do keeps its slot.",
        c"",
        &IDLE_EXIT_S,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"queue.poll_interval",
        c"How often a worker looks at its database when no commit wakes it.",
        c"",
        &POLL_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"queue.database_scan_interval",
        c"How often the launcher looks for new, dropped or copied databases.",
        c"",
        &DATABASE_SCAN_S,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"queue.max_batch_size",
        c"The most jobs a worker takes in one batch.",
        c"Caps the batch_size of every sender.",
        &MAX_BATCH_SIZE,
        1,
        10_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"queue.sender_timeout",
        c"How long one sender call may take.",
        c"A call that takes longer is cancelled, and the job's attempt fails. 0 disables the limit.",
        &SENDER_TIMEOUT_MS,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"queue.upkeep_interval",
        c"How often a worker runs queue_maintain() in its database.",
        c"Retention cleanup, folding the counters of queue_stats, and rotating the live table.",
        &UPKEEP_INTERVAL_S,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    // SAFETY: a NUL-terminated literal; called from _PG_init after every
    // queue.* setting is defined, as PostgreSQL expects of it.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"queue".as_ptr()) };
}

fn define_max_workers() {
    GucRegistry::define_int_guc(
        c"queue.max_databases",
        c"How many databases the background workers can serve.",
        c"The size of the launcher's table of databases in shared memory.",
        &MAX_DATABASES,
        16,
        1_000_000,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"queue.metrics_queues",
        c"How many queues the latency histograms keep.",
        c"A slot per queue of the cluster, in shared memory; queues beyond them are not measured.",
        &METRICS_QUEUES,
        16,
        1_000_000,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"queue.max_workers",
        c"How many databases background workers serve at once.",
        c"Databases with due work beyond this many wait for a slot (queue_workers shows them).",
        &MAX_WORKERS,
        1,
        WORKER_SLOTS as i32,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}

/// Sets a setting until the current GUC nest level ends, as a function's
/// SET clause does. An invalid value raises an ERROR.
pub fn set_for_scope(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    set_in_nest_level(name, value, 0);
}

/// `set_for_scope`, but a value that cannot be applied is skipped (and
/// reported at DEBUG1) instead of raising an ERROR: whether it was applied.
pub fn try_set_for_scope(name: &std::ffi::CStr, value: &std::ffi::CStr) -> bool {
    set_in_nest_level(name, value, pg_sys::DEBUG1 as i32) > 0
}

fn set_in_nest_level(name: &std::ffi::CStr, value: &std::ffi::CStr, elevel: i32) -> i32 {
    // SAFETY: name and value are NUL-terminated and outlive the call, which
    // copies them. Callers are inside a transaction and have opened the GUC
    // nest level (NewGUCNestLevel) that GUC_ACTION_SAVE ties the value to.
    // With elevel 0 an invalid value raises an ERROR, which unwinds as any
    // PostgreSQL error; with DEBUG1 it returns 0 (one that a check hook
    // raises anyway unwinds all the same).
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            elevel,
            false,
        )
    }
}

/// The value a string setting's check hook is asked about, or None for an
/// empty one (which means unset).
///
/// # Safety
///
/// `newval` is what PostgreSQL passes a string check hook: a pointer to a
/// NUL-terminated string, or to NULL.
unsafe fn checked_value(newval: *mut *mut std::ffi::c_char) -> Option<String> {
    // SAFETY: as the caller guarantees.
    let value = unsafe { *newval };
    if value.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string that lives for the call.
    let text = unsafe { std::ffi::CStr::from_ptr(value) }.to_string_lossy();
    (!text.is_empty()).then(|| text.into_owned())
}

/// Refuses a value (22023, PostgreSQL's code for a setting its check hook
/// refuses), saying why in the error's detail.
fn refuse(problem: &str) -> bool {
    let detail = std::ffi::CString::new(problem.replace('\0', "")).unwrap_or_default();
    // SAFETY: GUC_check_errdetail_string is read by the caller of the check
    // hook right after it returns false; pstrdup copies into the current
    // memory context, which lives until then.
    unsafe { pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr()) };
    false
}

/// Only PostgreSQL calls it: the check hook of queue.traceparent.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_traceparent(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: called as a string check hook.
    match unsafe { checked_value(newval) } {
        None => true,
        Some(value) => {
            crate::trace_context::parse(&value, None).map_or_else(|p| refuse(&p), |_| true)
        }
    }
}

/// Only PostgreSQL calls it: the check hook of queue.tracestate.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_tracestate(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: called as a string check hook.
    match unsafe { checked_value(newval) } {
        None => true,
        Some(value) => {
            crate::trace_context::check_state(&value).map_or_else(|p| refuse(&p), |_| true)
        }
    }
}
