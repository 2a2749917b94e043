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
         SELECT queue_create('slack');
         SELECT queue_register_webhook('slack', 'http://127.0.0.1:9/services/T000/B000/XXXXsecret');
         SELECT queue_create('relay', max_attempts => 1);
         SELECT queue_enqueue('relay', '{}');
         SELECT queue_fail(c.id, c.lease, 'POST https://hooks.slack.com/services/T000/B000/XXXXsecret is not allowed')
           FROM queue_claim('relay', 'w1') c;
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

    // a webhook whose path holds its secret: shown up to its last plain
    // word, on the queue page and (queue_stats' sender) the cluster page,
    // and in an error that names it
    let text = s.get("/db/queue_test/queue/slack").text();
    assert!(
        text.contains("POST http://127.0.0.1:9/services/…"),
        "{text}"
    );
    let relay_failed = s.get("/db/queue_test/queue/relay/jobs?status=failed");
    let relay_text = relay_failed.text();
    let relay_job = relay_text.split("/db/queue_test/job/").nth(1).unwrap();
    let relay_job = &relay_job[..relay_job.find('"').unwrap()];
    for text in [
        text,
        s.get("/?fresh=1").text(),
        relay_failed.text(),
        s.get(&format!("/db/queue_test/job/{relay_job}")).text(),
    ] {
        assert!(text.contains("/services/…"), "{text}");
        for secret in ["T000", "B000", "XXXXsecret"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
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

    // cancel a pending job (as its confirmation page posts it)
    let page = s.post(
        &format!("/db/queue_test/job/{pending}/cancel"),
        &[("csrf", &csrf), ("status", "pending")],
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

    // purge one status (as its confirmation page posts it), then an
    // unknown one (the database's own 22023)
    let page = s.post(
        &format!("{queue}/purge"),
        &[("csrf", &csrf), ("status", "cancelled"), ("counted", "1")],
    );
    assert!(s.follow(&page).text().contains("Purged 1 jobs."));
    assert!(db
        .query_opt("SELECT 1 FROM queue_job($1)", &[&pending])
        .unwrap()
        .is_none());
    let page = s.post(
        &format!("{queue}/purge"),
        &[("csrf", &csrf), ("status", "bogus"), ("counted", "0")],
    );
    assert_eq!(page.status, 400);
    assert!(page.text().contains("(SQLSTATE 22023)"), "{}", page.text());

    // retry of a job that is pending: false, and said so
    let page = s.post(&format!("{job}/retry"), &[("csrf", &csrf)]);
    assert!(s.follow(&page).text().contains("Not retried"));
}

#[test]
fn a_role_is_offered_only_what_it_may_do_and_the_database_refuses_the_rest() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    let pending: i64 = db
        .query_one("SELECT queue_enqueue('emails', '{}')", &[])
        .unwrap()
        .get(0);
    db.batch_execute(
        "SELECT queue_schedule('nightly', 'emails', '0 3 * * *');
         SELECT queue_create('frozen'); SELECT queue_pause('frozen');
         CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
         CREATE ROLE nobody LOGIN;
         CREATE ROLE boss LOGIN IN ROLE pg_monitor;
         GRANT SELECT ON queue_queues TO boss;
         SET ROLE boss; SELECT queue_create('mine'); RESET ROLE;
         REVOKE EXECUTE ON FUNCTION queue_retry(bigint) FROM PUBLIC;",
    )
    .unwrap();
    let owner_actions = [
        "id=\"pause\"",
        "id=\"resume\"",
        "id=\"purge\"",
        "/pause\"",
        "/resume\"",
        "/purge\"",
        "Run now",
    ];

    // pg_monitor reads everything, but owns nothing and may not read who
    // owns what: no owner's action is offered, and a sentence says why
    let web = Web::start(&url(&cluster, "watcher", DB), &[]);
    let mut s = web.session();
    for queue in ["emails", "frozen"] {
        let page = s.get(&format!("/db/queue_test/queue/{queue}"));
        assert_eq!(page.status, 200);
        let text = page.text();
        for action in owner_actions {
            assert!(!text.contains(action), "{action} offered: {text}");
        }
        assert!(!text.contains("42501"), "{text}");
        assert!(
            text.contains("this role may not read who owns the queue, so they are not offered"),
            "{text}"
        );
        assert!(
            text.contains("The options are kept in the extension owner's table"),
            "{text}"
        );
    }
    let page = s.get("/db/queue_test/queue/emails/purge?status=failed");
    assert_eq!(page.status, 200);
    assert!(!page.has_forms(), "{}", page.text());
    assert!(page.text().contains("may not read who owns the queue"));
    // (retry was revoked from it; cancel was not)
    let page = s.get(&format!("/db/queue_test/job/{dead}"));
    assert!(!page.html.contains("id=\"retry\""));
    assert!(page
        .text()
        .contains("Retry is not offered: this role may not execute queue_retry."));
    assert!(s
        .get(&format!("/db/queue_test/job/{pending}"))
        .html
        .contains("id=\"cancel\""));
    // (its jobs pages find the newest id by probes: the sequence is not its to read)
    let failed = s.get("/db/queue_test/queue/emails/jobs?status=failed");
    assert!(
        failed
            .text()
            .contains(&format!("/db/queue_test/job/{dead}")),
        "{}",
        failed.text()
    );
    // posted anyway, each is the database's own refusal
    let csrf = s
        .get(&format!("/db/queue_test/job/{pending}/cancel"))
        .csrf();
    for (path, form) in [
        (
            "/db/queue_test/queue/emails/pause",
            vec![("csrf", csrf.as_str())],
        ),
        (
            "/db/queue_test/queue/emails/purge",
            vec![
                ("csrf", csrf.as_str()),
                ("status", "failed"),
                ("counted", "1"),
            ],
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
        assert!(text.contains("must be owner") || text.contains("permission denied"));
        assert!(text.contains("id=\"refusal\""));
    }
    assert_eq!(status_of(&mut db, dead), "failed");
    let paused: bool = db
        .query_one("SELECT paused FROM queue_stats WHERE queue = 'emails'", &[])
        .unwrap()
        .get(0);
    assert!(!paused);

    // its dead letters by cause: shown, neither retry (revoked) nor purge
    // (not the owner) offered; posted anyway, the database refuses
    let triage = s.get("/db/queue_test/queue/emails/dead");
    assert_eq!(triage.status, 200);
    let text = triage.text();
    assert!(text.contains("1 dead letter in 1 cause"), "{text}");
    assert!(
        !text.contains("Retry…") && !text.contains("Purge…"),
        "{text}"
    );
    assert!(text.contains("may not read who owns the queue"), "{text}");
    assert!(text.contains("Retry is not offered where this role may not execute queue_retry"));
    let cause = cause_ids(&triage)[0].clone();
    let page = s.get(&format!(
        "/db/queue_test/queue/emails/dead/purge?cause={cause}"
    ));
    assert!(!page.has_forms(), "{}", page.text());
    let job = format!("queue_test:{dead}");
    for act in ["retry", "purge"] {
        let page = s.post(
            &format!("/db/queue_test/queue/emails/dead/{act}"),
            &[
                ("csrf", &csrf),
                ("cause", &cause),
                ("counted", "1"),
                ("job", &job),
            ],
        );
        assert_eq!(page.status, 403, "{act}: {}", page.text());
        let text = page.text();
        assert!(text.contains("(SQLSTATE 42501)"), "{act}: {text}");
        assert!(!text.contains("Before this refusal"));
    }
    assert_eq!(status_of(&mut db, dead), "failed");
    drop(web);

    // a role that may read the owners is offered its own queue's actions only
    let web = Web::start(&url(&cluster, "boss", DB), &[]);
    let mut s = web.session();
    let page = s.get("/db/queue_test/queue/emails");
    for action in owner_actions {
        assert!(!page.text().contains(action), "{action} offered");
    }
    assert!(
        page.text().contains("this role is neither"),
        "{}",
        page.text()
    );
    assert!(
        page.text().contains("max_attempts"),
        "the options are shown"
    );
    let page = s.get("/db/queue_test/queue/mine");
    assert!(page.html.contains("id=\"pause\"") && page.html.contains("id=\"purge\""));
    assert!(!page.html.contains("id=\"not-offered\""), "{}", page.text());
    drop(web);

    // a role that may not read the views sees that, per database
    let web = Web::start(&url(&cluster, "nobody", DB), &[]);
    let text = web.session().get("/").text();
    assert!(
        text.contains("permission denied for view queue_stats (SQLSTATE 42501)"),
        "{text}"
    );
}

/// The jobs of queue `orders` by status.
fn orders_count(client: &mut common::Client, status: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM queue_jobs WHERE queue = 'orders' AND status = $1",
            &[&status],
        )
        .unwrap()
        .get(0)
}

#[test]
fn destructive_actions_ask_first_and_say_how_many_jobs() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT queue_create('orders');
         SELECT queue_cancel(queue_enqueue('orders', '{}')) FROM generate_series(1, 3);
         SELECT queue_enqueue('orders', '{}') FROM generate_series(1, 2);",
    )
    .unwrap();
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();
    let queue = "/db/queue_test/queue/orders";

    // the queue page's purge is a question, with no status chosen
    let page = s.get(queue);
    assert!(page
        .text()
        .contains(&format!("method=\"get\" action=\"{queue}/purge\"")));
    assert!(!page
        .text()
        .contains(&format!("method=\"post\" action=\"{queue}/purge\"")));
    assert!(page.html.contains("<option value=\"\" selected>"));
    assert_eq!(page.html.matches("selected").count(), 1);
    let csrf = page.csrf();

    // a purge posted without its confirmation is refused, and purges nothing
    for form in [
        vec![("csrf", csrf.as_str()), ("status", "cancelled")],
        vec![("csrf", csrf.as_str())],
    ] {
        let page = s.post(&format!("{queue}/purge"), &form);
        assert_eq!(page.status, 400, "{}", page.text());
        assert!(page.text().contains("confirmed on its own page first"));
    }
    assert_eq!(orders_count(&mut db, "cancelled"), 3);
    assert_eq!(s.get(&format!("{queue}/purge")).status, 400);
    assert_eq!(s.get(&format!("{queue}/purge?status=")).status, 400);
    assert_eq!(s.get(&format!("{queue}/purge?status=bogus")).status, 400);

    // its confirmation names the status and the count, read now
    let page = s.get(&format!("{queue}/purge?status=cancelled"));
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains("This deletes the 3 cancelled jobs of queue orders in database queue_test"),
        "{text}"
    );
    assert!(text.contains("Purge 3 jobs"), "{text}");
    assert_eq!(page.field("status"), "cancelled");
    assert_eq!(page.field("counted"), "3");
    assert_eq!(
        orders_count(&mut db, "cancelled"),
        3,
        "asking purges nothing"
    );

    // confirmed after one more was cancelled: all four, and the note says so
    db.batch_execute("SELECT queue_cancel(queue_enqueue('orders', '{}'))")
        .unwrap();
    let form = [
        ("csrf", page.csrf()),
        ("status", page.field("status")),
        ("counted", page.field("counted")),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let done = s.post(&format!("{queue}/purge"), &form);
    let text = s.follow(&done).text();
    assert!(
        text.contains("Purged 4 jobs (3 when you confirmed: the queue changed meanwhile)."),
        "{text}"
    );
    assert_eq!(orders_count(&mut db, "cancelled"), 0);
    assert_eq!(orders_count(&mut db, "pending"), 2);

    // nothing left of that status: nothing to confirm
    let page = s.get(&format!("{queue}/purge?status=cancelled"));
    assert!(page
        .text()
        .contains("Queue orders has no cancelled jobs now: nothing to purge."));
    assert!(!page.has_forms());
    // every status
    let page = s.get(&format!("{queue}/purge?status=all"));
    assert!(
        page.text()
            .contains("This deletes all 2 jobs of every status"),
        "{}",
        page.text()
    );

    // a cancel: the job page asks, its page posts the status it showed
    let job: i64 = db
        .query_one("SELECT queue_enqueue('orders', '{}')", &[])
        .unwrap()
        .get(0);
    let link = format!("/db/queue_test/job/{job}");
    let page = s.get(&link);
    assert!(page
        .text()
        .contains(&format!("method=\"get\" action=\"{link}/cancel\"")));
    assert!(!page
        .text()
        .contains(&format!("method=\"post\" action=\"{link}/cancel\"")));
    let page = s.post(&format!("{link}/cancel"), &[("csrf", &csrf)]);
    assert_eq!(page.status, 400);
    assert_eq!(status_of(&mut db, job), "pending");
    let page = s.get(&format!("{link}/cancel"));
    assert!(page.text().contains(&format!("Job {job} is pending")));
    assert_eq!(page.field("status"), "pending");
    // the job was claimed meanwhile: asked again, nothing done
    db.batch_execute("SELECT queue_claim('orders', 'w1', 10)")
        .unwrap();
    let page = s.post(
        &format!("{link}/cancel"),
        &[("csrf", &csrf), ("status", "pending")],
    );
    let page = s.follow(&page);
    let text = page.text();
    assert!(
        text.contains(
            "It was pending when you confirmed, and is processing now: nothing was done."
        ),
        "{text}"
    );
    assert_eq!(status_of(&mut db, job), "processing");
    assert_eq!(page.field("status"), "processing");
    let page = s.post(
        &format!("{link}/cancel"),
        &[("csrf", &csrf), ("status", "processing")],
    );
    assert!(s.follow(&page).text().contains("Cancelled."));
    assert_eq!(status_of(&mut db, job), "cancelled");
    // an ended job has nothing to confirm
    let page = s.get(&format!("{link}/cancel"));
    assert!(page
        .text()
        .contains("only a pending or processing job can be cancelled"));
    assert!(!page.has_forms());
}

/// A raw HTTP/1.1 exchange with queue-web: its status line.
fn raw_status(web: &Web, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(web.base.trim_start_matches("http://")).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_foreign_host_or_origin_is_refused_and_changes_nothing() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    let dead = dead_letter(&mut db);
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let port = web.port();
    let mut s = web.session();
    let csrf = s.get(&format!("/db/queue_test/job/{dead}")).csrf();
    let queue = "/db/queue_test/queue/emails";
    let rebound = format!("rebind.evil.example:{port}");
    let rebound_origin = format!("http://{rebound}");

    // a page of another name that resolves here (DNS rebinding): its Host
    for host in [rebound.as_str(), "rebind.evil.example", "localhost:1"] {
        for path in ["/", queue] {
            let page = s.get_with(path, &[("host", host)]);
            assert_eq!(page.status, 421, "{host}{path}");
            assert!(page.text().contains("--allow-host"), "{}", page.text());
            assert!(!page.text().contains("emails"));
        }
    }
    let retry = format!("/db/queue_test/job/{dead}/retry");
    let purge = [
        ("csrf", csrf.as_str()),
        ("status", "failed"),
        ("counted", "1"),
    ];
    for (path, form) in [
        (retry.as_str(), &purge[..1]),
        (&format!("{queue}/pause"), &purge[..1]),
        (&format!("{queue}/purge"), &purge[..]),
    ] {
        let page = s.post_with(
            path,
            form,
            &[("host", &rebound), ("origin", &rebound_origin)],
        );
        assert_eq!(page.status, 421, "{path}");
    }
    // and no Host at all
    assert!(raw_status(&web, "GET / HTTP/1.0\r\n\r\n").contains(" 421 "));
    assert!(raw_status(&web, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n").contains(" 421 "));

    // another origin, on GET (a script's fetch) and POST (a form)
    let page = s.get_with(queue, &[("origin", "http://evil.example")]);
    assert_eq!(page.status, 403);
    for (path, form) in [
        (retry.as_str(), &purge[..1]),
        (&format!("{queue}/pause"), &purge[..1]),
        (&format!("{queue}/purge"), &purge[..]),
    ] {
        for headers in [
            vec![("origin", "http://evil.example")],
            vec![("origin", "null")],
            vec![("origin", rebound_origin.as_str())],
            vec![("referer", "http://evil.example/page.html")],
            // neither: who sent it cannot be told
            vec![],
        ] {
            let page = s.post_with(path, form, &headers);
            assert_eq!(page.status, 403, "{path} {headers:?}");
            assert!(page.text().contains("refuses"), "{}", page.text());
        }
    }
    // nothing changed
    assert_eq!(status_of(&mut db, dead), "failed");
    let paused: bool = db
        .query_one("SELECT paused FROM queue_stats WHERE queue = 'emails'", &[])
        .unwrap()
        .get(0);
    assert!(!paused);

    // the names of this address are answered, on its port
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(s.get_with(queue, &[("host", &host)]).status, 200, "{host}");
    }
    // a POST of its own pages: by Origin, or by Referer without one
    let page = s.post_with(
        &format!("{queue}/pause"),
        &[("csrf", &csrf)],
        &[("referer", &format!("http://localhost:{port}{queue}"))],
    );
    assert_eq!(page.status, 303, "{}", page.text());
    let page = s.post_with(
        &retry,
        &[("csrf", &csrf)],
        &[("origin", &format!("http://localhost:{port}"))],
    );
    assert_eq!(page.status, 303, "{}", page.text());
    assert_eq!(status_of(&mut db, dead), "pending");
}

#[test]
fn allow_host_names_the_other_hosts() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    dead_letter(&mut db);
    let queue = "/db/queue_test/queue/emails";
    let web = Web::start(
        &url(&cluster, "postgres", DB),
        &[
            "--allow-host",
            "Dash.Example.test",
            "--allow-host",
            "other.example.test:8443",
        ],
    );
    let port = web.port();
    let mut s = web.session();
    // a name without a port: on any (a proxy's Host has none)
    for (host, status) in [
        ("dash.example.test".to_string(), 200),
        (format!("dash.example.test:{port}"), 200),
        ("other.example.test:8443".to_string(), 200),
        (format!("other.example.test:{port}"), 421),
        (format!("rebind.evil.example:{port}"), 421),
        (format!("127.0.0.1:{port}"), 200),
    ] {
        assert_eq!(
            s.get_with(queue, &[("host", &host)]).status,
            status,
            "{host}"
        );
    }
    // a POST from behind a TLS proxy of that name
    let csrf = s.get(queue).csrf();
    let page = s.post_with(
        &format!("{queue}/pause"),
        &[("csrf", &csrf)],
        &[
            ("host", "dash.example.test"),
            ("origin", "https://dash.example.test"),
        ],
    );
    assert_eq!(page.status, 303, "{}", page.text());
    drop(web);

    // the environment's list, when no flag is given
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_queue-web"));
    command
        .args([
            "--database-url",
            &url(&cluster, "postgres", DB),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("QUEUE_WEB_ALLOW_HOST", "one.example.test, two.example.test")
        .env_remove("QUEUE_WEB_TOKEN");
    let web = Web::start_command(command);
    let mut s = web.session();
    for host in ["one.example.test", "two.example.test"] {
        assert_eq!(s.get_with("/", &[("host", host)]).status, 200, "{host}");
    }
    assert_eq!(
        s.get_with("/", &[("host", "three.example.test")]).status,
        421
    );
    drop(web);

    // listening on every address: that address and the names given, not
    // the loopback names
    let web = Web::start(&url(&cluster, "postgres", DB), &["--listen", "0.0.0.0:0"]);
    let port = web.port();
    let mut s = web.session();
    assert_eq!(s.get("/").status, 200, "Host 0.0.0.0:{port}");
    assert_eq!(
        s.get_with("/", &[("host", &format!("127.0.0.1:{port}"))])
            .status,
        421
    );
    drop(web);
    let web = Web::start(
        &url(&cluster, "postgres", DB),
        &["--listen", "0.0.0.0:0", "--allow-host", "127.0.0.1"],
    );
    let port = web.port();
    assert_eq!(
        web.session()
            .get_with("/", &[("host", &format!("127.0.0.1:{port}"))])
            .status,
        200
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
    let cause = cause_ids(&s.get("/dead"))[0].clone();
    for path in [
        "/",
        "/db/queue_test/queue/emails",
        &format!("/db/queue_test/job/{dead}"),
        "/dead",
        &format!("/dead?cause={cause}"),
        "/db/queue_test/queue/emails/dead",
    ] {
        let page = s.get(path);
        assert_eq!(page.status, 200);
        assert!(!page.has_forms(), "{path} has a form");
        assert!(
            !page.html.contains("type=\"checkbox\""),
            "{path} has a choice"
        );
        assert!(page.text().contains("read-only"));
    }
    for path in [
        format!("/dead/retry?cause={cause}"),
        format!("/dead/purge?cause={cause}"),
        format!("/db/queue_test/job/{dead}/let-go"),
    ] {
        assert_eq!(s.get(&path).status, 403, "{path}");
    }
    let page = s.post(
        "/dead/retry",
        &[("csrf", "x"), ("cause", &cause), ("counted", "1")],
    );
    assert_eq!(page.status, 403);
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
    let socket = cluster.socket_dir().display().to_string();
    // (the old masking ended a URL's credentials at its first `/` or `?`)
    for (database_url, secret) in [
        (
            format!("postgres://postgres:Zm9v/YmFy@/{DB}?host={socket}&port=5432"),
            vec!["Zm9v", "YmFy"],
        ),
        (
            format!("postgres://postgres:hunter2?pw@/{DB}?host={socket}&port=5432"),
            vec!["hunter2", "pw@"],
        ),
        (
            format!("user=postgres password='hunter 2\\'/%40' host={socket} port=5432 dbname={DB}"),
            vec!["hunter", "%40"],
        ),
    ] {
        let web = Web::start(&database_url, &[]);
        let line = &web.first_line;
        for piece in &secret {
            assert!(
                !line.contains(piece),
                "{piece} in the start-up line: {line}"
            );
        }
        assert!(line.contains("password=***"), "{line}");
        let mut s = web.session();
        for path in [
            "/".to_string(),
            "/db/queue_test/queue/emails".into(),
            "/db/queue_test/queue/emails/jobs".into(),
            format!("/db/queue_test/job/{dead}"),
            "/db/nothere/queue/x".into(),
        ] {
            let page = s.get(&path);
            let text = page.text();
            for piece in &secret {
                assert!(!text.contains(piece), "{path} shows {piece}: {text}");
            }
            if page.status == 200 {
                assert!(
                    text.contains("user=postgres password=*** host="),
                    "{path} shows the masked connection: {text}"
                );
            }
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
            // and on the list of what is stuck
            assert!(
                text.contains("has work for a worker and waits for a slot"),
                "{text}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no database shown waiting for a slot: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The values of `attribute="..."` that follow `marker` in `html`, in order.
fn values_after(html: &str, marker: &str) -> Vec<String> {
    html.split(marker)
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_string())
        .collect()
}

/// The causes a triage page links to, in its order (the most frequent first).
fn cause_ids(page: &common::Page) -> Vec<String> {
    let mut ids = values_after(&page.html, "?cause=");
    ids.dedup();
    ids
}

fn count_of(client: &mut common::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// The form a confirmation page posts, as its fields (each hidden input).
fn confirmation_form(page: &common::Page) -> Vec<(String, String)> {
    page.html
        .split("<input type=\"hidden\" name=\"")
        .skip(1)
        .map(|rest| {
            let name = &rest[..rest.find('"').unwrap()];
            let value = values_after(rest, "value=\"")[0].clone();
            (name.to_string(), value.replace("&#x3a;", ":"))
        })
        .collect()
}

fn post_form(s: &mut common::Session, path: &str, form: &[(String, String)]) -> common::Page {
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    s.post(path, &form)
}

#[test]
fn dead_letters_are_grouped_by_cause_and_a_cause_is_retried_or_purged() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT queue_create('mail', max_attempts => 1);
         SELECT queue_enqueue('mail', jsonb_build_object('n', i)) FROM generate_series(1, 9) i;
         SELECT queue_fail(c.id, c.lease, 'SMTP 550: mailbox user' || c.id || '@example.com unavailable')
           FROM queue_claim('mail', 'w1', 6) c;
         SELECT queue_fail(c.id, c.lease, 'timeout after ' || c.id || ' s <b>')
           FROM queue_claim('mail', 'w1', 3) c;",
    )
    .unwrap();
    cluster
        .connect_to("tenant2")
        .batch_execute(
            "SELECT queue_create('hooks', max_attempts => 1);
             SELECT queue_enqueue('hooks', '{}') FROM generate_series(1, 2);
             SELECT queue_fail(c.id, c.lease, 'SMTP 550: mailbox ops' || c.id || '@example.org unavailable')
               FROM queue_claim('hooks', 'w1', 2) c;",
        )
        .unwrap();
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();
    let base = "/db/queue_test/queue/mail/dead";

    // a queue's causes: the most frequent first, with counts and a sample,
    // the markup of an error shown as text
    let page = s.get(base);
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(text.contains("9 dead letters in 2 causes"), "{text}");
    let smtp_at = text
        .find("SMTP <n>: mailbox <email> unavailable")
        .expect(&text);
    let timeout_at = text.find("timeout after <n> s <b>").expect(&text);
    assert!(smtp_at < timeout_at, "the most frequent first");
    assert!(!page.html.contains("<b>"), "markup is escaped");
    assert!(text.contains("queue_test › mail</a> 6"), "{text}");
    let causes = cause_ids(&page);
    assert_eq!(causes.len(), 2);
    let (smtp, timeout) = (causes[0].clone(), causes[1].clone());
    // (the queue page and the cluster page lead here)
    assert!(s
        .get("/db/queue_test/queue/mail")
        .text()
        .contains(&format!("href=\"{base}\"")));
    assert!(s
        .get("/?fresh=1")
        .text()
        .contains(&format!("href=\"{base}\"")));

    // the cluster's: the same cause in both databases, in one group
    let page = s.get("/dead");
    let text = page.text();
    assert!(text.contains("11 dead letters in 2 causes"), "{text}");
    assert!(
        text.contains("queue_test › mail</a> 6") && text.contains("tenant2 › hooks</a> 2"),
        "{text}"
    );
    assert_eq!(cause_ids(&page)[0], smtp);

    // one cause's jobs, to choose from
    let page = s.get(&format!("{base}?cause={smtp}"));
    assert!(
        page.html.contains("id=\"cause-count\">6<"),
        "{}",
        page.text()
    );
    let chosen = values_after(&page.html, "name=\"job\" value=\"");
    assert_eq!(chosen.len(), 6);
    assert!(chosen.iter().all(|v| v.starts_with("queue_test:")));
    let page = s.get(&format!("{base}?cause=0000000000000000"));
    assert!(page.text().contains("No dead letter has this cause now"));
    assert_eq!(s.get("/db/queue_test/queue/nothere/dead").status, 404);

    // retry a whole cause: the page counts it and changes nothing
    let ask = s.get(&format!("{base}/retry?cause={smtp}"));
    assert_eq!(ask.status, 200);
    assert!(
        ask.text().contains(
            "This retries the 6 dead letters, whose cause is “SMTP <n>: mailbox <email> \
             unavailable”, in queue_test › mail (6)"
        ),
        "{}",
        ask.text()
    );
    assert!(ask.text().contains("Retry 6 dead letters"));
    let failed = "SELECT count(*) FROM queue_jobs WHERE queue = 'mail' AND status = 'failed'";
    assert_eq!(count_of(&mut db, failed), 9, "asking retries nothing");
    // one more of that cause fails after the confirmation: not retried
    db.batch_execute(
        "SELECT queue_enqueue('mail', '{}');
         SELECT queue_fail(c.id, c.lease, 'SMTP 550: mailbox late' || c.id || '@example.com unavailable')
           FROM queue_claim('mail', 'w1', 1) c;",
    )
    .unwrap();
    let form = confirmation_form(&ask);
    assert!(
        form.iter().any(|(k, v)| k == "counted" && v == "6"),
        "{form:?}"
    );
    // (no counted: not confirmed)
    let unconfirmed: Vec<(String, String)> = form
        .iter()
        .filter(|(k, _)| k != "counted")
        .cloned()
        .collect();
    assert_eq!(
        post_form(&mut s, &format!("{base}/retry"), &unconfirmed).status,
        400
    );
    let done = post_form(&mut s, &format!("{base}/retry"), &form);
    let text = s.follow(&done).text();
    assert!(
        text.contains("Retried 6 dead letters: they are pending again."),
        "{text}"
    );
    let pending = "SELECT count(*) FROM queue_jobs WHERE queue = 'mail' AND status = 'pending'";
    assert_eq!(count_of(&mut db, pending), 6);
    assert_eq!(count_of(&mut db, failed), 4);

    // purge two chosen dead letters of the timeouts
    let page = s.get(&format!("{base}?cause={timeout}"));
    let chosen = values_after(&page.html, "name=\"job\" value=\"");
    assert_eq!(chosen.len(), 3);
    let picked: Vec<i64> = chosen[..2]
        .iter()
        .map(|v| v.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    let ask = s.get(&format!(
        "{base}/purge?cause={timeout}&job=queue_test:{}&job=queue_test:{}",
        picked[0], picked[1]
    ));
    let text = ask.text();
    assert!(
        text.contains(
            "This deletes the 2 dead letters you chose, whose cause is “timeout after <n> s <b>”"
        ),
        "{text}"
    );
    assert_eq!(count_of(&mut db, failed), 4, "asking purges nothing");
    let form = confirmation_form(&ask);
    assert_eq!(form.iter().filter(|(k, _)| k == "job").count(), 2);
    let done = post_form(&mut s, &format!("{base}/purge"), &form);
    assert!(s.follow(&done).text().contains("Purged 2 dead letters."));
    for id in &picked {
        assert!(db
            .query_opt("SELECT 1 FROM queue_job($1)", &[id])
            .unwrap()
            .is_none());
    }
    assert_eq!(count_of(&mut db, failed), 2);

    // the cluster's cause, retried in both databases; one chosen job that
    // was retried meanwhile is counted, not retried twice
    let page = s.get(&format!("/dead?cause={smtp}"));
    let chosen = values_after(&page.html, "name=\"job\" value=\"");
    assert_eq!(chosen.len(), 3, "the late one here, two in tenant2");
    let ask = s.get(&format!(
        "/dead/retry?cause={smtp}&{}",
        chosen
            .iter()
            .map(|v| format!("job={v}"))
            .collect::<Vec<_>>()
            .join("&")
    ));
    assert!(
        ask.text()
            .contains("queue_test › mail (1), tenant2 › hooks (2)"),
        "{}",
        ask.text()
    );
    let late: i64 = chosen
        .iter()
        .find(|v| v.starts_with("queue_test:"))
        .map(|v| v.rsplit(':').next().unwrap().parse().unwrap())
        .unwrap();
    db.query_one("SELECT queue_retry($1)", &[&late]).unwrap();
    let done = post_form(&mut s, "/dead/retry", &confirmation_form(&ask));
    let text = s.follow(&done).text();
    assert!(
        text.contains("Retried 2 dead letters (3 when you confirmed: the others were no longer dead letters)."),
        "{text}"
    );
    let mut tenant2 = cluster.connect_to("tenant2");
    assert_eq!(
        count_of(
            &mut tenant2,
            "SELECT count(*) FROM queue_jobs WHERE status = 'pending'"
        ),
        2
    );
    assert!(s.get("/dead").text().contains("1 dead letter in 1 cause"));

    // a POST needs its session's CSRF token
    let mut form = confirmation_form(&s.get(&format!("{base}/retry?cause={timeout}")));
    form.retain(|(k, _)| k != "csrf");
    assert_eq!(
        post_form(&mut s, &format!("{base}/retry"), &form).status,
        403
    );
    assert_eq!(count_of(&mut db, failed), 1);
}

/// The job ids a jobs page lists, in its order.
fn listed_ids(page: &common::Page) -> Vec<i64> {
    values_after(&page.text(), "<tr><td><a href=\"/db/queue_test/job/")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn jobs_pages_filter_by_status_error_payload_group_worker_and_time() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    // alpha's three jobs fail (claimed by w1); then of beta's three, the
    // first succeeds (claimed by w2)
    let ids = |sql: &str, db: &mut common::Client| -> Vec<i64> {
        db.query(sql, &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    db.batch_execute("SELECT queue_create('orders', max_attempts => 1)")
        .unwrap();
    let alpha = ids(
        "SELECT queue_enqueue('orders', jsonb_build_object('customer', 'alpha', 'n', i), group_key => 'g1')
           FROM generate_series(1, 3) i",
        &mut db,
    );
    db.batch_execute(
        "SELECT queue_fail(c.id, c.lease, 'HTTP 503 from upstream') FROM queue_claim('orders', 'w1', 3) c",
    )
    .unwrap();
    let beta = ids(
        "SELECT queue_enqueue('orders', jsonb_build_object('customer', 'beta', 'n', i, 'rush', true), group_key => 'g2')
           FROM generate_series(1, 3) i",
        &mut db,
    );
    db.batch_execute("SELECT queue_complete(c.id, c.lease) FROM queue_claim('orders', 'w2', 1) c")
        .unwrap();
    let finished_at: String = db
        .query_one(
            "SELECT (max(finished_at) + interval '1 millisecond')::text FROM queue_jobs WHERE queue = 'orders'",
            &[],
        )
        .unwrap()
        .get(0);
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();
    let jobs = "/db/queue_test/queue/orders/jobs";
    let newest_first = |ids: &[i64]| {
        let mut ids = ids.to_vec();
        ids.sort_by(|a, b| b.cmp(a));
        ids
    };
    let all = newest_first(&[alpha.clone(), beta.clone()].concat());
    let filtered = |s: &mut common::Session, query: &str| {
        let page = s.get(&format!("{jobs}?{query}"));
        assert_eq!(page.status, 200, "{query}: {}", page.text());
        listed_ids(&page)
    };
    assert_eq!(filtered(&mut s, ""), all);
    assert_eq!(filtered(&mut s, "status=failed"), newest_first(&alpha));
    assert_eq!(filtered(&mut s, "error=http+503"), newest_first(&alpha));
    assert_eq!(
        filtered(&mut s, "status=failed&error=503"),
        newest_first(&alpha)
    );
    assert_eq!(filtered(&mut s, "error=nothing+like+it"), Vec::<i64>::new());
    assert_eq!(
        filtered(&mut s, "key=customer&value=beta"),
        newest_first(&beta)
    );
    assert_eq!(
        filtered(&mut s, "key=n&value=2"),
        newest_first(&[alpha[1], beta[1]])
    );
    assert_eq!(filtered(&mut s, "key=rush"), newest_first(&beta));
    assert_eq!(
        filtered(&mut s, "status=failed&key=customer&value=alpha"),
        newest_first(&alpha)
    );
    assert_eq!(filtered(&mut s, "group=g2"), newest_first(&beta));
    assert_eq!(filtered(&mut s, "worker=w2"), vec![beta[0]]);
    assert_eq!(
        filtered(&mut s, "status=failed&worker=w1"),
        newest_first(&alpha)
    );
    assert_eq!(
        filtered(&mut s, "status=pending&group=g2"),
        newest_first(&beta[1..])
    );
    // a time range: on the finish, or on the enqueue (with a time zone, or the database's)
    let since = finished_at.replace('+', "%2B").replace(' ', "+");
    assert_eq!(
        filtered(&mut s, "time=finished&to=2999-01-01&status=failed"),
        newest_first(&alpha)
    );
    assert_eq!(
        filtered(&mut s, &format!("time=finished&from={since}")),
        Vec::<i64>::new()
    );
    assert_eq!(
        filtered(&mut s, &format!("time=finished&to={since}")),
        newest_first(&[alpha.clone(), vec![beta[0]]].concat())
    );
    assert_eq!(
        filtered(&mut s, "time=enqueued&from=2000-01-01&to=2999-01-01"),
        all
    );
    assert_eq!(
        filtered(&mut s, "time=enqueued&to=2000-01-01+00:00:00%2B00"),
        Vec::<i64>::new()
    );
    // empty fields, as a form sends them, are no filter
    assert_eq!(
        filtered(
            &mut s,
            "status=&error=&key=&value=&group=&worker=&from=&to=&time=enqueued"
        ),
        all
    );

    // the form shows the filter, and the status links and the next page keep it
    let page = s.get(&format!("{jobs}?error=503&group=g1"));
    assert!(
        page.html.contains("name=\"error\" value=\"503\""),
        "{}",
        page.text()
    );
    assert!(
        page.text().contains("?status=failed&error=503&group=g1\""),
        "{}",
        page.text()
    );
    db.batch_execute(
        "SELECT queue_enqueue('orders', jsonb_build_object('customer', 'gamma'), group_key => 'g3')
           FROM generate_series(1, 60)",
    )
    .unwrap();
    let first = s.get(&format!("{jobs}?group=g3&key=customer&value=gamma"));
    assert_eq!(listed_ids(&first).len(), 50);
    let next = values_after(&first.html, "id=\"next\" href=\"")[0].replace("&amp;", "&");
    assert!(
        next.starts_with("?key=customer&value=gamma&group=g3&before="),
        "{next}"
    );
    let second = s.get(&format!("{jobs}{next}"));
    assert_eq!(listed_ids(&second).len(), 10);
    assert!(listed_ids(&second)
        .iter()
        .all(|id| !listed_ids(&first).contains(id)));

    // what cannot be a filter is refused: a status, a value without its key,
    // a time the database cannot read (its own 22007)
    assert_eq!(s.get(&format!("{jobs}?status=lost")).status, 400);
    assert_eq!(s.get(&format!("{jobs}?value=7")).status, 400);
    assert_eq!(
        s.get(&format!("{jobs}?time=run_at&from=2000-01-01")).status,
        400
    );
    let page = s.get(&format!("{jobs}?from=yesterday-ish"));
    assert_eq!(page.status, 400);
    assert!(page.text().contains("(SQLSTATE 22007)"), "{}", page.text());
}

/// The cluster page once `wanted` is on it (the sampler reads every
/// second in these tests), or a failure that shows the page.
fn cluster_page_with(s: &mut common::Session, wanted: &[&str]) -> common::Page {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let page = s.get("/");
        let text = page.words();
        if wanted.iter().all(|w| text.contains(w)) {
            return page;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cluster page does not say {wanted:?}: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn what_is_stuck_is_on_the_cluster_page_and_a_stuck_group_is_let_go() {
    // no worker fires schedules or delivers (the launcher runs, idle)
    let cluster = cluster(&["queue.enabled = off"]);
    let mut db = cluster.connect();
    db.batch_execute(
        "SELECT queue_create('orders', ordered => true);
         SELECT queue_enqueue('orders', jsonb_build_object('n', i), group_key => 'customer-7')
           FROM generate_series(1, 4) i;
         SELECT queue_create('idle');
         SELECT queue_enqueue('idle', '{}') FROM generate_series(1, 3);
         SELECT queue_create('frozen');
         SELECT queue_enqueue('frozen', '{}') FROM generate_series(1, 2);
         SELECT queue_pause('frozen');
         SELECT queue_schedule('every-second', 'idle', '* * * * * *');",
    )
    .unwrap();
    // the group's head fails, and waits an hour for its retry
    let fail_head = "SELECT c.id FROM queue_claim('orders', 'w1', 1) c,
                            queue_fail(c.id, c.lease, 'card declined for order 4411', retry_in => '1 hour') f";
    let head: i64 = db.query_one(fail_head, &[]).unwrap().get(0);
    let web = Web::start(&url(&cluster, "postgres", DB), &["--sample-interval", "1"]);
    let mut s = web.session();

    let page = cluster_page_with(
        &mut s,
        &[
            &format!(
                "Group customer-7 of queue_test › orders waits on its head, job {head}, which failed \
                 1 of 5 attempts and is retried in 5"
            ),
            "3 jobs wait behind it.",
            "Last error: card declined for order 4411",
            // a queue with due jobs nobody claims, one paused
            "Queue queue_test › idle: 3 jobs due, the oldest for",
            "no consumer is seen.",
            "Queue queue_test › frozen: 2 jobs due",
            "and the queue is paused: nothing is claimed until it is resumed.",
            // a schedule whose ticks nobody fires
            "Schedule every-second of queue_test › idle missed its tick of",
            "queue.enabled is off",
        ],
    );
    let text = page.text();
    assert!(text.contains(&format!("action=\"/db/queue_test/job/{head}/run-now\"")));
    let text = format!("{text} {}", page.words());
    assert!(text.contains(&format!("action=\"/db/queue_test/job/{head}/let-go\"")));
    assert!(!text.contains("Nothing: no ordered group"));
    // the workers being off is one line, not every database "waiting for a
    // slot"; the ordered queue's due jobs are its stuck group's, said there
    assert!(
        text.contains("The background workers are off (queue.enabled is off)"),
        "{text}"
    );
    assert!(!text.contains("waits for a slot"), "{text}");
    assert!(!text.contains("Queue queue_test › orders:"), "{text}");

    // run the head now: cancelled and retried in one statement, due now,
    // its attempts start over; its line goes
    let csrf = page.csrf();
    let run_now = format!("/db/queue_test/job/{head}/run-now");
    let done = s.post(&run_now, &[("csrf", &csrf), ("status", "pending")]);
    let page = s.follow(&done);
    assert!(
        page.text().contains(&format!("Job {head} runs again now")),
        "{}",
        page.text()
    );
    assert!(!page.text().contains("Group customer-7"), "{}", page.text());
    let (status, attempts, due): (String, i32, bool) = {
        let row = db
            .query_one(
                "SELECT status, attempts, run_at <= now() FROM queue_job($1)",
                &[&head],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert_eq!((status.as_str(), attempts, due), ("pending", 0, true));

    // offered while pending, then run again and claimed before the click:
    // nothing is done
    let again: i64 = db.query_one(fail_head, &[]).unwrap().get(0);
    assert_eq!(again, head, "the head stays at its group's head");
    let page = cluster_page_with(
        &mut s,
        &[&format!("its head, job {head}, which failed 1 of 5")],
    );
    let csrf = page.csrf();
    db.query_one("SELECT queue_cancel($1) AND queue_retry($1)", &[&head])
        .unwrap();
    let row = db
        .query_one(
            "SELECT id, lease::text FROM queue_claim('orders', 'w2', 1)",
            &[],
        )
        .unwrap();
    let (claimed, lease): (i64, String) = (row.get(0), row.get(1));
    assert_eq!(claimed, head);
    let done = s.post(&run_now, &[("csrf", &csrf), ("status", "pending")]);
    let text = s.follow(&done).text();
    assert!(
        text.contains(&format!("Nothing was done: job {head} has moved on")),
        "{text}"
    );
    let status = |db: &mut common::Client| -> String {
        db.query_one("SELECT status FROM queue_job($1)", &[&head])
            .unwrap()
            .get(0)
    };
    assert_eq!(status(&mut db), "processing");

    // let it go: a page says what it ends, then the group goes on
    db.query_one(
        "SELECT queue_fail($1, $2::text::uuid, 'card declined for order 4411', retry_in => '1 hour')",
        &[&head, &lease],
    )
    .unwrap();
    cluster_page_with(
        &mut s,
        &[&format!("its head, job {head}, which failed 1 of 5")],
    );
    let let_go = format!("/db/queue_test/job/{head}/let-go");
    let ask = s.get(&let_go);
    assert_eq!(ask.status, 200);
    let text = ask.text();
    assert!(
        text.contains(&format!(
            "Job {head} is pending, the head of group customer-7 of queue orders, after 1 \
             attempt (last error: card declined for order 4411). Letting it go cancels it: it \
             ends as cancelled, and the group goes on with its next job (3 wait)."
        )),
        "{text}"
    );
    assert_eq!(status(&mut db), "pending", "asking cancels nothing");
    let page = s.post(&let_go, &[("csrf", &ask.csrf())]);
    assert_eq!(page.status, 400, "{}", page.text());
    let form = confirmation_form(&ask);
    let done = post_form(&mut s, &let_go, &form);
    let page = s.follow(&done);
    assert!(
        page.text().contains(&format!(
            "Let go: job {head} is cancelled, and its group goes on"
        )),
        "{}",
        page.text()
    );
    assert!(!page.text().contains("Group customer-7"), "{}", page.text());
    assert_eq!(status(&mut db), "cancelled");
    let next: i64 = db
        .query_one("SELECT id FROM queue_claim('orders', 'w1', 1)", &[])
        .unwrap()
        .get(0);
    assert_eq!(next, head + 1, "the group's next job");
}

#[test]
fn the_worker_panel_says_what_it_sees() {
    // preloaded, with nothing to deliver: no worker, and none needed (a
    // worker that looked at a new database leaves after a second idle)
    let preloaded = cluster(&["queue.idle_exit = 1"]);
    let web = Web::start(&url(&preloaded, "postgres", DB), &[]);
    let page = cluster_page_with(
        &mut web.session(),
        &["None running now, and none needed: the launcher is running (the library is preloaded)"],
    );
    assert!(
        !page.text().contains("without the preload"),
        "{}",
        page.text()
    );
    drop(web);
    drop(preloaded);

    // not preloaded: it says so, with the list it read
    let plain = cluster(&["shared_preload_libraries = ''"]);
    let web = Web::start(&url(&plain, "postgres", DB), &[]);
    cluster_page_with(
        &mut web.session(),
        &[
            "None: the library is not preloaded (shared_preload_libraries is ''), so nothing is \
           pushed and no schedule fires",
        ],
    );
}

#[test]
fn charts_have_axes_units_peaks_and_the_pages_reload_on_their_own() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT queue_create('emails')").unwrap();
    let web = Web::start(&url(&cluster, "postgres", DB), &["--sample-interval", "1"]);
    let mut s = web.session();
    s.get("/");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    db.batch_execute(
        "SELECT queue_enqueue_batch('emails', array_fill('{}'::jsonb, ARRAY[30]));
         SELECT queue_complete(c.id, c.lease) FROM queue_claim('emails', 'w', 10) c;",
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));

    // the cluster's charts and a queue's: a value axis with its unit, a
    // time axis, each line's current value and peak
    for (path, title) in [
        ("/", "Jobs per minute, every queue"),
        ("/db/queue_test/queue/emails", "Jobs per minute"),
    ] {
        let page = s.get(path);
        let text = page.text();
        for expected in [
            title,
            "jobs per minute, one point per minute",
            "Backlog",
            "time (UTC)",
            "class=\"unit\">jobs per minute<",
            "class=\"peak-label\">peak ",
        ] {
            assert!(text.contains(expected), "{path}: {expected} in {text}");
        }
        assert!(page.html.matches("class=\"y-tick\"").count() >= 2, "{path}");
        assert!(page.html.matches("class=\"x-tick\"").count() >= 1, "{path}");
        // enqueued: 30 jobs in the samples' minute, a rate above 0, and its peak
        let legend = text.split("enqueued: now <strong>").nth(1).expect(&text);
        let (now, rest) = legend.split_once("</strong>, peak ").unwrap();
        let (peak, rest) = rest.split_once(" at ").unwrap();
        let now: f64 = now.parse().unwrap();
        let peak: f64 = peak.parse().unwrap();
        assert!(peak > 0.0 && now <= peak, "{path}: now {now}, peak {peak}");
        assert!(rest.starts_with(|c: char| c.is_ascii_digit()) && rest[5..].starts_with(" UTC"));
    }

    // the cluster and a queue reload on their own (no script: a meta
    // refresh), to their address without an action's note; ?refresh=off stops it
    let page = s.get("/?done=ran&n=1");
    assert!(
        page.html
            .contains("<meta http-equiv=\"refresh\" content=\"5; url=&#x2f;\">"),
        "{}",
        page.html
    );
    assert!(page.text().contains("This page reloads every 5 s"));
    let queue = s.get("/db/queue_test/queue/emails");
    assert!(queue
        .text()
        .contains("<meta http-equiv=\"refresh\" content=\"5; url=/db/queue_test/queue/emails\">"));
    let stopped = s.get("/db/queue_test/queue/emails?refresh=off");
    assert!(!stopped.html.contains("http-equiv"));
    assert!(stopped.text().contains("Reloading stopped"));
    assert!(!s
        .get("/db/queue_test/queue/emails/jobs")
        .html
        .contains("http-equiv"));
}

#[test]
fn a_job_page_shows_its_result_parents_and_children() {
    let cluster = cluster(&[]);
    let mut db = cluster.connect();
    db.batch_execute("SELECT queue_create('work')").unwrap();
    let first: i64 = db
        .query_one("SELECT queue_enqueue('work', '{}')", &[])
        .unwrap()
        .get(0);
    let second: i64 = db
        .query_one("SELECT queue_enqueue('work', '{}')", &[])
        .unwrap()
        .get(0);
    let child: i64 = db
        .query_one(
            "SELECT queue_enqueue('work', '{\"report\": true}', depends_on => ARRAY[$1::bigint, $2::bigint])",
            &[&first, &second],
        )
        .unwrap()
        .get(0);
    let done: i64 = db
        .query_one(
            "SELECT c.id FROM queue_claim('work', 'w1', 1) c,
                    queue_complete(c.id, c.lease, '{\"total\": 42, \"note\": \"<i>x</i>\"}') ok",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(done, first);
    let web = Web::start(&url(&cluster, "postgres", DB), &[]);
    let mut s = web.session();

    // the child: its parents with their outcomes, and what it waits for
    let page = s.get(&format!("/db/queue_test/job/{child}"));
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(text.contains("Parents: the jobs it waits for"), "{text}");
    assert!(text.contains("1 parent not yet ended"), "{text}");
    assert!(
        text.contains(&format!(
            "<a href=\"/db/queue_test/job/{first}\">{first}</a></td><td>work</td><td>succeeded</td>"
        )),
        "{text}"
    );
    assert!(text.contains("\"total\": 42"), "{text}");
    assert!(text.contains(&format!("{second}</a></td><td>work</td><td>pending</td>")));
    assert!(!text.contains("Children"), "{text}");
    assert!(!page.html.contains("<i>x"), "markup is escaped");

    // the first parent: its result, and its child
    let text = s.get(&format!("/db/queue_test/job/{first}")).text();
    assert!(text.contains("<h2>Result</h2>"), "{text}");
    assert!(text.contains("\"total\": 42"), "{text}");
    assert!(
        text.contains("Children: the jobs that wait for it"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{child}</a></td><td>work</td><td>pending</td>")),
        "{text}"
    );
    // a pending job has no result yet
    let text = s.get(&format!("/db/queue_test/job/{second}")).text();
    assert!(
        !text.contains("<h2>Result</h2>") && text.contains("Children"),
        "{text}"
    );
}
