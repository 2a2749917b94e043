//! W3C Trace Context (traceparent, tracestate) as a job carries it: in its
//! headers, taken there from the enqueuing transaction's settings
//! `queue.traceparent` and `queue.tracestate` when the headers have none.
//! Read and written by OpenTelemetry's own propagator: a value it does not
//! take is malformed (22023).

use std::collections::HashMap;
use std::str::FromStr;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// A job's trace context: the trace it belongs to and the span that
/// enqueued it (its parent).
#[derive(Clone, Debug, PartialEq)]
pub struct Parent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    /// The tracestate header, as given ("" when none).
    pub state: String,
}

/// Whether `tracestate` is well formed, or why not.
pub fn check_state(tracestate: &str) -> Result<(), String> {
    TraceState::from_str(tracestate).map(|_| ()).map_err(|_| {
        format!("tracestate \"{tracestate}\" is malformed: it must be a list of key=value")
    })
}

/// The trace context of `traceparent` and `tracestate`, or why they are
/// malformed.
pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Result<Parent, String> {
    if let Some(state) = tracestate {
        check_state(state)?;
    }
    let malformed = || {
        format!(
            "traceparent \"{traceparent}\" is malformed: it must be 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lowercase, ids not all zeros"
        )
    };
    // The propagator takes ids of any length; the recommendation's fields have these.
    let lengths: Vec<usize> = traceparent.split('-').map(str::len).collect();
    if lengths.len() < 4 || lengths[..4] != [2, 32, 16, 2] {
        return Err(malformed());
    }
    let mut carrier = HashMap::from([(TRACEPARENT.to_string(), traceparent.to_string())]);
    if let Some(state) = tracestate {
        carrier.insert(TRACESTATE.to_string(), state.to_string());
    }
    let context = TraceContextPropagator::new().extract(&carrier);
    let span = context.span();
    let found = span.span_context();
    if !found.is_valid() {
        return Err(malformed());
    }
    Ok(Parent {
        trace_id: found.trace_id().to_bytes(),
        span_id: found.span_id().to_bytes(),
        sampled: found.is_sampled(),
        state: tracestate.unwrap_or_default().to_string(),
    })
}

/// The headers that carry an attempt's span `span_id`, child of `parent`,
/// to the endpoint it calls: (name, value) pairs.
pub fn headers_for(parent: &Parent, span_id: [u8; 8]) -> Vec<(String, String)> {
    let flags = if parent.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let state = TraceState::from_str(&parent.state).unwrap_or_default();
    let span = SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(span_id),
        flags,
        true,
        state,
    );
    let context = Context::new().with_remote_span_context(span);
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    let mut headers: Vec<(String, String)> = carrier
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .collect();
    headers.sort();
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_is_read_with_its_state() {
        let parent = parse(GOOD, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(parent.trace_id[0], 0x4b);
        assert_eq!(
            parent.span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(parent.sampled);
        assert_eq!(parent.state, "congo=t61rcWkgMzE");
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "",
            "garbage",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-abc-def-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad, None).is_err(), "{bad:?}");
        }
        assert!(parse(GOOD, Some("not a state")).is_err());
    }

    #[test]
    fn an_attempt_carries_the_trace_with_its_own_span() {
        let parent = parse(GOOD, Some("congo=t61rcWkgMzE")).unwrap();
        let headers = headers_for(&parent, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            headers,
            vec![
                (
                    TRACEPARENT.to_string(),
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01".to_string()
                ),
                (TRACESTATE.to_string(), "congo=t61rcWkgMzE".to_string()),
            ]
        );
        let unsampled = parse(&GOOD.replace("-01", "-00"), None).unwrap();
        assert_eq!(headers_for(&unsampled, [9; 8]).len(), 1);
    }
}
