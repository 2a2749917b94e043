//! HTTP delivery against a real local receiver on 127.0.0.1: outcomes,
//! retries and Retry-After, the Standard Webhooks signature checked by the
//! specification's own Python library, a hung endpoint beside a healthy
//! queue, and an allow-list entry removed by a DBA.

use queue_client_tests::receiver::{Receiver, Reply};
use queue_client_tests::{eventually, one, Client, Cluster, DURABLE};

/// A cluster whose allow list names the receiver, literally.
fn cluster_for(receiver: &Receiver) -> Cluster {
    Cluster::start_with(&[&allow(receiver)])
}

fn allow(receiver: &Receiver) -> String {
    format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port)
}

fn status(client: &mut Client, id: i64) -> String {
    one(client, "SELECT status FROM queue_job($1)", &[&id])
}

/// A new database `name` whose queue `hooks` posts to `url` (`options`
/// added to its registration); a connection to it.
fn database_with_hooks(cluster: &Cluster, name: &str, url: &str, options: &str) -> Client {
    cluster.create_database(
        name,
        &format!(
            "CREATE EXTENSION queue;
             SELECT queue_create('hooks');
             SELECT queue_register_webhook('hooks', '{url}'{options});"
        ),
    );
    cluster.connect_to(name)
}

fn enqueue(client: &mut Client, queue: &str, payload: &str) -> i64 {
    one(
        client,
        "SELECT queue_enqueue($1, $2::text::jsonb)",
        &[&queue, &payload],
    )
}

#[test]
fn a_job_is_posted_signed_and_the_signature_verifies_with_the_reference_library() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    client
        .batch_execute(&format!(
            "SELECT queue_create('hooks');
             SELECT queue_register_webhook('hooks', '{}',
                 headers => '{{\"Authorization\": \"Bearer t0ken\"}}', secret => '{secret}');",
            receiver.url("/in?token=abc")
        ))
        .unwrap();
    let id = enqueue(&mut client, "hooks", r#"{"order": 7}"#);
    eventually("delivered", || status(&mut client, id) == "succeeded");
    let seen = receiver.seen("/in");
    assert_eq!(seen.len(), 1, "{seen:?}");
    let request = &seen[0];
    let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    assert_eq!(body["id"], id);
    assert_eq!(body["queue"], "hooks");
    assert_eq!(body["payload"]["order"], 7);
    assert_eq!(body["attempt"], 1);
    assert_eq!(request.header("authorization"), Some("Bearer t0ken"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    let webhook_id = request.header("webhook-id").unwrap();
    let uid: String = one(
        &mut client,
        "SELECT 'msg_' || replace(uid::text, '-', '') FROM queue_done WHERE id = $1",
        &[&id],
    );
    assert_eq!(webhook_id, uid);

    // an implementation not ours: the specification's Python library
    let verify = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, json\n\
             from standardwebhooks.webhooks import Webhook\n\
             secret, wid, ts, sig, body = sys.argv[1:6]\n\
             Webhook(secret).verify(body, {'webhook-id': wid, 'webhook-timestamp': ts, 'webhook-signature': sig})\n\
             print('verified')",
            secret,
            webhook_id,
            request.header("webhook-timestamp").unwrap(),
            request.header("webhook-signature").unwrap(),
            &request.body,
        ])
        .output()
        .expect("python3 runs");
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("verified"),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );

    // the view shows the endpoint without its query, and nothing else
    let sender: String = one(
        &mut client,
        "SELECT sender FROM queue_stats WHERE queue = 'hooks'",
        &[],
    );
    assert_eq!(sender, format!("POST {}", receiver.url("/in")));
    let everything: String = one(
        &mut client,
        "SELECT concat_ws(' ', (SELECT string_agg(s::text, ' ') FROM queue_stats s),
                              (SELECT string_agg(w::text, ' ') FROM queue_workers w),
                              (SELECT string_agg(j::text, ' ') FROM queue_jobs j))",
        &[],
    );
    // a failed attempt's last_error and the server's log neither
    receiver.answer("/in", vec![Reply::Status(503, Vec::new())]);
    let failing = enqueue(&mut client, "hooks", "{}");
    eventually("a failed attempt", || {
        one::<Option<String>>(
            &mut client,
            "SELECT last_error FROM queue_jobs WHERE id = $1",
            &[&failing],
        )
        .is_some()
    });
    let error: String = one(
        &mut client,
        "SELECT last_error FROM queue_jobs WHERE id = $1",
        &[&failing],
    );
    let log = cluster.server_log();
    for hidden in ["t0ken", "token=abc", "MfKQ9r8"] {
        assert!(!everything.contains(hidden), "{hidden} shown: {everything}");
        assert!(!error.contains(hidden), "{hidden} in last_error: {error}");
        assert!(!log.contains(hidden), "{hidden} in the server log");
    }
}

#[test]
fn outcomes_follow_the_status_and_retry_after() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    for (queue, path, policy) in [
        (
            "flaky",
            "/flaky",
            "retry_delay => '10 ms', max_attempts => 3",
        ),
        ("gone", "/gone", "max_attempts => 5"),
        ("down", "/down", "retry_delay => '10 ms', max_attempts => 2"),
        ("busy", "/busy", "max_retry_delay => '10 minutes'"),
        ("later", "/later", "max_retry_delay => '1 hour'"),
        ("moved", "/moved", "max_attempts => 5"),
    ] {
        client
            .batch_execute(&format!(
                "SELECT queue_create('{queue}', {policy});
                 SELECT queue_register_webhook('{queue}', '{}');",
                receiver.url(path)
            ))
            .unwrap();
    }
    receiver.answer(
        "/flaky",
        vec![
            Reply::Status(503, Vec::new()),
            Reply::Status(500, Vec::new()),
            Reply::Status(204, Vec::new()),
        ],
    );
    receiver.answer("/gone", vec![Reply::Status(404, Vec::new())]);
    receiver.answer("/down", vec![Reply::Status(503, Vec::new())]);
    receiver.answer(
        "/busy",
        vec![Reply::Status(429, vec![("Retry-After", "3600".into())])],
    );
    receiver.answer(
        "/later",
        vec![Reply::Status(503, vec![("Retry-After", "120".into())])],
    );
    receiver.answer(
        "/moved",
        vec![Reply::Status(
            301,
            vec![("Location", receiver.url("/elsewhere"))],
        )],
    );
    let flaky = enqueue(&mut client, "flaky", "{}");
    let gone = enqueue(&mut client, "gone", "{}");
    let down = enqueue(&mut client, "down", "{}");
    let busy = enqueue(&mut client, "busy", "{}");
    let later = enqueue(&mut client, "later", "{}");
    let moved = enqueue(&mut client, "moved", "{}");

    // retried by the policy, then delivered, with one webhook-id throughout
    eventually("flaky delivered", || {
        status(&mut client, flaky) == "succeeded"
    });
    let attempts = receiver.seen("/flaky");
    assert_eq!(attempts.len(), 3);
    let ids: Vec<_> = attempts.iter().map(|s| s.header("webhook-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    // 404 and a redirect fail at once; 503 until max_attempts
    eventually("gone failed", || status(&mut client, gone) == "failed");
    eventually("moved failed", || status(&mut client, moved) == "failed");
    eventually("down failed", || status(&mut client, down) == "failed");
    assert_eq!(receiver.seen("/gone").len(), 1);
    assert_eq!(
        receiver.seen("/moved").len(),
        1,
        "the redirect is not followed"
    );
    assert!(receiver.seen("/elsewhere").is_empty());
    assert_eq!(receiver.seen("/down").len(), 2);
    let error = |client: &mut Client, id: i64| -> String {
        one(
            client,
            "SELECT last_error FROM queue_jobs WHERE id = $1",
            &[&id],
        )
    };
    assert_eq!(error(&mut client, gone), "HTTP 404 Not Found: reply 404");
    assert_eq!(
        error(&mut client, down),
        "HTTP 503 Service Unavailable: reply 503"
    );
    // Retry-After sets the next attempt, capped by max_retry_delay (once
    // the reply that says so has come: an attempt that failed otherwise
    // first, a connection closed under load say, is retried by the policy)
    let answered = |client: &mut Client, id: i64, reply: &str| -> bool {
        one(
            client,
            "SELECT status = 'pending' AND starts_with(coalesce(last_error, ''), $2)
               FROM queue_jobs WHERE id = $1",
            &[&id, &reply],
        )
    };
    eventually("busy waits", || answered(&mut client, busy, "HTTP 429"));
    eventually("later waits", || answered(&mut client, later, "HTTP 503"));
    let due_in = |client: &mut Client, id: i64| -> f64 {
        one(
            client,
            "SELECT extract(epoch FROM run_at - now())::float8 FROM queue_jobs WHERE id = $1",
            &[&id],
        )
    };
    let busy_in = due_in(&mut client, busy);
    assert!(
        (500.0..=600.0).contains(&busy_in),
        "capped at 10 minutes: {busy_in}"
    );
    let later_in = due_in(&mut client, later);
    assert!(
        (60.0..=120.0).contains(&later_in),
        "about 120 s: {later_in}"
    );
}

#[test]
fn a_hung_endpoint_never_holds_up_another_queue() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('stuck');
             SELECT queue_register_webhook('stuck', '{}', timeout => '1 hour', max_in_flight => 4);
             SELECT queue_create('fine');
             SELECT queue_register_webhook('fine', '{}');",
            receiver.url("/stuck"),
            receiver.url("/fine")
        ))
        .unwrap();
    receiver.answer("/stuck", vec![Reply::Hang]);
    for _ in 0..10 {
        enqueue(&mut client, "stuck", "{}");
    }
    eventually("four requests held open", || {
        receiver.seen("/stuck").len() == 4
    });
    let fine: Vec<i64> = (0..50)
        .map(|_| enqueue(&mut client, "fine", "{}"))
        .collect();
    eventually("every job of the other queue delivered", || {
        fine.iter()
            .all(|id| status(&mut client, *id) == "succeeded")
    });
    // still only max_in_flight of the hung queue were sent
    assert_eq!(receiver.seen("/stuck").len(), 4);
    // and another database delivers beside it
    let mut beside = database_with_hooks(&cluster, "beside", &receiver.url("/beside"), "");
    let ids: Vec<i64> = (0..50)
        .map(|_| enqueue(&mut beside, "hooks", "{}"))
        .collect();
    eventually("every job of the other database delivered", || {
        ids.iter().all(|id| status(&mut beside, *id) == "succeeded")
    });
    let processing: i64 = one(
        &mut client,
        "SELECT processing FROM queue_stats WHERE queue = 'stuck'",
        &[],
    );
    assert_eq!(processing, 4);
}

#[test]
fn an_entry_removed_from_the_allow_list_stops_delivery() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('hooks', max_attempts => 1);
             SELECT queue_register_webhook('hooks', '{}');",
            receiver.url("/in")
        ))
        .unwrap();
    let first = enqueue(&mut client, "hooks", "{}");
    eventually("delivered", || status(&mut client, first) == "succeeded");
    let database: String = one(&mut client, "SELECT current_database()::text", &[]);
    client
        .batch_execute(&format!(
            "ALTER DATABASE {database} SET queue.webhook_allow = 'https://hooks.example.com'"
        ))
        .unwrap();
    // (read again before each batch, at most a second old)
    eventually("the new list in force", || {
        let id = enqueue(&mut client, "hooks", "{}");
        eventually("an outcome", || {
            status(&mut client, id) != "pending" && status(&mut client, id) != "processing"
        });
        status(&mut client, id) == "failed"
    });
    let error: String = one(
        &mut client,
        "SELECT last_error FROM queue_failed ORDER BY id DESC LIMIT 1",
        &[],
    );
    assert_eq!(
        error,
        format!(
            "POST {} is not allowed by queue.webhook_allow",
            receiver.url("/in")
        )
    );
    let sent = receiver.seen("/in").len();
    assert!(sent >= 1);
    let id = enqueue(&mut client, "hooks", "{}");
    eventually("failed", || status(&mut client, id) == "failed");
    assert_eq!(receiver.seen("/in").len(), sent, "nothing sent");
}

#[test]
fn timeouts_and_the_other_classes_and_a_retry_after_date() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    for (queue, path, options) in [
        ("slow", "/slow", ", timeout => '1 second'"),
        ("timeout408", "/408", ""),
        ("bad", "/bad", ""),
        ("dated", "/dated", ""),
    ] {
        client
            .batch_execute(&format!(
                "SELECT queue_create('{queue}', retry_delay => '10 ms', max_attempts => 2,
                                     max_retry_delay => '1 hour');
                 SELECT queue_register_webhook('{queue}', '{}'{options});",
                receiver.url(path)
            ))
            .unwrap();
    }
    receiver.answer("/slow", vec![Reply::Hang]);
    receiver.answer("/408", vec![Reply::Status(408, Vec::new())]);
    receiver.answer("/bad", vec![Reply::Status(400, Vec::new())]);
    let date: String = one(
        &mut client,
        "SELECT to_char((now() + interval '100 seconds') AT TIME ZONE 'UTC',
                        'Dy, DD Mon YYYY HH24:MI:SS \"GMT\"')",
        &[],
    );
    receiver.answer(
        "/dated",
        vec![Reply::Status(503, vec![("Retry-After", date)])],
    );
    let slow = enqueue(&mut client, "slow", "{}");
    let timeout408 = enqueue(&mut client, "timeout408", "{}");
    let bad = enqueue(&mut client, "bad", "{}");
    let dated = enqueue(&mut client, "dated", "{}");
    let error = |client: &mut Client, id: i64| -> String {
        one(
            client,
            "SELECT last_error FROM queue_jobs WHERE id = $1",
            &[&id],
        )
    };
    // a timeout and 408 are retried, then fail after max_attempts
    eventually("slow failed", || status(&mut client, slow) == "failed");
    assert_eq!(error(&mut client, slow), "timeout after 1 s");
    assert_eq!(receiver.seen("/slow").len(), 2);
    eventually("408 failed", || status(&mut client, timeout408) == "failed");
    assert_eq!(receiver.seen("/408").len(), 2);
    // 400 fails at once
    eventually("400 failed", || status(&mut client, bad) == "failed");
    assert_eq!(receiver.seen("/bad").len(), 1);
    // Retry-After as an HTTP date
    eventually("dated waits", || status(&mut client, dated) == "pending");
    let due_in: f64 = one(
        &mut client,
        "SELECT extract(epoch FROM run_at - now())::float8 FROM queue_jobs WHERE id = $1",
        &[&dated],
    );
    assert!((60.0..=101.0).contains(&due_in), "about 100 s: {due_in}");
}

#[test]
fn drop_database_and_drop_extension_while_requests_hang() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    receiver.answer("/", vec![Reply::Hang]);
    let mut admin = cluster.connect_to("postgres");
    for name in ["hung_a", "hung_b"] {
        let url = receiver.url(&format!("/{name}"));
        let mut hung = database_with_hooks(&cluster, name, &url, ", timeout => '1 hour'");
        enqueue(&mut hung, "hooks", "{}");
    }
    eventually("both requests open", || {
        receiver.seen("/hung_a").len() == 1 && receiver.seen("/hung_b").len() == 1
    });
    // (generous limits, not timings: without them a hang fails the test
    // by its own timeout instead of hanging it)
    admin
        .batch_execute("SET statement_timeout = '60s'")
        .unwrap();
    admin.batch_execute("DROP DATABASE hung_a").unwrap();
    let mut b = cluster.connect_to("hung_b");
    b.batch_execute("SET statement_timeout = '60s'; DROP EXTENSION queue")
        .unwrap();
    let mut main = cluster.connect();
    eventually("no worker left in hung_b", || {
        one::<i64>(
            &mut main,
            "SELECT count(*) FROM queue_workers WHERE database = 'hung_b'",
            &[],
        ) == 0
    });
}

#[test]
fn a_hung_endpoint_gives_its_slot_up_to_another_database() {
    let receiver = Receiver::start();
    let cluster = Cluster::start_with(&[
        &format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port),
        "queue.max_workers = 1",
    ]);
    receiver.answer("/hung", vec![Reply::Hang]);
    let mut hung = cluster.connect();
    hung.batch_execute(&format!(
        "SELECT queue_create('hooks', lease => '1 hour');
         SELECT queue_register_webhook('hooks', '{}', timeout => '1 hour');
         SELECT queue_enqueue('hooks', '{{}}');",
        receiver.url("/hung")
    ))
    .unwrap();
    eventually("the request open", || receiver.seen("/hung").len() == 1);
    let mut other = database_with_hooks(&cluster, "other", &receiver.url("/other"), "");
    let id = enqueue(&mut other, "hooks", "{}");
    eventually("the other database served on the one slot", || {
        status(&mut other, id) == "succeeded"
    });
    // the abandoned job is ready again, its attempt as it was, and goes
    // out again once its database has the slot back, with the same id
    eventually("sent again", || receiver.seen("/hung").len() >= 2);
    let seen = receiver.seen("/hung");
    assert_eq!(seen[0].header("webhook-id"), seen[1].header("webhook-id"));
}

#[test]
fn an_immediate_stop_mid_delivery_loses_no_job() {
    let receiver = Receiver::start();
    let cluster = Cluster::start_with(&[&allow(&receiver), DURABLE]);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('bulk');
             SELECT queue_register_webhook('bulk', '{}', max_in_flight => 16);
             SELECT queue_enqueue_batch('bulk', array_fill('{{}}'::jsonb, ARRAY[10000]));",
            receiver.url("/bulk")
        ))
        .unwrap();
    eventually("delivery under way", || {
        receiver.seen("/bulk").len() >= 2_000
    });
    cluster.crash();
    cluster.start_server();
    let mut client = cluster.connect();
    eventually("every job delivered", || {
        one::<i64>(
            &mut client,
            "SELECT succeeded FROM queue_stats WHERE queue = 'bulk'",
            &[],
        ) == 10_000
    });
    let seen = receiver.seen("/bulk");
    let mut per_id = std::collections::HashMap::new();
    for s in &seen {
        let body: serde_json::Value = serde_json::from_str(&s.body).unwrap();
        let id = body["id"].as_i64().unwrap();
        let webhook_id = s.header("webhook-id").unwrap().to_string();
        per_id.entry(id).or_insert_with(Vec::new).push(webhook_id);
    }
    assert_eq!(per_id.len(), 10_000, "every job reached the endpoint");
    let repeated = per_id.values().filter(|ids| ids.len() > 1).count();
    assert!(
        repeated <= 16,
        "{repeated} jobs sent twice: more than were in flight"
    );
    assert!(per_id.values().all(|ids| ids.iter().all(|i| *i == ids[0])));
    let distinct: std::collections::HashSet<&String> = per_id.values().map(|ids| &ids[0]).collect();
    assert_eq!(
        distinct.len(),
        10_000,
        "a webhook-id of its own for every job"
    );
}

#[test]
fn https_trusts_a_private_ca_through_the_setting_alone() {
    // a CA made here, and a certificate for 127.0.0.1 that it signed
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let receiver = Receiver::start_tls(certificate.pem(), key.serialize_pem());
    let cluster = Cluster::start_with(&[&format!(
        "queue.webhook_allow = 'https://127.0.0.1:{}'",
        receiver.port
    )]);
    let ca_file = cluster.data().join("test-ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('tls', max_attempts => 1);
             SELECT queue_register_webhook('tls', 'https://127.0.0.1:{}/in');",
            receiver.port
        ))
        .unwrap();
    // not trusted by the system's store
    let refused = enqueue(&mut client, "tls", "{}");
    eventually("refused", || status(&mut client, refused) == "failed");
    let error: String = one(
        &mut client,
        "SELECT last_error FROM queue_jobs WHERE id = $1",
        &[&refused],
    );
    assert!(error.contains("certificate"), "{error}");
    assert!(receiver.seen("/in").is_empty());
    // trusted once the setting names the CA's file
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET queue.webhook_ca_file = '{}'",
            ca_file.display()
        ))
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    eventually("accepted", || {
        let id = enqueue(&mut client, "tls", "{}");
        eventually("an outcome", || {
            !["pending", "processing"].contains(&status(&mut client, id).as_str())
        });
        status(&mut client, id) == "succeeded"
    });
    assert_eq!(receiver.seen("/in").len(), 1);
}

#[test]
fn requests_of_a_queue_share_kept_alive_connections() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('kept');
             SELECT queue_register_webhook('kept', '{}', max_in_flight => 4);",
            receiver.url("/kept")
        ))
        .unwrap();
    let ids: Vec<i64> = (0..200)
        .map(|_| enqueue(&mut client, "kept", "{}"))
        .collect();
    eventually("every job delivered", || {
        ids.iter().all(|id| status(&mut client, *id) == "succeeded")
    });
    let seen = receiver.seen("/kept");
    assert_eq!(seen.len(), 200);
    let connections: std::collections::HashSet<_> = seen.iter().map(|s| s.peer).collect();
    // at most max_in_flight open at once, each kept for the next request
    // (a new connection per request would make 200)
    assert!(
        connections.len() <= 8,
        "{} connections for 200 requests",
        connections.len()
    );
}

#[test]
fn switching_the_workers_off_hands_open_requests_back_at_once() {
    let receiver = Receiver::start();
    let cluster = cluster_for(&receiver);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('held');
             SELECT queue_register_webhook('held', '{}', timeout => '1 hour');",
            receiver.url("/held")
        ))
        .unwrap();
    receiver.answer("/held", vec![Reply::Hang]);
    let ids: Vec<i64> = (0..3).map(|_| enqueue(&mut client, "held", "{}")).collect();
    eventually("three requests open", || receiver.seen("/held").len() == 3);
    let mut admin = cluster.connect_to("postgres");
    admin
        .batch_execute("ALTER SYSTEM SET queue.enabled = off")
        .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    // ready again at once, their attempt counted, not in flight until the
    // lease (an hour) expires
    eventually("the jobs pending again, no worker left", || {
        ids.iter().all(|id| status(&mut client, *id) == "pending")
            && one::<i64>(
                &mut client,
                "SELECT count(*) FROM queue_workers WHERE pid IS NOT NULL",
                &[],
            ) == 0
    });
    let attempts: Vec<i32> = ids
        .iter()
        .map(|id| one(&mut client, "SELECT attempts FROM queue_job($1)", &[id]))
        .collect();
    assert_eq!(attempts, vec![1, 1, 1]);
    receiver.answer("/held", vec![Reply::Status(200, Vec::new())]);
    admin
        .batch_execute("ALTER SYSTEM SET queue.enabled = on")
        .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    eventually("every job delivered once the workers are back", || {
        ids.iter().all(|id| status(&mut client, *id) == "succeeded")
    });
    // each job sent twice, with the same webhook-id
    let seen = receiver.seen("/held");
    assert_eq!(seen.len(), 6);
    let mut webhook_ids: Vec<&str> = seen
        .iter()
        .map(|s| s.header("webhook-id").unwrap())
        .collect();
    webhook_ids.sort();
    webhook_ids.dedup();
    assert_eq!(webhook_ids.len(), 3);
}
