//! `CALL queue_await(id, timeout, NULL, NULL)`: sessions that wait for one
//! job's end and its result, woken by the commit that ends it, holding no
//! snapshot while they wait; and the results that senders and webhooks
//! keep. No test asserts a timing: an awaiter "has not returned" is checked
//! while it provably waits (pg_stat_activity), and every wait that should
//! end is given a timeout far longer than the test needs, so that one
//! ended by the clock says `processing` or `pending`, not the job's end.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use postgres::Client;
use queue_client_tests::receiver::{Receiver, Reply};
use queue_client_tests::{claim, eventually, one, one_row, waiting_in, Cluster};
use serde_json::{json, Value};

/// A wait long enough that returning by timeout would fail the test.
const LONG: &str = "120 seconds";
const WOKEN: Duration = Duration::from_secs(60);

type Outcome = Result<(Option<String>, Option<Value>), postgres::Error>;

fn await_job(client: &mut Client, id: i64, timeout: &str) -> Outcome {
    client
        .query_one(
            "CALL queue_await($1, $2::text::interval, NULL, NULL)",
            &[&id, &timeout],
        )
        .map(|row| (row.get("status"), row.get("result")))
}

/// An awaiter on its own connection; its outcome arrives on the receiver.
fn awaiter(cluster: &Cluster, db: &str, id: i64) -> mpsc::Receiver<Outcome> {
    let (tx, rx) = mpsc::channel();
    let mut client = cluster.connect_to(db);
    thread::spawn(move || {
        let _ = tx.send(await_job(&mut client, id, LONG));
    });
    rx
}

/// How many backends wait in queue_await now.
fn awaiting(client: &mut Client) -> i64 {
    waiting_in(client, "queue_await")
}

fn until_awaiting(client: &mut Client, n: i64) {
    eventually(&format!("{n} awaiters"), || awaiting(client) == n);
}

/// What an awaiter returned: within WOKEN, well before its own timeout
/// (LONG), so that a wait the clock ended fails the test.
fn outcome(rx: mpsc::Receiver<Outcome>) -> (Option<String>, Option<Value>) {
    rx.recv_timeout(WOKEN)
        .expect("the awaiter returns, woken")
        .expect("the await succeeds")
}

fn enqueue(client: &mut Client, queue: &str) -> i64 {
    one(client, "SELECT queue_enqueue($1, '{}')", &[&queue])
}

#[test]
fn the_commit_that_ends_the_job_wakes_its_awaiter_and_no_other_does() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("SELECT queue_create('q', lease => '1 hour')")
        .unwrap();
    let awaited = enqueue(&mut admin, "q");
    let other = enqueue(&mut admin, "q");
    let jobs = claim(&mut admin, "q", 2);
    let lease = |id: i64| jobs.iter().find(|j| j.0 == id).unwrap().1.clone();
    let rx = awaiter(&cluster, "queue_test", awaited);
    until_awaiting(&mut admin, 1);
    // another job's end, an uncommitted end and a rolled-back one: it waits
    let done: bool = one(
        &mut admin,
        "SELECT queue_complete($1, $2::text::uuid, '{\"other\": true}')",
        &[&other, &lease(other)],
    );
    assert!(done);
    let mut completer = cluster.connect();
    for end in ["ROLLBACK", "COMMIT"] {
        let mut tx = completer.transaction().unwrap();
        let done: bool = one(
            &mut tx,
            "SELECT queue_complete($1, $2::text::uuid, '{\"thumbnail\": \"t.png\"}')",
            &[&awaited, &lease(awaited)],
        );
        assert!(done);
        // (it still waits while the end is not committed)
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(awaiting(&mut admin), 1, "before {end}");
        if end == "ROLLBACK" {
            tx.rollback().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(awaiting(&mut admin), 1, "after a rollback");
        } else {
            tx.commit().unwrap();
        }
    }
    assert_eq!(
        outcome(rx),
        (
            Some("succeeded".into()),
            Some(json!({"thumbnail": "t.png"}))
        )
    );
}

/// `CALL queue_await(queue_enqueue(...), ...)`: the CALL commits the
/// enqueue of its argument before it waits, so that a consumer on another
/// connection sees the job, completes it, and wakes the call.
#[test]
fn one_call_enqueues_the_job_it_awaits_and_a_consumer_ends_it() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('q')").unwrap();
    let (tx, rx) = mpsc::channel();
    let mut client = cluster.connect();
    thread::spawn(move || {
        let outcome = client
            .query_one(
                &format!(
                    "CALL queue_await(queue_enqueue('q', '{{\"n\": 1}}'), '{LONG}', NULL, NULL)"
                ),
                &[],
            )
            .map(|row| (row.get("status"), row.get("result")));
        let _ = tx.send(outcome);
    });
    until_awaiting(&mut admin, 1);
    let jobs = claim(&mut admin, "q", 1);
    assert_eq!(jobs.len(), 1, "the job was committed before the wait");
    let done: bool = one(
        &mut admin,
        "SELECT queue_complete($1, $2::text::uuid, '{\"answer\": 42}')",
        &[&jobs[0].0, &jobs[0].1],
    );
    assert!(done);
    assert_eq!(
        outcome(rx),
        (Some("succeeded".into()), Some(json!({"answer": 42})))
    );
}

#[test]
fn a_job_that_fails_is_cancelled_purged_or_delivered_ends_its_wait() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('q', max_attempts => 2, retry_delay => '0', lease => '1 hour');
             SELECT queue_create('short', max_attempts => 1, lease => '200 milliseconds');
             SELECT queue_create('gone');
             CREATE FUNCTION render(job jsonb) RETURNS jsonb LANGUAGE sql
                 AS $$ SELECT jsonb_build_object('rendered', job->'id') $$;
             SELECT queue_create('pushed');",
        )
        .unwrap();
    // a failed attempt that is retried is no end; the second, its last, is
    let failing = enqueue(&mut admin, "q");
    let rx = awaiter(&cluster, "queue_test", failing);
    until_awaiting(&mut admin, 1);
    for attempt in 1..=2 {
        let job = claim(&mut admin, "q", 1).remove(0);
        admin
            .execute(
                "SELECT queue_fail($1, $2::text::uuid, 'broken')",
                &[&job.0, &job.1],
            )
            .unwrap();
        if attempt == 1 {
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(awaiting(&mut admin), 1, "a retry is no end");
        }
    }
    assert_eq!(outcome(rx), (Some("failed".into()), None));
    // cancelled, purged (no longer there), an expired last lease
    let cancelled = enqueue(&mut admin, "q");
    let purged = enqueue(&mut admin, "gone");
    let expired = enqueue(&mut admin, "short");
    // (under the queue's lease of 200 ms)
    admin
        .batch_execute("SELECT count(*) FROM queue_claim('short')")
        .unwrap();
    let rxs: Vec<_> = [cancelled, purged, expired]
        .iter()
        .map(|id| awaiter(&cluster, "queue_test", *id))
        .collect();
    until_awaiting(&mut admin, 3);
    admin
        .execute("SELECT queue_cancel($1)", &[&cancelled])
        .unwrap();
    admin.batch_execute("SELECT queue_purge('gone')").unwrap();
    let mut rxs = rxs.into_iter();
    assert_eq!(
        outcome(rxs.next().unwrap()),
        (Some("cancelled".into()), None)
    );
    assert_eq!(outcome(rxs.next().unwrap()), (None, None));
    // (a last lease expired: buried by the worker's upkeep, every second
    // while it serves the database, or by its own function)
    eventually("the lease to expire", || {
        one::<i64>(&mut admin, "SELECT queue_bury_expired()", &[]) == 1 || awaiting(&mut admin) == 0
    });
    assert_eq!(outcome(rxs.next().unwrap()), (Some("failed".into()), None));
    // delivered by the worker, with its sender's result
    let delivered = enqueue(&mut admin, "pushed");
    let rx = awaiter(&cluster, "queue_test", delivered);
    until_awaiting(&mut admin, 1);
    admin
        .batch_execute("SELECT queue_register_sender('pushed', 'render(jsonb)')")
        .unwrap();
    assert_eq!(
        outcome(rx),
        (
            Some("succeeded".into()),
            Some(json!({"rendered": delivered}))
        )
    );
}

#[test]
fn two_hundred_awaiters_of_a_batch_all_return_woken_and_hold_no_snapshot() {
    let cluster = Cluster::start_with(&["max_connections = 250"]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('q', lease => '1 hour');
             SELECT queue_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[200]));",
        )
        .unwrap();
    let jobs = claim(&mut admin, "q", 200);
    let rxs: Vec<_> = jobs
        .iter()
        .map(|(id, _)| awaiter(&cluster, "queue_test", *id))
        .collect();
    until_awaiting(&mut admin, 200);
    let (xmin, xid, locks): (i64, i64, i64) = one_row(
        &mut admin,
        "SELECT count(backend_xmin), count(backend_xid),
                (SELECT count(*) FROM pg_locks l
                  WHERE l.pid IN (SELECT pid FROM pg_stat_activity
                                   WHERE query LIKE 'CALL queue_await%')
                    AND l.locktype = 'relation')
           FROM pg_stat_activity
          WHERE query LIKE 'CALL queue_await%' AND wait_event_type = 'Extension'",
        &[],
    );
    assert_eq!(
        (xmin, xid, locks),
        (0, 0, 0),
        "no snapshot, id or lock held"
    );
    // one batch completes them all, each with its own result
    let ids: Vec<i64> = jobs.iter().map(|j| j.0).collect();
    let leases: Vec<String> = jobs.iter().map(|j| j.1.clone()).collect();
    admin
        .execute(
            "SELECT queue_complete_batch($1, $2::text[]::uuid[],
                    (SELECT array_agg(jsonb_build_object('n', i) ORDER BY o)
                       FROM unnest($1::bigint[]) WITH ORDINALITY u(i, o)))",
            &[&ids, &leases],
        )
        .unwrap();
    for (rx, id) in rxs.into_iter().zip(ids) {
        assert_eq!(
            outcome(rx),
            (Some("succeeded".into()), Some(json!({ "n": id }))),
            "job {id}: woken by the commit, not by its timeout"
        );
    }
}

#[test]
fn cancel_timeout_termination_drop_database_and_shutdown_end_an_await() {
    let cluster = Cluster::start();
    cluster.create_database(
        "tenant",
        "CREATE EXTENSION queue; SELECT queue_create('q'); SELECT queue_enqueue('q', '{}');",
    );
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('q')").unwrap();
    let job = enqueue(&mut admin, "q");
    let pid_of_awaiter = |admin: &mut Client| -> i32 {
        one(
            admin,
            "SELECT pid FROM pg_stat_activity
              WHERE query LIKE 'CALL queue_await%' AND wait_event_type = 'Extension'",
            &[],
        )
    };
    let code = |rx: mpsc::Receiver<Outcome>| -> Option<String> {
        let err = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap()
            .unwrap_err();
        err.code().map(|c| c.code().to_string())
    };
    let rx = awaiter(&cluster, "queue_test", job);
    until_awaiting(&mut admin, 1);
    let pid = pid_of_awaiter(&mut admin);
    admin
        .execute("SELECT pg_cancel_backend($1)", &[&pid])
        .unwrap();
    assert_eq!(code(rx), Some("57014".into()));

    let mut timed = cluster.connect();
    timed
        .batch_execute("SET statement_timeout = '300ms'")
        .unwrap();
    let err = await_job(&mut timed, job, LONG).unwrap_err();
    assert_eq!(err.code().unwrap().code(), "57014");
    timed.batch_execute("RESET statement_timeout").unwrap();
    assert_eq!(
        await_job(&mut timed, job, "0").unwrap(),
        (Some("pending".into()), None)
    );

    let rx = awaiter(&cluster, "queue_test", job);
    until_awaiting(&mut admin, 1);
    let pid = pid_of_awaiter(&mut admin);
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());
    eventually("the terminated awaiter gone", || awaiting(&mut admin) == 0);
    // its slot is free: a new awaiter is woken as usual
    let rx = awaiter(&cluster, "queue_test", job);
    until_awaiting(&mut admin, 1);
    admin.execute("SELECT queue_cancel($1)", &[&job]).unwrap();
    assert_eq!(outcome(rx), (Some("cancelled".into()), None));

    let mut postgres = cluster.connect_to("postgres");
    let tenant_job: i64 = one(
        &mut cluster.connect_to("tenant"),
        "SELECT max(id) FROM queue_jobs",
        &[],
    );
    let rx = awaiter(&cluster, "tenant", tenant_job);
    until_awaiting(&mut admin, 1);
    postgres
        .batch_execute("DROP DATABASE tenant WITH (FORCE)")
        .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());

    let job = enqueue(&mut admin, "q");
    let rx = awaiter(&cluster, "queue_test", job);
    until_awaiting(&mut admin, 1);
    drop((admin, timed, postgres));
    // a fast shutdown ends the awaiting session and completes
    cluster.stop_server();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());
}

#[test]
fn webhooks_keep_the_status_and_body_of_their_replies_as_results() {
    let receiver = Receiver::start();
    let cluster = Cluster::start_with(&[&format!(
        "queue.webhook_allow = 'http://127.0.0.1:{}'",
        receiver.port
    )]);
    let mut admin = cluster.connect();
    let big = "x".repeat(100_000);
    receiver.answer(
        "/json",
        vec![Reply::Body(
            200,
            r#"{"n": 12345678901234567890, "ok": true}"#.into(),
        )],
    );
    receiver.answer("/text", vec![Reply::Body(201, "accepted".into())]);
    receiver.answer("/big", vec![Reply::Body(200, big.clone())]);
    receiver.answer("/none", vec![Reply::Status(204, Vec::new())]);
    let mut awaited = Vec::new();
    for path in ["json", "text", "big", "none"] {
        admin
            .batch_execute(&format!(
                "SELECT queue_create('{path}');
                 SELECT queue_register_webhook('{path}', '{}');",
                receiver.url(&format!("/{path}"))
            ))
            .unwrap();
        awaited.push(enqueue(&mut admin, path));
    }
    let results: Vec<(Option<String>, Option<Value>)> = awaited
        .iter()
        .map(|id| await_job(&mut admin, *id, LONG).unwrap())
        .collect();
    let succeeded = Some("succeeded".to_string());
    // (the number kept as it came: jsonb's numeric, not a float)
    let exact: String = one(
        &mut admin,
        "SELECT result->'body'->>'n' FROM queue_jobs WHERE id = $1",
        &[&awaited[0]],
    );
    assert_eq!(exact, "12345678901234567890");
    assert_eq!(results[0].0, succeeded);
    assert_eq!(results[0].1.as_ref().unwrap()["body"]["ok"], json!(true));
    assert_eq!(
        results[1],
        (
            succeeded.clone(),
            Some(json!({"status": 201, "body": "accepted"}))
        )
    );
    assert_eq!(
        results[2],
        (
            succeeded.clone(),
            Some(json!({"status": 200, "body": big[..64 * 1024], "truncated": true}))
        )
    );
    assert_eq!(
        results[3],
        (succeeded, Some(json!({"status": 204, "body": ""})))
    );
}

#[test]
fn without_the_preload_an_await_refuses_with_55000() {
    let cluster = Cluster::start_with(&["shared_preload_libraries = ''"]);
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('q')").unwrap();
    let job = enqueue(&mut admin, "q");
    let err = await_job(&mut admin, job, "1 second").unwrap_err();
    assert_eq!(err.code().unwrap().code(), "55000");
}
