//! The SQL functions of the API, one file per group. Each one checks its
//! arguments, then runs its statements as the extension owner.

mod await_job;
mod consume;
mod groups;
pub mod metrics;
mod procedure;
mod produce;
mod queues;
mod repair;
mod schedules;
mod senders;
mod upkeep;
mod wait;
mod webhooks;
pub mod workers;

use pgrx::datum::Interval;

use crate::catalog::micros;
use crate::errors::QueueError;
use crate::gucs;
use crate::jsonb::Jsonb;
use crate::rules::Duration;
use crate::trace_context;

/// An interval argument as the rules see it.
fn duration(value: &Interval) -> Duration {
    Duration {
        micros: micros(value),
        text: value.to_string(),
    }
}

/// A job's headers with its trace context: a traceparent (and tracestate)
/// of its own must be well formed (22023); else the transaction's
/// queue.traceparent and queue.tracestate, when set, are added to them.
fn traced_headers(headers: Option<Jsonb>) -> Option<Jsonb> {
    if let Some(headers) = headers {
        if let Some(traceparent) = headers.field_text(trace_context::TRACEPARENT) {
            let tracestate = headers.field_text(trace_context::TRACESTATE);
            if let Err(problem) = trace_context::parse(&traceparent, tracestate.as_deref()) {
                QueueError::MalformedTraceContext { problem }.raise();
            }
            return Some(headers);
        }
    }
    let traceparent = gucs::text(&gucs::TRACEPARENT);
    if traceparent.is_empty() {
        return headers;
    }
    // The settings' check hooks refused anything malformed.
    let mut context = serde_json::Map::new();
    context.insert(trace_context::TRACEPARENT.into(), traceparent.into());
    let tracestate = gucs::text(&gucs::TRACESTATE);
    if !tracestate.is_empty() {
        context.insert(trace_context::TRACESTATE.into(), tracestate.into());
    }
    let context = Jsonb::from_json(&serde_json::Value::Object(context));
    Some(match headers {
        Some(headers) => headers.concat(context),
        None => context,
    })
}

/// A job's headers: a JSON object, or 22023.
fn check_headers(headers: Option<Jsonb>) {
    if let Some(h) = headers {
        let kind = h.type_name();
        if kind != "object" {
            QueueError::NotAnObject {
                argument: "headers",
                value: kind,
            }
            .raise();
        }
    }
}
