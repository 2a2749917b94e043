//! GET /metrics against a real cluster: its text read by the Prometheus
//! project's own Python parser (prometheus_client, installed by make setup)
//! with the counts, counters, histograms and workers the cluster holds;
//! `promtool check metrics` finding nothing to say; a real Prometheus
//! server scraping it with the token and answering a query of a scraped
//! series; the token refused as the pages refuse it; the Grafana dashboard
//! (web/grafana/queue.json) and the alert rules of docs/operations.md
//! naming only metrics that /metrics serves, in expressions promtool parses.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{cluster, url, Cluster, Web, DB};
use queue_client_tests::{claim, complete_all, eventually, one};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A cluster with something in every metric: in DB, queue `emails` with 3
/// jobs due, queue `done` whose 4 jobs were claimed, 3 completed and 1
/// failed for good, and queue `slow` whose sender holds the only worker
/// slot (queue.max_workers = 1) for a minute; in `tenant2`, a `slow` job
/// too, so that tenant2 waits for a slot.
fn busy_cluster() -> Cluster {
    let cluster = cluster(&["queue.max_workers = 1"]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT queue_create('emails');
         SELECT count(*) FROM queue_enqueue_batch('emails', array_fill('{}'::jsonb, ARRAY[3]));
         SELECT queue_create('done', max_attempts => 1);
         SELECT count(*) FROM queue_enqueue_batch('done', array_fill('{}'::jsonb, ARRAY[4]));",
    )
    .unwrap();
    let jobs = claim(&mut db, "done", 4);
    assert_eq!(jobs.len(), 4);
    assert_eq!(complete_all(&mut db, &jobs[..3]).len(), 3);
    db.execute(
        "SELECT queue_fail($1, $2::text::uuid, 'refused')",
        &[&jobs[3].0, &jobs[3].1],
    )
    .unwrap();
    let slow =
        "CREATE FUNCTION slow(job jsonb) RETURNS void LANGUAGE sql AS $$ SELECT pg_sleep(60) $$;
                SELECT queue_create('slow');
                SELECT queue_register_sender('slow', 'slow(jsonb)');
                SELECT queue_enqueue('slow', '{}');";
    db.batch_execute(slow).unwrap();
    eventually("queue_test's worker delivering", || {
        one::<i64>(
            &mut db,
            "SELECT count(*) FROM queue_workers WHERE database = 'queue_test' AND state = 'delivering'",
            &[],
        ) == 1
    });
    cluster.connect_to("tenant2").batch_execute(slow).unwrap();
    eventually("tenant2 waiting for a slot", || {
        one::<i64>(
            &mut db,
            "SELECT count(*) FROM queue_workers WHERE database = 'tenant2' AND pid IS NULL",
            &[],
        ) == 1
    });
    cluster
}

/// GET /metrics with `token` as a bearer token: its status and body.
fn scrape(web: &Web, token: Option<&str>) -> (u16, String) {
    let mut s = web.session();
    s.bearer = token.map(str::to_string);
    let page = s.get("/metrics");
    (page.status, page.html)
}

/// One sample as prometheus_client's parser gives it.
#[derive(Debug)]
struct Sample {
    family: String,
    kind: String,
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The text read by prometheus_client.parser.text_string_to_metric_families.
fn parse(text: &str) -> Vec<Sample> {
    let program = "import json, sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        print(json.dumps([family.name, family.type, s.name, s.labels, s.value]))";
    let output = run_with_input(
        Command::new("python3").args(["-c", program]),
        text,
        "python3 with prometheus_client (make setup installs it)",
    );
    assert!(
        output.status.success(),
        "the parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (family, kind, name, labels, value): (
                String,
                String,
                String,
                BTreeMap<String, String>,
                f64,
            ) = serde_json::from_str(line).unwrap();
            Sample {
                family,
                kind,
                name,
                labels,
                value,
            }
        })
        .collect()
}

fn run_with_input(command: &mut Command, input: &str, what: &str) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} runs: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The value of the one sample `name` with exactly `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && s.labels == wanted)
        .collect();
    assert_eq!(found.len(), 1, "one {name}{labels:?} in {samples:#?}");
    found[0].value
}

fn kind_of<'s>(samples: &'s [Sample], family: &str) -> &'s str {
    &samples
        .iter()
        .find(|s| s.family == family)
        .unwrap_or_else(|| panic!("no family {family}"))
        .kind
}

#[test]
fn the_parser_reads_every_databases_counts_histograms_and_workers() {
    let cluster = busy_cluster();
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let (status, text) = scrape(&web, None);
    assert_eq!(status, 200, "{text}");
    let samples = parse(&text);

    // jobs by status, per database and queue; not the database without the extension
    let emails = [("database", "queue_test"), ("queue", "emails")];
    let jobs = |db: &str, queue: &str, status: &str| {
        value(
            &samples,
            "queue_jobs",
            &[("database", db), ("queue", queue), ("status", status)],
        )
    };
    assert_eq!(jobs("queue_test", "emails", "pending"), 3.0);
    assert_eq!(jobs("queue_test", "emails", "processing"), 0.0);
    assert_eq!(jobs("queue_test", "done", "succeeded"), 3.0);
    assert_eq!(jobs("queue_test", "done", "failed"), 1.0);
    // (a SQL sender's claim is not committed while it runs: pending or
    // processing, as the reader's snapshot sees it)
    assert_eq!(
        jobs("queue_test", "slow", "pending") + jobs("queue_test", "slow", "processing"),
        1.0
    );
    assert_eq!(jobs("tenant2", "slow", "pending"), 1.0);
    assert_eq!(kind_of(&samples, "queue_jobs"), "gauge");
    assert!(!samples
        .iter()
        .any(|s| s.labels.get("database").map(String::as_str) == Some("plain")));
    assert!(value(&samples, "queue_oldest_due_age_seconds", &emails) >= 0.0);
    assert_eq!(
        value(
            &samples,
            "queue_oldest_due_age_seconds",
            &[("database", "queue_test"), ("queue", "done")]
        ),
        0.0,
        "nothing due"
    );

    // the counters
    assert_eq!(kind_of(&samples, "queue_jobs_enqueued"), "counter");
    assert_eq!(value(&samples, "queue_jobs_enqueued_total", &emails), 3.0);
    let ended = |outcome: &str| {
        value(
            &samples,
            "queue_jobs_ended_total",
            &[
                ("database", "queue_test"),
                ("queue", "done"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!((ended("succeeded"), ended("failed")), (3.0, 1.0));

    // the histograms: 4 waits of `done`, 3 runs that succeeded, 1 that failed
    assert_eq!(kind_of(&samples, "queue_job_wait_seconds"), "histogram");
    let done = [("database", "queue_test"), ("queue", "done")];
    assert_eq!(value(&samples, "queue_job_wait_seconds_count", &done), 4.0);
    let inf = [
        ("database", "queue_test"),
        ("queue", "done"),
        ("le", "+Inf"),
    ];
    assert_eq!(value(&samples, "queue_job_wait_seconds_bucket", &inf), 4.0);
    let run = |outcome: &str| {
        value(
            &samples,
            "queue_job_run_seconds_count",
            &[
                ("database", "queue_test"),
                ("queue", "done"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(
        (run("succeeded"), run("failed"), run("cancelled")),
        (3.0, 1.0, 0.0)
    );
    // cumulative buckets, up to +Inf
    let buckets: Vec<f64> = samples
        .iter()
        .filter(|s| {
            s.name == "queue_job_run_seconds_bucket"
                && s.labels.get("queue").map(String::as_str) == Some("done")
                && s.labels.get("outcome").map(String::as_str) == Some("succeeded")
        })
        .map(|s| s.value)
        .collect();
    assert!(buckets.len() > 10, "{buckets:?}");
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert_eq!(buckets.last(), Some(&3.0));
    // a queue with nothing claimed has no histogram
    assert!(!samples.iter().any(|s| s.family == "queue_job_wait_seconds"
        && s.labels.get("queue").map(String::as_str) == Some("emails")));

    // the workers, and the database waiting for a slot
    assert_eq!(
        value(
            &samples,
            "queue_workers",
            &[("database", "queue_test"), ("state", "delivering")]
        ),
        1.0
    );
    let waiting = |db: &str| {
        value(
            &samples,
            "queue_database_waiting_for_worker",
            &[("database", db)],
        )
    };
    assert_eq!((waiting("tenant2"), waiting("queue_test")), (1.0, 0.0));

    // the cluster's metrics status, and every database read
    assert_eq!(value(&samples, "queue_metrics_queue_slots", &[]), 1024.0);
    // (`done`: the slow job's claim has not committed)
    assert!(value(&samples, "queue_metrics_queue_slots_used", &[]) >= 1.0);
    assert_eq!(
        value(&samples, "queue_metrics_observations_dropped_total", &[]),
        0.0
    );
    assert_eq!(value(&samples, "queue_spans_dropped_total", &[]), 0.0);
    assert_eq!(value(&samples, "queue_spans_exported_total", &[]), 0.0);
    for db in ["queue_test", "tenant2"] {
        assert_eq!(
            value(&samples, "queue_database_up", &[("database", db)]),
            1.0
        );
    }
}

#[test]
fn a_database_that_refuses_is_down_and_the_others_are_shown() {
    let cluster = cluster(&[]);
    cluster
        .connect_to("tenant2")
        .batch_execute(
            "SELECT queue_create('t2'); SELECT queue_enqueue('t2', '{}');
             CREATE ROLE watcher LOGIN IN ROLE pg_monitor;",
        )
        .unwrap();
    let web = Web::start(&url(&cluster, "watcher", DB), &[]);
    assert_eq!(scrape(&web, None).0, 200);
    // tenant2 now refuses the role
    cluster
        .connect_to("tenant2")
        .batch_execute("REVOKE ALL ON queue_stats FROM pg_monitor")
        .unwrap();
    let (status, text) = scrape(&web, None);
    assert_eq!(status, 200, "{text}");
    let samples = parse(&text);
    let up = |db: &str| value(&samples, "queue_database_up", &[("database", db)]);
    assert_eq!((up("queue_test"), up("tenant2")), (1.0, 0.0));
    assert!(!samples.iter().any(|s| s.family == "queue_jobs"
        && s.labels.get("database").map(String::as_str) == Some("tenant2")));
}

/// Every `queue_…` metric name in a PromQL expression (quoted label values
/// left out).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut unquoted = String::new();
    let mut quoted = false;
    for c in expr.chars() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted {
            unquoted.push(c);
        }
    }
    unquoted
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| word.starts_with("queue_"))
        .map(str::to_string)
        .collect()
}

/// The names of the series in a text of the exposition format.
fn served_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| line[..line.find(['{', ' ']).unwrap()].to_string())
        .collect()
}

/// Every PromQL expression of the Grafana dashboard: its panels' targets
/// and its variables' queries.
fn dashboard_expressions() -> Vec<(String, String)> {
    let path = root().join("web/grafana/queue.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .expect("the dashboard is JSON");
    let mut found = Vec::new();
    let mut panels: Vec<&serde_json::Value> =
        dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        if let Some(inner) = panel["panels"].as_array() {
            panels.extend(inner);
        }
        let title = panel["title"].as_str().unwrap_or("?");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target has an expr");
            found.push((title.to_string(), expr.to_string()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            let query = variable["query"]["query"].as_str().unwrap();
            // label_values(<series selector>, label)
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map(|(selector, _)| selector)
                .expect("a label_values() query");
            found.push((format!("variable {}", variable["name"]), inner.to_string()));
        }
    }
    found
}

/// The alert rules of docs/operations.md: the YAML block marked
/// `<!-- tested: metrics-alerts -->`.
fn alert_rules() -> String {
    let text = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let at = text
        .find("<!-- tested: metrics-alerts -->")
        .expect("docs/operations.md has the alert rules");
    let block = &text[at..];
    let start = block.find("```yaml\n").unwrap() + 8;
    let end = block[start..].find("```").unwrap();
    block[start..start + end].to_string()
}

/// `promtool check rules` on `rules`, in a file of its own.
fn check_rules(rules: &str, dir: &Path, name: &str) {
    let path = dir.join(name);
    std::fs::write(&path, rules).unwrap();
    let output = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("promtool runs (Debian's prometheus package, make setup)");
    assert!(
        output.status.success(),
        "promtool check rules {name}: {}{}\n{rules}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn promtool_finds_nothing_and_the_dashboard_and_alerts_name_served_metrics() {
    let cluster = busy_cluster();
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let (status, text) = scrape(&web, None);
    assert_eq!(status, 200);

    // promtool check metrics: parsed, and no lint problem
    let output = run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        &text,
        "promtool (Debian's prometheus package, make setup)",
    );
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let served = served_names(&text);
    let dir = TempDir::new("rules");

    // the dashboard: every expression names served metrics only, and parses
    // (as a recording rule, Grafana's variables given values)
    let expressions = dashboard_expressions();
    assert!(expressions.len() >= 15, "{expressions:?}");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (panel, expr)) in expressions.iter().enumerate() {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{panel}: {expr} names no metric");
        for name in &names {
            assert!(
                served.contains(name),
                "{panel}: {name} is not served by /metrics: {served:?}"
            );
        }
        let concrete = expr
            .replace("$__rate_interval", "1m")
            .replace("$database", ".*")
            .replace("$queue", ".*");
        assert!(!concrete.contains('$'), "{panel}: {expr}");
        rules.push_str(&format!(
            "      - record: dashboard:expr_{i}\n        expr: {}\n",
            serde_json::to_string(&concrete).unwrap()
        ));
    }
    check_rules(&rules, &dir.0, "dashboard.yml");
    let panels: Vec<&String> = expressions.iter().map(|(panel, _)| panel).collect();
    for wanted in ["Backlog by queue", "Throughput", "Background workers"] {
        assert!(panels.iter().any(|p| *p == wanted), "{wanted}: {panels:?}");
    }
    for needed in [
        "queue_oldest_due_age_seconds",
        "queue_jobs_ended_total",
        "queue_job_wait_seconds_bucket",
        "queue_job_run_seconds_bucket",
        "queue_workers",
        "queue_spans_dropped_total",
    ] {
        assert!(
            expressions
                .iter()
                .any(|(_, e)| metric_names(e).contains(needed)),
            "the dashboard shows {needed}"
        );
    }

    // the documented alerts: valid rules, of served metrics
    let alerts = alert_rules();
    check_rules(&alerts, &dir.0, "alerts.yml");
    let named = metric_names(&alerts);
    assert!(
        named.contains("queue_oldest_due_age_seconds") && named.contains("queue_jobs_ended_total")
    );
    for name in named {
        assert!(served.contains(&name), "the alerts' {name} is not served");
    }
}

/// A directory of its own under the system's temporary one, removed when
/// dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "queue-web-{what}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Prometheus server of its own, stopped (by its PID) when dropped, also
/// when a test fails.
struct Prometheus {
    child: Child,
    base: String,
    dir: TempDir,
}

impl Prometheus {
    /// Scrapes `target` (host:port) every second with `token` as a bearer token.
    fn start(target: &str, token: &str) -> Prometheus {
        let dir = TempDir::new("prometheus");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: queue\n    metrics_path: /metrics\n\
             \x20   authorization:\n      credentials: {token}\n\
             \x20   static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.0.join("prometheus.yml"), config).unwrap();
        // a free port: bound, read and let go (Prometheus binds it next)
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.0.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.0.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus runs (Debian's prometheus package, make setup)");
        Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// The instant query's result (the API's `data.result`), or None while
    /// the server does not answer.
    fn query(&self, query: &str) -> Option<Vec<serde_json::Value>> {
        let url = url::Url::parse_with_params(
            &format!("{}/api/v1/query", self.base),
            &[("query", query)],
        )
        .unwrap();
        let response = reqwest::blocking::get(url).ok()?;
        let body: serde_json::Value = serde_json::from_str(&response.text().ok()?).ok()?;
        assert_eq!(body["status"], "success", "{query}: {body}");
        Some(body["data"]["result"].as_array()?.clone())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // (the Child's own PID: nothing else is signalled)
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_it_with_the_token_and_the_token_is_required() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT queue_create('emails');
         SELECT count(*) FROM queue_enqueue_batch('emails', array_fill('{}'::jsonb, ARRAY[5]));",
    )
    .unwrap();
    let token = "m3trics-t0ken";
    let web = Web::start(&url(&cluster, "postgres", DB), &["--token", token]);

    // refused as the pages are: no token, a wrong one
    for refused in [None, Some("wrong")] {
        let (status, text) = scrape(&web, refused);
        assert_eq!(status, 401, "{refused:?}");
        assert!(!text.contains("queue_jobs"));
    }
    let mut s = web.session();
    assert_eq!(s.get("/").status, 401);
    // `?token=` once, then the cookie, as for a page
    let page = s.get(&format!("/metrics?token={token}"));
    assert_eq!(
        (page.status, page.location.as_deref()),
        (303, Some("/metrics"))
    );
    assert!(s.get("/metrics").html.contains("queue_jobs{"));

    let prometheus = Prometheus::start(&format!("127.0.0.1:{}", web.port()), token);
    let pending =
        r#"queue_jobs{database="queue_test",queue="emails",status="pending",job="queue"}"#;
    let mut result = Vec::new();
    eventually("Prometheus has scraped queue-web", || {
        result = prometheus.query(pending).unwrap_or_default();
        !result.is_empty()
    });
    assert_eq!(result.len(), 1, "{result:?}");
    assert_eq!(result[0]["value"][1], "5", "{result:?}");
    let up = prometheus
        .query(r#"up{job="queue"}"#)
        .expect("Prometheus answers");
    assert_eq!(up[0]["value"][1], "1", "{up:?}\n{}", prometheus.log());
    let enqueued = prometheus
        .query(r#"queue_jobs_enqueued_total{database="queue_test",queue="emails"}"#)
        .unwrap();
    assert_eq!(enqueued[0]["value"][1], "5", "{enqueued:?}");
}
