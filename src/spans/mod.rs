//! A span for each delivery attempt of the background worker (docs/
//! operations.md, "Metrics and traces"): child of the trace context in the
//! job's headers (trace_context.rs), or the root of a trace of its own; its
//! span id is the one a webhook sends in its traceparent header. With
//! `queue.otlp_endpoint` set, the spans of a transaction go, when it
//! commits, to a thread of the worker's own that sends them in batches to
//! an OpenTelemetry collector over OTLP/HTTP (export.rs); nothing waits
//! for it, and what it cannot send in time is dropped and counted.

mod export;

use std::cell::{Cell, RefCell};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::ends::Outcome;
use crate::gucs;
use crate::jsonb::Jsonb;
use crate::trace_context::{self, Parent};

pub use export::Span;

/// A delivery attempt under way.
#[derive(Clone)]
pub struct Attempt {
    parent: Option<Parent>,
    trace_id: [u8; 16],
    span_id: [u8; 8],
    queue: String,
    job: i64,
    attempt: i32,
    started_ns: u64,
}

impl Attempt {
    /// Attempt number `attempt` of job `job` of queue `queue`, beginning
    /// now, in the trace of `headers` (the job's), if they carry one well
    /// formed.
    pub fn begin(queue: &str, job: i64, attempt: i32, headers: Option<Jsonb>) -> Attempt {
        let parent = headers.and_then(|h| {
            let traceparent = h.field_text(trace_context::TRACEPARENT)?;
            let tracestate = h.field_text(trace_context::TRACESTATE);
            trace_context::parse(&traceparent, tracestate.as_deref()).ok()
        });
        let trace_id = parent
            .as_ref()
            .map_or_else(random_bytes::<16>, |p| p.trace_id);
        Attempt {
            parent,
            trace_id,
            span_id: random_bytes::<8>(),
            queue: queue.to_string(),
            job,
            attempt,
            started_ns: unix_ns_now(),
        }
    }

    /// The attempt a SQL sender is called for with `job`, its job object
    /// (id, queue, attempt and headers are there).
    pub fn of_job(job: Jsonb) -> Attempt {
        let number = |key| {
            job.field_text(key)
                .and_then(|text| text.parse::<i64>().ok())
                .unwrap_or_default()
        };
        Attempt::begin(
            &job.field_text("queue").unwrap_or_default(),
            number("id"),
            number("attempt") as i32,
            job.field("headers"),
        )
    }

    /// The headers that carry this attempt's span to the endpoint it calls
    /// (none for a job without a trace context).
    pub fn headers(&self) -> Vec<(String, String)> {
        self.parent
            .as_ref()
            .map(|p| trace_context::headers_for(p, self.span_id))
            .unwrap_or_default()
    }

    /// The attempt ended now as `outcome` (with `error` when it failed):
    /// its span is exported once this transaction commits, when
    /// queue.otlp_endpoint is set.
    pub fn ended(self, outcome: Outcome, error: Option<&str>) {
        let endpoint = gucs::text(&gucs::OTLP_ENDPOINT);
        if endpoint.is_empty() {
            return;
        }
        let span = Span {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_span_id: self.parent.as_ref().map(|p| p.span_id),
            trace_state: self.parent.map(|p| p.state).unwrap_or_default(),
            queue: self.queue,
            database: database_name(),
            job: self.job,
            attempt: self.attempt,
            start_ns: self.started_ns,
            end_ns: unix_ns_now(),
            outcome: outcome.word(),
            error: error.map(str::to_string),
        };
        note(span);
    }
}

/// Whether spans are made (queue.otlp_endpoint is set).
pub fn enabled() -> bool {
    !gucs::text(&gucs::OTLP_ENDPOINT).is_empty()
}

thread_local! {
    static NOTED: RefCell<Vec<Span>> = const { RefCell::new(Vec::new()) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

fn note(span: Span) {
    if !REGISTERED.replace(true) {
        // SAFETY: registered once per process (REGISTERED), as PostgreSQL
        // keeps a callback registered until the process ends;
        // at_transaction_end has the callback's signature, lives as long
        // as the process and never raises (it hands spans to a channel).
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
    NOTED.with_borrow_mut(|noted| noted.push(span));
}

/// At a commit the spans go to the exporter; otherwise they are forgotten
/// (the attempts did not happen).
///
/// # Safety
///
/// Only PostgreSQL calls it, as the transaction callback registered in
/// `note`.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT => {
            let spans = NOTED.with_borrow_mut(std::mem::take);
            if !spans.is_empty() {
                export::send(spans, &gucs::text(&gucs::OTLP_ENDPOINT));
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => {
            NOTED.with_borrow_mut(Vec::clear);
        }
        _ => {}
    }
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // SAFETY: writes exactly N bytes into the buffer it is given, which
    // outlives the call.
    if !unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), N) } {
        error!("could not generate random values for a span id");
    }
    bytes
}

fn unix_ns_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// This process's database, by name (looked up once: a process serves one
/// database all its life).
fn database_name() -> String {
    thread_local! {
        static NAME: RefCell<Option<String>> = const { RefCell::new(None) };
    }
    NAME.with_borrow_mut(|known| {
        known
            .get_or_insert_with(|| {
                // SAFETY: MyDatabaseId is set once the process is connected
                // (a worker delivers only then); get_database_name returns
                // a palloc'd copy, or NULL for a database dropped meanwhile.
                unsafe {
                    let name = pg_sys::get_database_name(pg_sys::MyDatabaseId);
                    if name.is_null() {
                        return String::new();
                    }
                    std::ffi::CStr::from_ptr(name)
                        .to_string_lossy()
                        .into_owned()
                }
            })
            .clone()
    })
}
