//! queue-web against a real cluster: each page and action, the database's
//! refusals for a role without rights, --read-only, the CSRF and token
//! checks, the escaping, the masked password and the statement_timeout.

mod common;

use common::{cluster, url, Web, DB};

/// A dead letter in queue `emails` whose payload, headers and error hold
/// markup; its id.
fn dead_letter(client: &mut common::Client) -> i64 {
    client
        .batch_execute(
            "SELECT queue_create('emails', max_attempts => 1);
             SELECT queue_enqueue('emails', '{\"to\": \"<script>alert(1)</script>\"}',
                                  headers => '{\"trace\": \"<b>bold</b>\"}');",
        )
        .unwrap();
    client
        .query_one(
            "SELECT id FROM queue_claim('emails', 'w1') c,
                    queue_fail(c.id, c.lease, '<img src=x onerror=alert(2)> refused') f",
            &[],
        )
        .unwrap()
        .get(0)
}

fn status_of(client: &mut common::Client, id: i64) -> String {
    client
        .query_one("SELECT status FROM queue_job($1)", &[&id])
        .unwrap()
        .get(0)
}

#[test]
fn every_page_shows_what_the_views_hold() {
    let cluster = cluster(&["queue.webhook_allow = 'http://127.0.0.1:9/'"]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    db.batch_execute(
        "SELECT queue_create('hooks');
         SELECT queue_register_webhook('hooks', 'http://127.0.0.1:9/in?key=query-secret',
             headers => '{\"X-Api-Key\": \"header-value-secret\"}',
             secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
         SELECT queue_create('orders', ordered => true);
         SELECT queue_enqueue('orders', '{}', group_key => 'customer-7');
         SELECT queue_schedule('nightly', 'orders', '0 3 * * *');
         SELECT queue_create('bulk');
         SELECT queue_enqueue_batch('bulk', array_agg(jsonb_build_object('n', i)))
           FROM generate_series(1, 120) i;
         SELECT queue_create('noise');",
    )
    .unwrap();
    // newer jobs of another queue, so that bulk's pages look through several
    // windows of ids
    db.batch_execute(
        "SELECT queue_enqueue_batch('noise', array_fill('{}'::jsonb, ARRAY[10000]))
           FROM generate_series(1, 3)",
    )
    .unwrap();
    let mut other = cluster.connect_to("tenant2");
    other
        .batch_execute(
            "SELECT queue_create('tenant2_queue'); SELECT queue_enqueue('tenant2_queue', '{}');",
        )
        .unwrap();

    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();

    // the cluster: both tenant databases, not the one without the extension
    let page = s.get("/");
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains("2 databases with the queue extension"),
        "{text}"
    );
    assert!(text.contains("tenant2_queue") && text.contains("/db/queue_test/queue/emails"));
    assert!(!text.contains("id=\"db-plain\""));
    assert!(text.contains("Background workers"));
    // (the page shows the sampler's counts; ?fresh=1 reads every database now)
    db.batch_execute("SELECT queue_create('late_queue')")
        .unwrap();
    assert!(s
        .get("/?fresh=1")
        .text()
        .contains("/db/queue_test/queue/late_queue"));

    // a queue: options, counts, charts
    let page = s.get("/db/queue_test/queue/emails");
    assert_eq!(page.status, 200);
    let text = page.text();
    for expected in [
        "Queue emails",
        "max_attempts",
        "exponential",
        "Jobs per minute",
        "Backlog",
        "<svg",
    ] {
        assert!(text.contains(expected), "{expected} in {text}");
    }

    // a webhook: its URL without the query, header names, never a value or the secret
    let text = s.get("/db/queue_test/queue/hooks").text();
    assert!(text.contains("POST http://127.0.0.1:9/in"), "{text}");
    assert!(text.contains("X-Api-Key"));
    for secret in ["query-secret", "header-value-secret", "whsec_"] {
        assert!(!text.contains(secret), "{secret} shown");
    }

    // groups and schedules
    let text = s.get("/db/queue_test/queue/orders").text();
    assert!(
        text.contains("customer-7") && text.contains("nightly") && text.contains("0 3 * * *"),
        "{text}"
    );

    // jobs: 50 a page, newest first, keyset on id, three pages
    let first = s.get("/db/queue_test/queue/bulk/jobs");
    assert_eq!(first.status, 200);
    assert_eq!(first.html.matches("<tr><td><a href").count(), 50);
    assert!(first.text().contains("\"n\": 120"));
    let next = |page: &common::Page| {
        let at = page.html.find("id=\"next\" href=\"").expect("a next page");
        let rest = &page.html[at + 16..];
        rest[..rest.find('"').unwrap()].replace("&amp;", "&")
    };
    let second = s.get(&format!("/db/queue_test/queue/bulk/jobs{}", next(&first)));
    assert_eq!(second.html.matches("<tr><td><a href").count(), 50);
    assert!(second.text().contains("\"n\": 70") && !second.text().contains("\"n\": 71}"));
    let third = s.get(&format!("/db/queue_test/queue/bulk/jobs{}", next(&second)));
    assert_eq!(third.html.matches("<tr><td><a href").count(), 20);
    assert!(!third.html.contains("id=\"next\""));

    // by status, and an unknown status
    let failed = s.get("/db/queue_test/queue/emails/jobs?status=failed");
    assert!(failed
        .text()
        .contains(&format!("/db/queue_test/job/{dead}")));
    assert_eq!(
        s.get("/db/queue_test/queue/emails/jobs?status=nope").status,
        400
    );

    // look-up by id, and the dead letter's payload, headers and error, as text
    let found = s.get(&format!("/db/queue_test/job?id={dead}"));
    assert_eq!(
        found.location.as_deref(),
        Some(format!("/db/queue_test/job/{dead}").as_str())
    );
    let page = s.get(&format!("/db/queue_test/job/{dead}"));
    assert!(!page.html.contains("<script>alert"), "markup is escaped");
    assert!(!page.html.contains("<img src=x"));
    assert!(!page.html.contains("<b>bold"));
    assert!(page
        .html
        .contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    assert!(page
        .html
        .contains("&lt;img src=x onerror=alert(2)&gt; refused"));
    assert!(page.html.contains("&lt;b&gt;bold&lt;&#x2f;b&gt;"));
    assert_eq!(s.get("/db/queue_test/job/999999").status, 404);

    // missing things
    assert_eq!(s.get("/db/plain/queue/emails").status, 404);
    assert_eq!(s.get("/db/queue_test/queue/nothere").status, 404);
}

#[test]
fn every_action_is_the_sql_api_call() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    db.batch_execute(
        "SELECT queue_create('orders');
         SELECT queue_schedule('nightly', 'orders', '0 3 * * *');",
    )
    .unwrap();
    let pending: i64 = db
        .query_one("SELECT queue_enqueue('orders', '{}')", &[])
        .unwrap()
        .get(0);
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();
    let job = format!("/db/queue_test/job/{dead}");
    let csrf = s.get(&job).csrf();

    // retry a dead letter: pending again
    let page = s.post(&format!("{job}/retry"), &[("csrf", &csrf)]);
    let page = s.follow(&page);
    assert!(page.text().contains("Retried: the job is pending again."));
    assert!(page.html.contains("<span id=\"status\">pending</span>"));
    assert_eq!(status_of(&mut db, dead), "pending");

    // cancel a pending job
    let page = s.post(
        &format!("/db/queue_test/job/{pending}/cancel"),
        &[("csrf", &csrf)],
    );
    assert!(s.follow(&page).text().contains("Cancelled."));
    assert_eq!(status_of(&mut db, pending), "cancelled");

    // pause and resume
    let queue = "/db/queue_test/queue/orders";
    let page = s.post(&format!("{queue}/pause"), &[("csrf", &csrf)]);
    assert!(s
        .follow(&page)
        .text()
        .contains("Paused: nothing is claimed"));
    let paused: bool = db
        .query_one("SELECT paused FROM queue_stats WHERE queue = 'orders'", &[])
        .unwrap()
        .get(0);
    assert!(paused);
    let page = s.post(&format!("{queue}/resume"), &[("csrf", &csrf)]);
    assert!(s.follow(&page).text().contains("Resumed."));
    let paused: bool = db
        .query_one("SELECT paused FROM queue_stats WHERE queue = 'orders'", &[])
        .unwrap()
        .get(0);
    assert!(!paused);

    // run a schedule now
    let page = s.post(
        "/db/queue_test/schedule/nightly/run",
        &[("csrf", &csrf), ("queue", "orders")],
    );
    let text = s.follow(&page).text();
    let last: i64 = db
        .query_one(
            "SELECT last_job_id FROM queue_schedules WHERE name = 'nightly'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        text.contains(&format!("The schedule enqueued job {last}.")),
        "{text}"
    );

    // purge one status, then an unknown one (the database's own 22023)
    let page = s.post(
        &format!("{queue}/purge"),
        &[("csrf", &csrf), ("status", "cancelled")],
    );
    assert!(s.follow(&page).text().contains("Purged 1 jobs."));
    assert!(db
        .query_opt("SELECT 1 FROM queue_job($1)", &[&pending])
        .unwrap()
        .is_none());
    let page = s.post(
        &format!("{queue}/purge"),
        &[("csrf", &csrf), ("status", "bogus")],
    );
    assert_eq!(page.status, 400);
    assert!(page.text().contains("(SQLSTATE 22023)"), "{}", page.text());

    // retry of a job that is pending: false, and said so
    let page = s.post(&format!("{job}/retry"), &[("csrf", &csrf)]);
    assert!(s.follow(&page).text().contains("Not retried"));
}

#[test]
fn a_role_without_the_right_gets_the_database_refusal() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    db.batch_execute(
        "SELECT queue_schedule('nightly', 'emails', '0 3 * * *');
         CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
         CREATE ROLE nobody LOGIN;
         REVOKE EXECUTE ON FUNCTION queue_retry(bigint) FROM PUBLIC;",
    )
    .unwrap();

    // pg_monitor reads everything, but may not change another's queue
    let web = Web::start(&url(&cluster, "watcher", DB), &[]);
    let mut s = web.session();
    let page = s.get("/db/queue_test/queue/emails");
    assert_eq!(page.status, 200);
    // (the options live in the owner's table: the refusal is shown in their place)
    assert!(
        page.text()
            .contains("permission denied for table queue_queues (SQLSTATE 42501)"),
        "{}",
        page.text()
    );
    // (its jobs pages find the newest id by probes: the sequence is not its to read)
    let failed = s.get("/db/queue_test/queue/emails/jobs?status=failed");
    assert!(
        failed
            .text()
            .contains(&format!("/db/queue_test/job/{dead}")),
        "{}",
        failed.text()
    );
    let csrf = page.csrf();
    for (path, form) in [
        (
            "/db/queue_test/queue/emails/pause",
            vec![("csrf", csrf.as_str())],
        ),
        (
            "/db/queue_test/queue/emails/purge",
            vec![("csrf", csrf.as_str()), ("status", "failed")],
        ),
        (
            "/db/queue_test/schedule/nightly/run",
            vec![("csrf", csrf.as_str())],
        ),
        (
            &format!("/db/queue_test/job/{dead}/retry"),
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        let page = s.post(path, &form);
        assert_eq!(page.status, 403, "{path}: {}", page.text());
        let text = page.text();
        assert!(text.contains("(SQLSTATE 42501)"), "{path}: {text}");
        assert!(text.contains("id=\"refusal\""));
    }
    assert_eq!(status_of(&mut db, dead), "failed");
    let paused: bool = db
        .query_one("SELECT paused FROM queue_stats WHERE queue = 'emails'", &[])
        .unwrap()
        .get(0);
    assert!(!paused);
    drop(web);

    // a role that may not read the views sees that, per database
    let web = Web::start(&url(&cluster, "nobody", DB), &[]);
    let text = web.session().get("/").text();
    assert!(
        text.contains("permission denied for view queue_stats (SQLSTATE 42501)"),
        "{text}"
    );
}

#[test]
fn read_only_hides_every_action_and_refuses_posts() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    db.batch_execute("SELECT queue_schedule('nightly', 'emails', '0 3 * * *')")
        .unwrap();
    let web = Web::start(&url(&cluster, "postgres", DB), &["--read-only"]);
    let mut s = web.session();
    for path in [
        "/",
        "/db/queue_test/queue/emails",
        &format!("/db/queue_test/job/{dead}"),
    ] {
        let page = s.get(path);
        assert_eq!(page.status, 200);
        assert!(!page.has_forms(), "{path} has a form");
        assert!(page.text().contains("read-only"));
    }
    let page = s.post(
        &format!("/db/queue_test/job/{dead}/retry"),
        &[("csrf", "x")],
    );
    assert_eq!(page.status, 403);
    assert!(page.text().contains("--read-only"));
    assert_eq!(status_of(&mut db, dead), "failed");
}

#[test]
fn a_post_needs_its_sessions_csrf_token() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let retry = format!("/db/queue_test/job/{dead}/retry");

    let mut alice = web.session();
    let alices = alice.get("/").status;
    assert_eq!(alices, 200);
    let mut mallory = web.session();
    let mallorys = mallory.get(&format!("/db/queue_test/job/{dead}")).csrf();

    // none, a wrong one, another session's
    for form in [
        vec![],
        vec![("csrf", "00ff")],
        vec![("csrf", mallorys.as_str())],
    ] {
        let page = alice.post(&retry, &form);
        assert_eq!(page.status, 403);
        assert!(page.text().contains("CSRF token"));
    }
    // no session cookie at all
    let mut stranger = web.session();
    assert_eq!(stranger.post(&retry, &[("csrf", &mallorys)]).status, 403);
    assert_eq!(status_of(&mut db, dead), "failed");
}

#[test]
fn a_token_guards_every_request() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    let web = Web::start(&url(&cluster, "postgres", DB), &["--token", "t0ken-42"]);
    let mut s = web.session();
    assert_eq!(s.get("/").status, 401);
    assert_eq!(s.get(&format!("/db/queue_test/job/{dead}")).status, 401);
    assert_eq!(
        s.post(&format!("/db/queue_test/job/{dead}/retry"), &[])
            .status,
        401
    );
    assert_eq!(s.get("/?token=wrong").status, 401);

    // a bearer token
    s.bearer = Some("t0ken-42".into());
    assert_eq!(s.get("/").status, 200);
    s.bearer = Some("t0ken-43".into());
    assert_eq!(s.get("/").status, 401);

    // ?token= once: a cookie, and the URL loses it
    s.bearer = None;
    let page = s.get("/db/queue_test/queue/emails?token=t0ken-42");
    assert_eq!(page.status, 303);
    assert_eq!(
        page.location.as_deref(),
        Some("/db/queue_test/queue/emails")
    );
    let page = s.get("/db/queue_test/queue/emails");
    assert_eq!(page.status, 200);
    let csrf = page.csrf();
    let page = s.post(
        &format!("/db/queue_test/job/{dead}/retry"),
        &[("csrf", &csrf)],
    );
    assert_eq!(page.status, 303);
    assert_eq!(status_of(&mut db, dead), "pending");

    // the environment variable does the same
    drop(web);
    let web = {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_queue-web"));
        child
            .args([
                "--database-url",
                &url(&cluster, "postgres", DB),
                "--listen",
                "127.0.0.1:0",
            ])
            .env("QUEUE_WEB_TOKEN", "from-env");
        common::Web::start_command(child)
    };
    let mut s = web.session();
    assert_eq!(s.get("/").status, 401);
    s.bearer = Some("from-env".into());
    assert_eq!(s.get("/").status, 200);
}

#[test]
fn no_page_shows_the_password() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    let with_password = format!(
        "postgres://postgres:hunter2-pw@/{DB}?host={}&port=5432",
        cluster.socket_dir().display()
    );
    let web = Web::start(&with_password, &[]);
    let mut s = web.session();
    for path in [
        "/".to_string(),
        "/db/queue_test/queue/emails".into(),
        "/db/queue_test/queue/emails/jobs".into(),
        format!("/db/queue_test/job/{dead}"),
        "/db/nothere/queue/x".into(),
    ] {
        let page = s.get(&path);
        assert!(!page.html.contains("hunter2"), "{path} shows the password");
        if page.status == 200 {
            assert!(
                page.text().contains("postgres:***@"),
                "{path} shows the masked URL"
            );
        }
    }
}

#[test]
fn a_statement_that_waits_ends_at_the_statement_timeout() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    dead_letter(&mut db);
    let web = Web::start(
        &url(&cluster, "postgres", DB),
        &["--statement-timeout", "300"],
    );
    let mut s = web.session();
    assert_eq!(s.get("/db/queue_test/queue/emails").status, 200);
    // a lock the page's statements must wait for
    let mut locker = cluster.connect();
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE queue_queues IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let page = s.get("/db/queue_test/queue/emails");
    let text = page.text();
    assert!(
        text.contains("canceling statement due to statement timeout"),
        "{text}"
    );
    assert!(text.contains("(SQLSTATE 57014)"), "{text}");
    tx.rollback().unwrap();
    assert_eq!(s.get("/db/queue_test/queue/emails").status, 200);
}

#[test]
fn a_database_waiting_for_a_worker_slot_is_shown() {
    // one worker slot, and two databases whose senders keep it busy
    let cluster = cluster(&["queue.max_workers = 1"]);
    for name in [DB, "tenant2"] {
        cluster
            .connect_to(name)
            .batch_execute(
                "CREATE FUNCTION public.slow(job jsonb) RETURNS void
                 LANGUAGE sql AS 'SELECT pg_sleep(0.3)';
                 SELECT queue_create('jobs');
                 SELECT queue_register_sender('jobs', 'public.slow(jsonb)', batch_size => 1);",
            )
            .unwrap();
    }
    for name in [DB, "tenant2"] {
        cluster
            .connect_to(name)
            .batch_execute("SELECT queue_enqueue_batch('jobs', array_fill('{}'::jsonb, ARRAY[40]))")
            .unwrap();
    }
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = s.get("/").text();
        if text.contains("1 database waiting for a slot") {
            assert!(text.contains("waiting for slot"));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no database shown waiting for a slot: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
