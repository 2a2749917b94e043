//! The manual's snippets, run as a new user pastes them, so that they stay
//! true. Each snippet that runs is marked, in README.md or a page of docs/,
//! by an HTML comment right before its fenced block (`<!-- tested: NAME -->`,
//! invisible when rendered); the blocks are read from those pages when the
//! test runs (all the blocks of one name from one page, in their order),
//! written to files and run against a cluster of their own with real
//! clients: psql (`-v ON_ERROR_STOP=1`), python3 with psycopg 3, node with
//! `pg` (tests/readme/node_modules), and cargo for the Rust loops. Each test
//! checks what the snippet did to the jobs, and that a loop ends by itself.
//!
//! psycopg and `pg` come from `scripts/setup.sh` (`make setup`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use queue_client_tests::receiver::Receiver;
use queue_client_tests::{all_rows, column, eventually, one, one_row, Client, Cluster, NoTls, DB};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// tests/readme/node_modules, where the Node snippets find their packages;
/// the test fails at once, saying how to install them, without `package`.
fn node_modules(package: &str) -> PathBuf {
    let modules = root().join("tests/readme/node_modules");
    assert!(
        modules.join(package).exists(),
        "{} has no {package}: run scripts/setup.sh (npm ci --prefix tests/readme)",
        modules.display()
    );
    modules
}

/// The environment of a Node snippet that needs `pg`.
fn node_path() -> [(&'static str, PathBuf); 1] {
    [("NODE_PATH", node_modules("pg"))]
}

/// The manual's pages: README.md, then every docs/*.md in name order.
fn pages() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut pages = vec![root().join("README.md")];
    pages.extend(docs);
    pages
}

/// The page that marks NAME (its path from the repository's root), and the
/// code of every fenced block marked `<!-- tested: NAME ... -->` there, in
/// the order they appear; at least one, all on one page.
fn marked(name: &str) -> (String, Vec<String>) {
    let marker = format!("<!-- tested: {name}");
    let mut found: Vec<(String, String)> = Vec::new();
    for page in pages() {
        let shown = page.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.strip_prefix(&marker) else {
                continue;
            };
            if !(rest.starts_with(' ') || rest.starts_with("-->")) {
                continue; // another name that starts with this one
            }
            let fence = lines.next().unwrap_or_default();
            assert!(
                fence.starts_with("```"),
                "{shown}: `{line}` is not followed by a fenced block"
            );
            let mut code = String::new();
            for line in lines.by_ref() {
                if line == "```" {
                    break;
                }
                code.push_str(line);
                code.push('\n');
            }
            found.push((shown.clone(), code));
        }
    }
    assert!(
        !found.is_empty(),
        "neither README.md nor docs/*.md has a block marked `{marker}`"
    );
    let page = found[0].0.clone();
    let elsewhere: Vec<&str> = found
        .iter()
        .map(|(p, _)| p.as_str())
        .filter(|p| *p != page)
        .collect();
    assert!(
        elsewhere.is_empty(),
        "{page} marks {name}, and so do {elsewhere:?}: blocks of one name run in order, \
         so they belong on one page"
    );
    (page, found.into_iter().map(|(_, code)| code).collect())
}

/// The code of every block marked NAME, in order.
fn snippets(name: &str) -> Vec<String> {
    marked(name).1
}

/// The one block marked NAME.
fn snippet(name: &str) -> String {
    let (page, mut all) = marked(name);
    assert_eq!(all.len(), 1, "{page} marks {name} more than once");
    all.remove(0)
}

/// Writes `text` to `name` in a directory of the cluster's (removed with it).
fn write(cluster: &Cluster, name: &str, text: &str) -> PathBuf {
    let path = cluster.socket_dir().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// libpq's environment for a client of the test database, as `user`.
fn libpq_env(command: &mut Command, cluster: &Cluster, user: &str) {
    command
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.config(DB).get_ports()[0].to_string())
        .env("PGUSER", user)
        .env("PGDATABASE", DB)
        .env_remove("PGPASSWORD")
        .env_remove("PGSERVICE");
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs an SQL snippet with psql as `user`, stopping at the first error.
fn psql(cluster: &Cluster, user: &str, sql: &str) -> Output {
    psql_in(cluster, user, DB, sql)
}

/// `psql` in `database`.
fn psql_in(cluster: &Cluster, user: &str, database: &str, sql: &str) -> Output {
    let file = write(cluster, "snippet.sql", sql);
    let mut command = Command::new(cluster.bin("psql"));
    command
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(file);
    libpq_env(&mut command, cluster, user);
    command.env("PGDATABASE", database);
    command.output().expect("psql runs")
}

/// `psql`, which must succeed; its output.
fn psql_ok(cluster: &Cluster, user: &str, sql: &str) -> String {
    let out = psql(cluster, user, sql);
    assert!(
        out.status.success(),
        "psql as {user}:\n{sql}\n{}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Starts `command` with its output going to files of the cluster's.
fn spawn(cluster: &Cluster, mut command: Command, name: &str) -> (Child, [PathBuf; 2]) {
    let out = cluster.socket_dir().join(format!("{name}.out"));
    let err = cluster.socket_dir().join(format!("{name}.err"));
    let child = command
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{name} does not start ({command:?}): {e}"));
    (child, [out, err])
}

/// Waits for a started program to end by itself, within `limit`; kills it
/// and fails the test otherwise.
fn finish(mut child: Child, files: [PathBuf; 2], limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "did not end by itself within {limit:?}:\n{}",
                std::fs::read_to_string(&files[1]).unwrap_or_default()
            );
        }
        sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: std::fs::read(&files[0]).unwrap(),
        stderr: std::fs::read(&files[1]).unwrap(),
    }
}

/// (payload, status, attempts, last_error) of every job of `queue`, by id.
fn jobs(admin: &mut Client, queue: &str) -> Vec<(String, String, i32, Option<String>)> {
    all_rows(
        admin,
        "SELECT payload::text, status, attempts, last_error FROM queue_jobs
          WHERE queue = $1 ORDER BY id",
        &[&queue],
    )
}

fn job(
    payload: &str,
    status: &str,
    attempts: i32,
    error: Option<&str>,
) -> (String, String, i32, Option<String>) {
    (
        payload.to_string(),
        status.to_string(),
        attempts,
        error.map(str::to_string),
    )
}

fn create_role(admin: &mut Client, role: &str) {
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .unwrap();
}

/// `create_role`, and the role may create functions and tables in public
/// (a sender's author).
fn create_role_with_schema(admin: &mut Client, role: &str) {
    create_role(admin, role);
    admin
        .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {role}"))
        .unwrap();
}

/// What the consumer loops get: the queue 'emails', retried at once and at
/// most twice, with a job for each outcome of the loops' `send_email`.
const LOOP_QUEUE: &str = "SELECT queue_create('emails', max_attempts => 2, retry_delay => '0');";
const LOOP_BATCH: &str = r#"
    SELECT queue_enqueue_batch('emails', ARRAY[
        '{"to": "ada@example.com"}', '{"to": "nobody"}',
        '{"to": "bob@example.com", "fail": "SMTP timeout"}', '{"to": "cy@example.com"}']::jsonb[]);
"#;

/// How the loops' jobs end: done, a dead letter at once, retried and then
/// failed with no attempt left, done.
fn loop_outcome() -> Vec<(String, String, i32, Option<String>)> {
    vec![
        job(r#"{"to": "ada@example.com"}"#, "succeeded", 1, None),
        job(
            r#"{"to": "nobody"}"#,
            "failed",
            1,
            Some("no such mailbox: 'nobody'"),
        ),
        job(
            r#"{"to": "bob@example.com", "fail": "SMTP timeout"}"#,
            "failed",
            2,
            Some("SMTP timeout"),
        ),
        job(r#"{"to": "cy@example.com"}"#, "succeeded", 1, None),
    ]
}

/// The limit for a loop to end by itself: it ends 5 s after its last job.
const LOOP_LIMIT: Duration = Duration::from_secs(60);

/// A Python or Node loop: fails when the queue is missing (a non-zero exit,
/// not a hang), works through every kind of job and ends by itself, and
/// ends at once on SIGTERM.
fn check_loop(name: &str, program: &str, file: &str, env: &[(&str, PathBuf)]) {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "worker");
    let path = write(&cluster, file, &snippet(name));
    let command = || {
        let mut c = Command::new(program);
        c.arg(&path);
        libpq_env(&mut c, &cluster, "worker");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    };

    // no queue 'emails' yet: the claim's error ends the loop, non-zero
    let (child, files) = spawn(&cluster, command(), name);
    let out = finish(child, files, LOOP_LIMIT);
    assert!(
        !out.status.success(),
        "{name} without its queue:\n{}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("emails"),
        "{name} without its queue says why:\n{}",
        text(&out)
    );

    // the loop waits in queue_wait, and the jobs' commit wakes it
    admin.batch_execute(LOOP_QUEUE).unwrap();
    let (child, files) = spawn(&cluster, command(), name);
    eventually(&format!("{name} waiting in queue_wait"), || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity
              WHERE usename = 'worker' AND query LIKE 'CALL queue_wait%'
                AND wait_event_type = 'Extension'",
            &[],
        ) == 1
    });
    admin.batch_execute(LOOP_BATCH).unwrap();
    let out = finish(child, files, LOOP_LIMIT);
    assert!(out.status.success(), "{name}:\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for to in ["ada@example.com", "cy@example.com"] {
        assert_eq!(
            stdout.matches(&format!("sent to {to}\n")).count(),
            1,
            "{name} sent to {to} once:\n{}",
            text(&out)
        );
    }
    assert_eq!(jobs(&mut admin, "emails"), loop_outcome(), "{name}");
    assert_eq!(
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'worker'",
            &[]
        ),
        0,
        "{name} closed its connection"
    );

    // SIGTERM while it waits for jobs: it ends within a second or so, before
    // its idle exit could (5 s after it connected)
    let (child, files) = spawn(&cluster, command(), name);
    eventually(&format!("{name} to connect"), || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'worker'",
            &[],
        ) > 0
    });
    let asked = Instant::now();
    queue_client_tests::run({
        let mut c = Command::new("kill");
        c.args(["-TERM", &child.id().to_string()]);
        c
    });
    let out = finish(child, files, LOOP_LIMIT);
    assert!(out.status.success(), "{name} on SIGTERM:\n{}", text(&out));
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "{name} took {:?} to end on SIGTERM",
        asked.elapsed()
    );
}

#[test]
fn quick_start_ends_one_job_each_way_as_any_role() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "newcomer");
    let out = psql_ok(&cluster, "newcomer", &snippet("quick-start"));
    assert_eq!(
        jobs(&mut admin, "emails"),
        vec![
            job(r#"{"to": "ada@example.com"}"#, "succeeded", 1, None),
            job(
                r#"{"to": "bob@example.com"}"#,
                "pending",
                1,
                Some("SMTP timeout")
            ),
            job(r#"{"to": "nobody"}"#, "failed", 1, Some("no such mailbox")),
        ]
    );
    // the last query shows the three outcomes
    for status in ["succeeded", "pending", "failed"] {
        assert!(
            out.contains(status),
            "the quick start shows {status}:\n{out}"
        );
    }
}

#[test]
fn python_loop_works_through_its_jobs_and_stops() {
    check_loop("python-loop", "python3", "consumer.py", &[]);
}

#[test]
fn node_loop_works_through_its_jobs_and_stops() {
    check_loop("node-loop", "node", "consumer.js", &node_path());
}

/// The example's command line, then a crate of one's own as the manual
/// writes it (Cargo.toml and src/main.rs), built beside a "clone" of this
/// repository (a symbolic link) and run.
#[test]
fn rust_loops_work_through_their_jobs_and_stop() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "worker");
    let dsn = format!(
        "host={} port={} user=worker dbname={DB}",
        cluster.socket_dir().display(),
        cluster.config(DB).get_ports()[0]
    );
    let cargo = PathBuf::from(env!("CARGO"));
    let path = format!(
        "{}:{}",
        cargo.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // a build may wait for another one's lock: a generous limit
    let build_limit = Duration::from_secs(1200);

    // the example: prints and completes each job, retries "fail"; --drain
    admin.batch_execute(LOOP_QUEUE).unwrap();
    admin.batch_execute(LOOP_BATCH).unwrap();
    let mut command = Command::new("bash");
    command
        .args(["-c", &snippet("rust-example")])
        .current_dir(root())
        .env("DATABASE_URL", &dsn)
        .env("PATH", &path);
    let (child, files) = spawn(&cluster, command, "rust-example");
    let out = finish(child, files, build_limit);
    assert!(out.status.success(), "the example:\n{}", text(&out));
    let mut want = loop_outcome();
    want[1] = job(r#"{"to": "nobody"}"#, "succeeded", 1, None);
    assert_eq!(jobs(&mut admin, "emails"), want);

    // a crate of one's own
    admin.batch_execute("SELECT queue_purge('emails')").unwrap();
    admin.batch_execute(LOOP_QUEUE).unwrap();
    admin.batch_execute(LOOP_BATCH).unwrap();
    let dir = cluster.socket_dir().join("rust");
    std::fs::create_dir_all(dir.join("mailer/src")).unwrap();
    std::os::unix::fs::symlink(root(), dir.join("queue")).unwrap();
    std::fs::write(dir.join("mailer/Cargo.toml"), snippet("rust-toml")).unwrap();
    std::fs::write(dir.join("mailer/src/main.rs"), snippet("rust-loop")).unwrap();
    // the workspace's versions, so that nothing needs fetching
    std::fs::copy(root().join("Cargo.lock"), dir.join("mailer/Cargo.lock")).unwrap();
    let mut command = Command::new(&cargo);
    command
        .args(["run", "--offline", "--quiet"])
        .current_dir(dir.join("mailer"))
        .env("CARGO_TARGET_DIR", root().join("target/readme-mailer"))
        .env("DATABASE_URL", &dsn);
    let (child, files) = spawn(&cluster, command, "rust-loop");
    let out = finish(child, files, build_limit);
    assert!(out.status.success(), "the Rust loop:\n{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sent to ada@example.com"),
        "{}",
        text(&out)
    );
    assert_eq!(jobs(&mut admin, "emails"), loop_outcome());
    assert_eq!(
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'worker'",
            &[]
        ),
        0,
        "the Rust loop closed its connection"
    );
}

/// Every example of the Functions section, in order, in one psql session
/// as the extension owner.
#[test]
fn function_examples_run_in_order() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    psql_ok(&cluster, "postgres", &snippets("functions").join("\n"));
    let emails = jobs(&mut admin, "emails");
    let status = |payload: &str| -> Vec<(String, i32, Option<String>)> {
        emails
            .iter()
            .filter(|j| j.0 == payload)
            .map(|j| (j.1.clone(), j.2, j.3.clone()))
            .collect()
    };
    let claimed = vec![("processing".to_string(), 1, None)];
    assert_eq!(status(r#"{"to": "bob@example.com"}"#), claimed);
    assert_eq!(
        status(r#"{"receipt": 42}"#),
        claimed,
        "one job per dedup key"
    );
    assert_eq!(status(r#"{"n": 1}"#), claimed);
    assert_eq!(status(r#"{"n": 2}"#), claimed);
    assert_eq!(
        status(r#"{"digest": true}"#),
        vec![("pending".to_string(), 0, None)]
    );
    let done = vec![("succeeded".to_string(), 1, None)];
    assert_eq!(status(r#"{"to": "carol@example.com"}"#), done);
    assert_eq!(status(r#"{"n": 3}"#), done);
    assert_eq!(status(r#"{"n": 4}"#), done);
    assert_eq!(
        status(r#"{"to": "dan@example.com"}"#),
        vec![("pending".to_string(), 1, Some("SMTP timeout".to_string()))]
    );
    assert_eq!(
        status(r#"{"to": "eve@example.com"}"#),
        vec![("pending".to_string(), 1, Some("rate limited".to_string()))]
    );
    assert_eq!(
        status(r#"{"to": "nobody"}"#),
        vec![("failed".to_string(), 1, Some("no such mailbox".to_string()))]
    );
    assert_eq!(
        status(r#"{"to": "fay@example.com"}"#),
        vec![("cancelled".to_string(), 1, None)]
    );
    assert_eq!(
        status(r#"{"report": "weekdays"}"#),
        vec![("pending".to_string(), 0, None)],
        "the schedule run by hand"
    );
    assert_eq!(emails.len(), 13, "{emails:?}");
    // the digest is due in an hour
    assert!(one::<bool>(
        &mut admin,
        "SELECT run_at BETWEEN now() + interval '50 minutes' AND now() + interval '1 hour'
           FROM queue_jobs WHERE payload = '{\"digest\": true}'",
        &[]
    ));
    // webhooks altered, paused and resumed; scratch dropped
    assert_eq!(
        admin
            .query("SELECT queue, paused FROM queue_stats ORDER BY queue", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect::<Vec<(String, bool)>>(),
        vec![
            ("emails".into(), false),
            ("replies".into(), false),
            ("webhooks".into(), false)
        ]
    );
}

/// The grants: only `app` may enqueue, `app_admin` reads two views.
#[test]
fn privilege_example_narrows_enqueue_to_its_role() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    psql_ok(&cluster, "postgres", &snippet("privileges"));
    create_role(&mut admin, "other");
    admin
        .batch_execute("SELECT queue_create('emails')")
        .unwrap();
    let connect = |user: &str| {
        cluster
            .config(DB)
            .user(user)
            .connect(NoTls)
            .unwrap_or_else(|e| panic!("{user} connects: {e}"))
    };
    let enqueue = |client: &mut Client| {
        (
            client
                .query("SELECT queue_enqueue('emails', '{}')", &[])
                .map(|_| ())
                .map_err(|e| e.code().cloned()),
            client
                .query(
                    "SELECT queue_enqueue_batch('emails', ARRAY['{}']::jsonb[])",
                    &[],
                )
                .map(|_| ())
                .map_err(|e| e.code().cloned()),
        )
    };
    let denied = Err(Some(postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    assert_eq!(enqueue(&mut connect("app")), (Ok(()), Ok(())));
    assert_eq!(
        enqueue(&mut connect("other")),
        (denied.clone(), denied.clone())
    );
    assert_eq!(
        enqueue(&mut connect("app_admin")),
        (denied.clone(), denied.clone())
    );
    let mut app_admin = connect("app_admin");
    assert_eq!(
        one::<i64>(
            &mut app_admin,
            "SELECT pending FROM queue_stats WHERE queue = 'emails'",
            &[]
        ),
        2
    );
    assert_eq!(
        one::<i64>(&mut app_admin, "SELECT count(*) FROM queue_failed", &[]),
        0
    );
    let other = connect("other")
        .query("SELECT * FROM queue_stats", &[])
        .map_err(|e| e.code().cloned());
    assert_eq!(other.map(|_| ()), denied);
}

/// The monitoring role, the queries as that role, and the exporter's query
/// file: its query runs as that role and returns a column for each metric.
#[test]
fn monitoring_examples_run_as_the_monitoring_role() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    psql_ok(&cluster, "postgres", &snippet("monitoring-setup"));
    admin
        .batch_execute(
            "SELECT queue_create('emails');
             SELECT queue_create('webhooks');
             SELECT queue_pause('webhooks');
             SELECT queue_enqueue_batch('emails', ARRAY['{\"to\": \"nobody\"}', '{}']::jsonb[]);
             SELECT queue_fail(id, lease, 'no such mailbox', permanent => true)
               FROM queue_claim('emails');",
        )
        .unwrap();
    let out = psql_ok(&cluster, "prometheus", &snippets("monitoring").join("\n"));
    assert!(
        out.contains(" emails |       1 |") && out.contains("no such mailbox"),
        "the monitoring queries show the dead letter:\n{out}"
    );

    let yaml = snippet("exporter-queries");
    let mut query = String::new();
    let mut metrics = Vec::new();
    let mut part = "";
    for line in yaml.lines() {
        match line.trim_end() {
            "  query: |" => part = "query",
            "  metrics:" => part = "metrics",
            l if part == "query" && l.starts_with("    ") => {
                query.push_str(l);
                query.push('\n');
            }
            l if part == "metrics" => {
                let (name, usage) = l
                    .trim_start()
                    .strip_prefix("- ")
                    .and_then(|m| m.split_once(": {usage: \""))
                    .unwrap_or_else(|| panic!("a metric line: {l}"));
                let usage = usage.split('"').next().unwrap();
                assert!(
                    ["LABEL", "GAUGE", "COUNTER"].contains(&usage),
                    "{name}: {usage}"
                );
                metrics.push(name.to_string());
            }
            _ => {}
        }
    }
    assert!(
        yaml.starts_with("# ") && yaml.contains("\nqueue:\n"),
        "{yaml}"
    );
    let out = psql_ok(
        &cluster,
        "prometheus",
        &format!("\\set QUIET on\n\\pset format csv\n{query};"),
    );
    let mut rows = out.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(header, metrics, "a column for each metric");
    let rows: Vec<Vec<&str>> = rows.map(|r| r.split(',').collect()).collect();
    let row = |queue: &str| -> Vec<&str> {
        rows.iter()
            .find(|r| r[1] == queue)
            .unwrap_or_else(|| panic!("a row for {queue}: {out}"))
            .clone()
    };
    // database, queue, paused, pending, scheduled, processing, succeeded,
    // failed, cancelled, (oldest_due_age_seconds), enqueued, succeeded and
    // failed totals
    let emails = row("emails");
    assert_eq!(
        [&emails[..9], &emails[10..]].concat(),
        [DB, "emails", "0", "1", "0", "0", "0", "1", "0", "2", "0", "1"]
    );
    assert!(emails[9].parse::<f64>().unwrap() > 0.0, "{emails:?}");
    let webhooks = row("webhooks");
    assert_eq!(&webhooks[..4], [DB, "webhooks", "1", "0"]);
    assert_eq!(webhooks[9].parse::<f64>().unwrap(), 0.0);
}

#[test]
fn sender_examples_deliver_as_they_say() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role_with_schema(&mut admin, "teamlead");
    // (the snippets wait a second for the worker; the test waits for the
    // outcome itself, however long a loaded machine takes)
    psql_ok(&cluster, "teamlead", &snippet("sender"));
    eventually("the sender's outcomes", || {
        jobs(&mut admin, "notifications")
            == vec![
                job(r#"{"to": "ada@example.com"}"#, "succeeded", 1, None),
                job(r#"{"to": "nobody"}"#, "failed", 1, Some("bad address")),
            ]
    });
    let outbox: Vec<String> = column(&mut admin, "SELECT recipient FROM public.outbox", &[]);
    assert_eq!(outbox, ["ada@example.com"]);
    psql_ok(&cluster, "postgres", &snippet("sender-settings"));
    eventually("the welcome delivered through mailer's search_path", || {
        jobs(&mut admin, "welcome")
            == vec![job(r#"{"to": "ada@example.com"}"#, "succeeded", 1, None)]
    });
    let welcomes: i64 = one(&mut admin, "SELECT count(*) FROM mail.welcomes", &[]);
    assert_eq!(welcomes, 1);
}

/// docs/push.md's short sender and webhook examples, as pasted: the
/// sender delivers its job into the outbox; the webhook is registered in
/// a database named mydb, as it says.
#[test]
fn push_page_short_sender_and_webhook_run_as_pasted() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role_with_schema(&mut admin, "teamlead");
    psql_ok(&cluster, "teamlead", &snippet("short-sender"));
    eventually("the sender's delivery", || {
        jobs(&mut admin, "notifications")
            == vec![job(r#"{"to": "ada@example.com"}"#, "succeeded", 1, None)]
    });
    let outbox: Vec<String> = column(&mut admin, "SELECT recipient FROM public.outbox", &[]);
    assert_eq!(outbox, ["ada@example.com"]);

    cluster.create_database("mydb", "CREATE EXTENSION queue");
    let mut mydb = cluster.connect_to("mydb");
    let out = psql_in(&cluster, "postgres", "mydb", &snippet("short-webhook"));
    assert!(out.status.success(), "{}", text(&out));
    let sender: String = one(
        &mut mydb,
        "SELECT sender FROM queue_stats WHERE queue = 'orders'",
        &[],
    );
    assert_eq!(sender, "POST https://hooks.example.com/in/orders");
}

/// The webhook section as pasted: the registration (in a database named
/// mydb, as it says), then its Python and Node receivers verifying a
/// request the worker really sent with the snippet's secret, and refusing
/// it once a byte of the body changed.
#[test]
fn webhook_examples_register_and_verify_as_pasted() {
    let receiver = Receiver::start();
    let endpoint = receiver.url("");
    let cluster = Cluster::start_with(&[&format!("queue.webhook_allow = '{endpoint}'")]);
    let mut admin = cluster.connect();
    cluster.create_database("mydb", "CREATE EXTENSION queue");
    let out = psql_in(&cluster, "postgres", "mydb", &snippet("webhook-setup"));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("orders | POST https://hooks.example.com/in/orders"),
        "{}",
        text(&out)
    );

    // a request signed with the snippet's secret, sent to the local endpoint
    let setup = snippet("webhook-setup");
    let secret = setup
        .split('\'')
        .find(|part| part.starts_with("whsec_"))
        .expect("the snippet names its secret");
    admin
        .batch_execute(&format!(
            "SELECT queue_create('orders');
             SELECT queue_register_webhook('orders', '{endpoint}/in/orders', secret => '{secret}');"
        ))
        .unwrap();
    let id: i64 = one(
        &mut admin,
        "SELECT queue_enqueue('orders', '{\"order\": 7}')",
        &[],
    );
    eventually("the worker sends the request", || {
        !receiver.seen("/in/orders").is_empty()
    });
    let request = receiver.seen("/in/orders").remove(0);
    // (names in lower case, as Node's http module and most frameworks
    // hand them over)
    let names: serde_json::Map<String, serde_json::Value> = request
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone().into()))
        .collect();
    let headers = write(
        &cluster,
        "headers.json",
        &serde_json::Value::Object(names).to_string(),
    );
    let body = write(&cluster, "body.json", &request.body);
    let mut tampered = request.body.into_bytes();
    let last = tampered.len() - 2;
    tampered[last] ^= 1;
    let tampered_body = cluster.socket_dir().join("tampered.json");
    std::fs::write(&tampered_body, &tampered).unwrap();

    // Python: the snippet's receive(), called with the raw body and headers
    let python = write(
        &cluster,
        "receive.py",
        &format!(
            "{}\nimport json, sys\nprint(json.dumps(receive(open(sys.argv[1], 'rb').read(), json.load(open(sys.argv[2])))))\n",
            snippet("webhook-verify-python")
        ),
    );
    // Node: the snippet, with `body` and `headers` defined before it (its
    // import is hoisted), printing the job it verified; beside a link to
    // tests/readme's node_modules, where ESM looks for standardwebhooks
    let modules = node_modules("standardwebhooks");
    std::os::unix::fs::symlink(&modules, cluster.socket_dir().join("node_modules")).unwrap();
    let node = write(
        &cluster,
        "receive.mjs",
        &format!(
            "import {{ readFileSync }} from \"node:fs\";\n\
             const body = readFileSync(process.argv[2], \"utf8\");\n\
             const headers = JSON.parse(readFileSync(process.argv[3], \"utf8\"));\n\
             {}console.log(JSON.stringify(job));\n",
            snippet("webhook-verify-node")
        ),
    );
    for (program, file) in [("python3", &python), ("node", &node)] {
        let run = |body: &Path| {
            Command::new(program)
                .arg(file)
                .arg(body)
                .arg(&headers)
                .output()
                .unwrap_or_else(|e| panic!("{program} runs: {e}"))
        };
        let out = run(&body);
        assert!(out.status.success(), "{program}:\n{}", text(&out));
        let job: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{program} prints the job ({e}):\n{}", text(&out)));
        assert_eq!(job["id"], id, "{program}");
        assert_eq!(job["queue"], "orders", "{program}");
        assert_eq!(job["payload"]["order"], 7, "{program}");
        let out = run(&tampered_body);
        assert!(
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("erification"),
            "{program} refuses a changed body:\n{}",
            text(&out)
        );
    }
}

/// The examples of docs/groups.md, in order, in one psql session as a plain
/// role: fair turns, an ordered queue, limits, queue_groups.
#[test]
fn group_examples_run_in_order_as_any_role() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "tenant_ops");
    let out = psql_ok(&cluster, "tenant_ops", &snippets("groups").join("\n"));
    let processing = |admin: &mut Client, queue: &str| -> Vec<String> {
        column(
            admin,
            "SELECT payload::text FROM queue_jobs WHERE queue = $1 AND status = 'processing'
              ORDER BY id",
            &[&queue],
        )
    };
    assert_eq!(
        processing(&mut admin, "sync"),
        [r#"{"tenant": "acme"}"#, r#"{"tenant": "globex"}"#],
        "one job of each tenant"
    );
    assert_eq!(
        processing(&mut admin, "order-events"),
        [
            r#"{"event": "created", "order": 7}"#,
            r#"{"event": "created", "order": 8}"#
        ],
        "the head of each order"
    );
    let limits: (Option<i32>, Option<i32>, Option<i32>, Option<i32>) = one_row(
        &mut admin,
        "SELECT max_in_flight, group_max_in_flight, rate_limit, group_rate_limit
           FROM queue_queues WHERE name = 'mail'",
        &[],
    );
    assert_eq!(limits, (Some(20), Some(2), None, Some(5000)));
    assert!(
        out.contains("order-7"),
        "queue_groups shows order-7:\n{out}"
    );
}

/// docs/groups.md's stuck group: found with queue_groups, its head run
/// again at once, ahead of the job that waited behind it.
#[test]
fn groups_page_unblocks_a_stuck_group_as_pasted() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "dba_on_call");
    let out = psql_ok(&cluster, "dba_on_call", &snippet("stuck-group"));
    assert!(
        out.contains("ERP down"),
        "queue_job shows the error:\n{out}"
    );
    assert_eq!(
        jobs(&mut admin, "order-events"),
        vec![
            job(r#"{"event": "created"}"#, "pending", 0, Some("ERP down")),
            job(r#"{"event": "paid"}"#, "pending", 0, None),
        ]
    );
    let next: Vec<String> = column(
        &mut admin,
        "SELECT payload::text FROM queue_claim('order-events', max_jobs => 10)",
        &[],
    );
    assert_eq!(
        next,
        [r#"{"event": "created"}"#],
        "the head goes first, alone"
    );
}

/// docs/schedules.md's recurring jobs, as pasted by a role of its own: the
/// schedules stored with their next ticks on the zone's wall clock, the job
/// run by hand, and the ten-second one fired by the worker.
#[test]
fn recurring_examples_schedule_and_fire_as_pasted() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "tenant_app");
    let out = psql_ok(&cluster, "tenant_app", &snippet("recurring"));
    assert!(out.contains("(3 rows)"), "the digest's next ticks:\n{out}");
    let schedules: Vec<(String, String, String, i64)> = all_rows(
        &mut admin,
        "SELECT name, time_zone, to_char(next_run_at AT TIME ZONE time_zone, 'HH24:MI:SS'),
                runs_total
           FROM queue_schedules ORDER BY name",
        &[],
    );
    assert_eq!(schedules.len(), 3, "{schedules:?}");
    assert_eq!(
        (
            schedules[0].0.as_str(),
            schedules[0].1.as_str(),
            schedules[0].2.as_str(),
            schedules[0].3
        ),
        ("daily-digest", "Europe/Berlin", "07:00:00", 1)
    );
    let manual: i64 = one(
        &mut admin,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'digests'
            AND headers->>'schedule' = 'daily-digest' AND payload = '{\"kind\": \"digest\"}'",
        &[],
    );
    assert_eq!(manual, 1, "queue_run_schedule enqueued the digest");
    eventually("a heartbeat fired by the worker", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM queue_jobs WHERE headers->>'schedule' = 'heartbeat'",
            &[],
        ) > 0
    });
}

/// The manual's queue_wait snippet, as pasted by a role of its own, with the
/// enqueue its comment names made in another session while it waits: the
/// wait says ready and the claim takes the job.
#[test]
fn waiting_example_returns_ready_when_another_session_enqueues() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "consumer");
    let file = write(&cluster, "waiting.sql", &snippet("waiting"));
    let mut command = Command::new(cluster.bin("psql"));
    command
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(file);
    libpq_env(&mut command, &cluster, "consumer");
    let psql = std::thread::spawn(move || command.output().expect("psql runs"));
    eventually("the snippet waiting", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity
              WHERE usename = 'consumer' AND wait_event_type = 'Extension'",
            &[],
        ) == 1
    });
    admin
        .batch_execute("SELECT queue_enqueue('emails', '{}')")
        .unwrap();
    let out = psql.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout.contains(" ready \n-------\n t\n"),
        "ready:\n{stdout}"
    );
    let processing: i64 = one(
        &mut admin,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'emails' AND status = 'processing'",
        &[],
    );
    assert_eq!(processing, 1, "the claim took the job:\n{stdout}");
}

/// A started program, stopped when dropped.
struct StopOnDrop(Option<Child>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free port of 127.0.0.1 (the handlers' PORT).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// POSTs `body` to the handler at `port` with curl: (status, body).
fn post(port: u16, body: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-X", "POST", "-H"])
        .arg("Content-Type: application/json")
        .args(["--data", body, "--max-time", "60"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (reply, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), reply.to_string())
}

/// The request and reply handler `name` (docs/pull.md), run as pasted with
/// `program`: POSTs are answered with the job's result, 502 when it failed,
/// 504 when it had not ended in time; against a pulled queue with a
/// consumer beside it, or (`push`) the queue of docs/push.md's sender that
/// returns jsonb.
fn check_reply_handler(name: &str, program: &str, file: &str, env: &[(&str, PathBuf)], push: bool) {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "web");
    if push {
        psql_ok(&cluster, "postgres", &snippet("push-reply"));
        admin
            .batch_execute("GRANT USAGE ON SCHEMA public TO web")
            .unwrap();
    } else {
        admin
            .batch_execute("SELECT queue_create('thumbnails', retry_delay => '0')")
            .unwrap();
    }
    let queue = if push { "renders" } else { "thumbnails" };
    let path = write(&cluster, file, &snippet(name));
    let port = free_port();
    let mut command = Command::new(program);
    command.arg(&path);
    libpq_env(&mut command, &cluster, "web");
    command.env("PORT", port.to_string()).env("QUEUE", queue);
    for (k, v) in env {
        command.env(k, v);
    }
    let (child, files) = spawn(&cluster, command, name);
    // (stopped however the test ends: a server left running would hold
    // what it inherited)
    let mut server = StopOnDrop(Some(child));
    eventually(&format!("{name} listening"), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // a consumer (unless the database delivers the queue): claims the first
    // two jobs as they come, completes "cat" with its thumbnail and fails
    // "dog" for good; "slow" comes after it has gone
    let consumer = (!push).then(|| {
        let mut client = cluster.connect();
        std::thread::spawn(move || {
            for _ in 0..2 {
                let job = loop {
                    let rows = client
                        .query(
                            "SELECT id, lease::text, payload->>'image'
                               FROM queue_claim('thumbnails')",
                            &[],
                        )
                        .unwrap();
                    if let Some(row) = rows.first() {
                        break (
                            row.get::<_, i64>(0),
                            row.get::<_, String>(1),
                            row.get::<_, String>(2),
                        );
                    }
                    sleep(Duration::from_millis(20));
                };
                let (id, lease, image) = job;
                if image == "cat" {
                    client
                        .execute(
                            "SELECT queue_complete($1, $2::text::uuid,
                                    jsonb_build_object('thumbnail', $3::text || '-128.png'))",
                            &[&id, &lease, &image],
                        )
                        .unwrap();
                } else {
                    client
                        .execute(
                            "SELECT queue_fail($1, $2::text::uuid, 'corrupt image', permanent => true)",
                            &[&id, &lease],
                        )
                        .unwrap();
                }
            }
        })
    });
    let json = |text: &str| -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    };
    let (code, reply) = post(port, r#"{"image": "cat"}"#);
    assert_eq!(
        (code, json(&reply)),
        (200, serde_json::json!({"thumbnail": "cat-128.png"})),
        "{name}"
    );
    if !push {
        let (code, reply) = post(port, r#"{"image": "dog"}"#);
        assert_eq!(
            (code, json(&reply)["status"].clone()),
            (502, "failed".into()),
            "{name}"
        );
        // no consumer takes it: after the handler's 10 seconds, 504
        let (code, reply) = post(port, r#"{"image": "slow"}"#);
        assert_eq!(
            (code, json(&reply)["status"].clone()),
            (504, "pending".into()),
            "{name}"
        );
        consumer.unwrap().join().unwrap();
    }
    let mut child = server.0.take().unwrap();
    let _ = child.kill();
    let out = finish(child, files, LOOP_LIMIT);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .all(|l| !l.contains("Error")),
        "{name}:\n{}",
        text(&out)
    );
}

#[test]
fn python_reply_handler_answers_with_the_result_of_a_pulled_and_a_pushed_job() {
    check_reply_handler("python-reply", "python3", "reply_server.py", &[], false);
    check_reply_handler("python-reply", "python3", "reply_server.py", &[], true);
}

#[test]
fn node_reply_handler_answers_with_the_result_of_a_pulled_and_a_pushed_job() {
    let env = node_path();
    check_reply_handler("node-reply", "node", "reply_server.js", &env, false);
    check_reply_handler("node-reply", "node", "reply_server.js", &env, true);
}

/// docs/dependencies.md's first example, as a role of its own: the load
/// waits for both extracts, counted as blocked, and their completion
/// releases it; psql's unaligned rows are the comments' values.
#[test]
fn dependencies_example_releases_the_load_as_pasted() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "etl");
    let file = write(&cluster, "dependencies.sql", &snippet("dependencies"));
    let mut command = Command::new(cluster.bin("psql"));
    command
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(file);
    libpq_env(&mut command, &cluster, "etl");
    let out = command.output().expect("psql runs");
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.is_empty()).collect();
    let ids: Vec<i64> = one::<Vec<i64>>(
        &mut admin,
        "SELECT array_agg(id ORDER BY id) FROM queue_jobs WHERE queue = 'extract'",
        &[],
    );
    let result = r#"{"rows": 120}"#;
    let expected = vec![
        "pending|2".to_string(),
        "t".to_string(),
        "t".to_string(),
        "pending|0".to_string(),
        format!("{}|succeeded|{result}", ids[0]),
        format!("{}|succeeded|{result}", ids[1]),
    ];
    // (queue_create's and the completions' rows: void and true)
    let shown: Vec<String> = rows
        .iter()
        .filter(|l| l.contains('|') || **l == "t")
        .map(|l| l.to_string())
        .collect();
    assert_eq!(shown, expected, "{stdout}");
    let load: (String, i32) = one_row(
        &mut admin,
        "SELECT status, waiting_for FROM queue_jobs WHERE queue = 'load'",
        &[],
    );
    assert_eq!(load, ("pending".to_string(), 0), "released, due now");
}

/// docs/dependencies.md's batch with a callback, run as pasted with
/// `program`: the report is released by the last image's end, broken or
/// not, and prints each image's outcome.
fn check_callback(name: &str, program: &str, file: &str, env: &[(&str, PathBuf)]) {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_role(&mut admin, "app");
    let path = write(&cluster, file, &snippet(name));
    let mut command = Command::new(program);
    command.arg(&path);
    libpq_env(&mut command, &cluster, "app");
    for (k, v) in env {
        command.env(k, v);
    }
    let (child, files) = spawn(&cluster, command, name);
    let out = finish(child, files, LOOP_LIMIT);
    assert!(out.status.success(), "{name}:\n{}", text(&out));
    let images: Vec<(i64, String, Option<String>)> = all_rows(
        &mut admin,
        "SELECT id, status, result::text FROM queue_jobs WHERE queue = 'images' ORDER BY id",
        &[],
    );
    let statuses: Vec<&str> = images.iter().map(|i| i.1.as_str()).collect();
    assert_eq!(statuses, ["succeeded", "succeeded", "failed"], "{name}");
    let report: String = one(
        &mut admin,
        "SELECT status FROM queue_jobs WHERE queue = 'reports'",
        &[],
    );
    assert_eq!(report, "succeeded", "{name}: the callback ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{name}: one line per image:\n{stdout}");
    for ((id, status, _), line) in images.iter().zip(&lines) {
        assert!(
            line.starts_with(&format!("{id} {status} ")),
            "{name}: {line}"
        );
    }
    assert!(
        lines[0].contains("128-a.png") && lines[1].contains("128-b.png"),
        "{stdout}"
    );
    assert!(
        lines[2].ends_with(" null") || lines[2].ends_with(" None"),
        "{stdout}"
    );
}

#[test]
fn python_callback_reads_each_parents_outcome() {
    check_callback("python-callback", "python3", "batch_callback.py", &[]);
}

#[test]
fn node_callback_reads_each_parents_outcome() {
    check_callback("node-callback", "node", "batch_callback.js", &node_path());
}

/// docs/operations.md's metrics and traces: a transaction's trace context
/// reaches its job's headers, and the latency query gives each queue's
/// median and 99th percentile wait as the monitoring role.
#[test]
fn latency_and_trace_context_examples_run_as_pasted() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    psql_ok(&cluster, "postgres", &snippet("monitoring-setup"));
    create_role(&mut admin, "app");
    admin
        .batch_execute("SELECT queue_create('emails')")
        .unwrap();
    psql_ok(&cluster, "app", &snippet("trace-context"));
    let traceparent: String = one(
        &mut admin,
        "SELECT headers->>'traceparent' FROM queue_jobs WHERE queue = 'emails'",
        &[],
    );
    assert_eq!(
        traceparent,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    );
    admin
        .batch_execute("SELECT queue_complete(id, lease) FROM queue_claim('emails')")
        .unwrap();
    let out = psql_ok(&cluster, "prometheus", &snippet("latency"));
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("emails"))
        .unwrap_or_else(|| panic!("a row for emails:\n{out}"));
    let cells: Vec<f64> = row
        .split('|')
        .skip(1)
        .map(|c| c.trim().parse().unwrap_or_else(|_| panic!("{row}")))
        .collect();
    assert_eq!(cells.len(), 2, "{out}");
    assert!(cells[0] > 0.0 && cells[0] <= cells[1], "{out}");
}
