//! The worker's span exporter: a thread of its own (no PostgreSQL call, no
//! signal) that takes committed spans from a bounded channel and sends them
//! in batches to `{queue.otlp_endpoint}/v1/traces`, as OTLP/HTTP's protobuf
//! (OpenTelemetry's own message definitions, opentelemetry-proto). A
//! delivery only ever tries to put a span into the channel: when it is full
//! (the collector slow or gone) the span is dropped, and counted with those
//! of batches the collector did not take in time (queue_metrics_status()).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, status, ResourceSpans, ScopeSpans, Status};
use prost::Message;

use crate::metrics::memory;

/// Spans waiting for the exporter, at most.
const CHANNEL: usize = 4096;
/// Spans in one request, at most.
const BATCH: usize = 512;
/// How long a span may wait for others to make a batch.
const LINGER: Duration = Duration::from_millis(500);
/// How long the collector may take to answer a batch.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One delivery attempt's span, as the exporter sends it.
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent_span_id: Option<[u8; 8]>,
    pub trace_state: String,
    pub queue: String,
    pub database: String,
    pub job: i64,
    pub attempt: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub outcome: &'static str,
    pub error: Option<String>,
}

struct Exporter {
    spans: SyncSender<Span>,
    /// Where the thread sends to: queue.otlp_endpoint as the worker last
    /// read it (a reload may change it).
    endpoint: Arc<Mutex<String>>,
}

static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();

/// Hands `spans` to the exporter (started on first use), for `endpoint`.
pub fn send(spans: Vec<Span>, endpoint: &str) {
    let Some(exporter) = EXPORTER.get_or_init(|| start(endpoint)) else {
        memory::count_spans(0, spans.len() as u64);
        return;
    };
    if let Ok(mut current) = exporter.endpoint.lock() {
        if *current != endpoint {
            *current = endpoint.to_string();
        }
    }
    let mut dropped = 0;
    for span in spans {
        match exporter.spans.try_send(span) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => dropped += 1,
        }
    }
    if dropped > 0 {
        memory::count_spans(0, dropped);
    }
}

fn start(endpoint: &str) -> Option<Exporter> {
    let (spans, received) = mpsc::sync_channel(CHANNEL);
    let endpoint = Arc::new(Mutex::new(endpoint.to_string()));
    let shared = endpoint.clone();
    crate::threads::spawn_without_signals("queue spans", move || run(received, shared))
        .ok()
        .map(|_| Exporter { spans, endpoint })
}

/// The thread: batches, sends, counts.
fn run(spans: Receiver<Span>, endpoint: Arc<Mutex<String>>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let Ok(client) = reqwest::Client::builder().timeout(TIMEOUT).build() else {
        return;
    };
    while let Ok(first) = spans.recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + LINGER;
        while batch.len() < BATCH {
            match spans.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(span) => batch.push(span),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let url = format!(
            "{}/v1/traces",
            endpoint
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default()
                .trim_end_matches('/')
        );
        let n = batch.len() as u64;
        let body = request(batch).encode_to_vec();
        let sent = runtime.block_on(async {
            client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        });
        if sent {
            memory::count_spans(n, 0);
        } else {
            memory::count_spans(0, n);
        }
    }
}

/// The OTLP request of a batch: one resource (the service "queue"), one
/// instrumentation scope, the spans.
fn request(batch: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![text("service.name", "queue")],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "queue".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: batch.into_iter().map(otlp_span).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// A span as OTLP has it: named and described by OpenTelemetry's semantic
/// conventions for messaging (a consumer processing a message), with the
/// attempt and its outcome.
fn otlp_span(span: Span) -> opentelemetry_proto::tonic::trace::v1::Span {
    let mut attributes = vec![
        text("messaging.system", "queue"),
        text("messaging.operation.type", "process"),
        text("messaging.destination.name", &span.queue),
        text("messaging.message.id", &span.job.to_string()),
        text("db.namespace", &span.database),
        number("queue.job.attempt", i64::from(span.attempt)),
        text("queue.job.outcome", span.outcome),
    ];
    if span.error.is_some() {
        attributes.push(text("error.type", "delivery_failed"));
    }
    opentelemetry_proto::tonic::trace::v1::Span {
        trace_id: span.trace_id.to_vec(),
        span_id: span.span_id.to_vec(),
        parent_span_id: span.parent_span_id.map(|p| p.to_vec()).unwrap_or_default(),
        trace_state: span.trace_state,
        name: format!("process {}", span.queue),
        kind: span::SpanKind::Consumer as i32,
        start_time_unix_nano: span.start_ns,
        end_time_unix_nano: span.end_ns,
        attributes,
        status: Some(match span.error {
            Some(message) => Status {
                message,
                code: status::StatusCode::Error as i32,
            },
            None => Status {
                message: String::new(),
                code: status::StatusCode::Ok as i32,
            },
        }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn number(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..Default::default()
    }
}
