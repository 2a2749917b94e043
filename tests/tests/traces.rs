//! Trace context through delivery, over real connections: a webhook sends
//! the job's trace on with a new span id for each attempt; a SQL sender
//! sees it in its job's headers; with `queue.otlp_endpoint` set, each
//! attempt's span reaches an OTLP receiver that decodes it with
//! OpenTelemetry's own protobuf definitions (tests/otlp/receiver.py), with
//! the ids the webhook sent; and a collector that never answers drops
//! spans, counted, while every job is delivered.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use queue_client_tests::receiver::{Receiver, Reply};
use queue_client_tests::{eventually, one, Client, Cluster};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The OTLP receiver, stopped when dropped.
struct Collector {
    child: Child,
    spans: PathBuf,
    port: u16,
}

impl Collector {
    fn start(dir: &std::path::Path) -> Collector {
        let port_file = dir.join("otlp.port");
        let spans = dir.join("spans.jsonl");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("otlp/receiver.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(&port_file)
            .arg(&spans)
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs the OTLP receiver (make setup installs opentelemetry-proto)");
        let mut collector = Collector {
            child,
            spans,
            port: 0,
        };
        eventually("the OTLP receiver listening", || {
            std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
                .map(|p| collector.port = p)
                .is_some()
        });
        collector
    }

    fn spans(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.spans.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn enqueue_traced(client: &mut Client, queue: &str) -> i64 {
    let mut tx = client.transaction().unwrap();
    tx.batch_execute(&format!(
        "SET LOCAL queue.traceparent = '00-{TRACE}-{PARENT}-01'; \
         SET LOCAL queue.tracestate = 'congo=t61rcWkgMzE'"
    ))
    .unwrap();
    let id: i64 = tx
        .query_one("SELECT queue_enqueue($1, '{}')", &[&queue])
        .unwrap()
        .get(0);
    tx.commit().unwrap();
    id
}

#[test]
fn a_traced_job_carries_its_trace_through_webhook_attempts_and_their_spans() {
    let receiver = Receiver::start();
    let dir = tempdir();
    let collector = Collector::start(&dir);
    let cluster = Cluster::start_with(&[
        &format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port),
        &format!(
            "queue.otlp_endpoint = 'http://127.0.0.1:{}'",
            collector.port
        ),
    ]);
    let mut admin = cluster.connect();
    receiver.answer(
        "/hook",
        vec![Reply::Status(503, vec![]), Reply::Status(200, vec![])],
    );
    admin
        .batch_execute(&format!(
            "SELECT queue_create('hooks', retry_delay => '0');
             SELECT queue_register_webhook('hooks', '{}');",
            receiver.url("/hook")
        ))
        .unwrap();
    let id = enqueue_traced(&mut admin, "hooks");
    eventually("two attempts and two spans", || {
        receiver.seen("/hook").len() == 2 && collector.spans().len() == 2
    });
    let sent: Vec<(String, String)> = receiver
        .seen("/hook")
        .iter()
        .map(|s| {
            (
                s.header("traceparent").unwrap_or_default().to_string(),
                s.header("tracestate").unwrap_or_default().to_string(),
            )
        })
        .collect();
    let mut span_ids = Vec::new();
    for (traceparent, tracestate) in &sent {
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!((parts[0], parts[1], parts[3]), ("00", TRACE, "01"));
        assert_ne!(parts[2], PARENT, "a span of its own");
        assert_eq!(tracestate, "congo=t61rcWkgMzE");
        span_ids.push(parts[2].to_string());
    }
    assert_ne!(span_ids[0], span_ids[1], "a new span id for each attempt");

    let spans = collector.spans();
    for (n, span) in spans.iter().enumerate() {
        assert_eq!(span["trace_id"], TRACE);
        assert_eq!(span["parent_span_id"], PARENT);
        assert_eq!(span["span_id"], span_ids[n], "the span the webhook sent");
        assert_eq!(span["trace_state"], "congo=t61rcWkgMzE");
        assert_eq!(span["service"], "queue");
        assert_eq!(span["name"], "process hooks");
        assert_eq!(span["kind"], 5, "a consumer's span");
        let attributes = &span["attributes"];
        assert_eq!(attributes["messaging.destination.name"], "hooks");
        assert_eq!(attributes["messaging.message.id"], id.to_string());
        assert_eq!(attributes["db.namespace"], queue_client_tests::DB);
        assert_eq!(attributes["queue.job.attempt"], n as i64 + 1);
        assert!(span["end"].as_u64() >= span["start"].as_u64());
    }
    assert_eq!(spans[0]["attributes"]["queue.job.outcome"], "failed");
    assert_eq!(spans[0]["status"], 2, "an error");
    assert!(spans[0]["message"].as_str().unwrap().contains("503"));
    assert_eq!(spans[1]["attributes"]["queue.job.outcome"], "succeeded");
    assert_eq!(spans[1]["status"], 1);
    let exported: i64 = one(
        &mut admin,
        "SELECT spans_exported FROM queue_metrics_status()",
        &[],
    );
    assert_eq!(exported, 2);
}

#[test]
fn a_sql_sender_sees_the_trace_and_its_attempt_is_a_span_of_it() {
    let dir = tempdir();
    let collector = Collector::start(&dir);
    let cluster = Cluster::start_with(&[&format!(
        "queue.otlp_endpoint = 'http://127.0.0.1:{}'",
        collector.port
    )]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE TABLE seen (traceparent text);
             CREATE FUNCTION deliver(job jsonb) RETURNS void LANGUAGE sql AS
                 $$ INSERT INTO seen VALUES (job->'headers'->>'traceparent') $$;
             SELECT queue_create('sent');
             SELECT queue_register_sender('sent', 'deliver(jsonb)');",
        )
        .unwrap();
    enqueue_traced(&mut admin, "sent");
    admin
        .batch_execute("SELECT queue_enqueue('sent', '{}')")
        .unwrap();
    eventually("both delivered, two spans", || {
        one::<i64>(&mut admin, "SELECT count(*) FROM seen", &[]) == 2
            && collector.spans().len() == 2
    });
    let seen: Vec<Option<String>> = admin
        .query(
            "SELECT traceparent FROM seen ORDER BY traceparent NULLS LAST",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, [Some(format!("00-{TRACE}-{PARENT}-01")), None]);
    let spans = collector.spans();
    let traced: Vec<&serde_json::Value> = spans.iter().filter(|s| s["trace_id"] == TRACE).collect();
    assert_eq!(traced.len(), 1, "{spans:?}");
    assert_eq!(traced[0]["parent_span_id"], PARENT);
    assert_eq!(traced[0]["attributes"]["queue.job.outcome"], "succeeded");
    // a job without a trace: its attempt is the root of a trace of its own
    let root: Vec<&serde_json::Value> = spans.iter().filter(|s| s["trace_id"] != TRACE).collect();
    assert_eq!(root.len(), 1);
    assert_eq!(root[0]["parent_span_id"], "");
}

#[test]
fn a_collector_that_never_answers_drops_spans_and_delivery_goes_on() {
    // a listener that takes connections and never answers
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().take(50) {
            open.push(stream);
        }
        std::thread::sleep(Duration::from_secs(120));
    });
    let cluster =
        Cluster::start_with(&[&format!("queue.otlp_endpoint = 'http://127.0.0.1:{port}'")]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE FUNCTION deliver(job jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
             SELECT queue_create('sent', retention => '0');
             SELECT queue_register_sender('sent', 'deliver(jsonb)');
             SELECT count(*) FROM queue_enqueue_batch('sent', array_fill('{}'::jsonb, ARRAY[3000]));",
        )
        .unwrap();
    eventually("every job delivered", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'sent'",
            &[],
        ) == 0
    });
    eventually("spans dropped and counted", || {
        one::<i64>(
            &mut admin,
            "SELECT spans_dropped FROM queue_metrics_status()",
            &[],
        ) > 0
    });
    let exported: i64 = one(
        &mut admin,
        "SELECT spans_exported FROM queue_metrics_status()",
        &[],
    );
    assert_eq!(exported, 0);
    drop(held);
}

/// A directory of the test's own, that the server may read.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "queue-traces-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
