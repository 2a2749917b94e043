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
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no database shown waiting for a slot: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
