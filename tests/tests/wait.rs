//! `CALL queue_wait(...)`: consumers that wait for work, woken by commits
//! and by the clock, holding no snapshot while they wait. Several real
//! connections; no test asserts a timing: a waiter "has not returned" is
//! checked while it provably waits (pg_stat_activity), and every wait that
//! should end is given a timeout far longer than the test needs.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use postgres::Client;
use queue_client_tests::{claim, complete, eventually, one, one_row, waiting_in, Cluster};

/// A wait long enough that returning by timeout would fail the test.
const LONG: &str = "60 seconds";

fn wait(client: &mut Client, queue: &str, timeout: &str) -> Result<bool, postgres::Error> {
    client
        .query_one(
            "CALL queue_wait($1, $2::text::interval, NULL)",
            &[&queue, &timeout],
        )
        .map(|row| row.get("ready"))
}

/// A waiter on its own connection; its result arrives on the receiver.
fn waiter(
    cluster: &Cluster,
    queue: &str,
    timeout: &str,
) -> mpsc::Receiver<Result<bool, postgres::Error>> {
    let (tx, rx) = mpsc::channel();
    let mut client = cluster.connect();
    let (queue, timeout) = (queue.to_string(), timeout.to_string());
    thread::spawn(move || {
        let _ = tx.send(wait(&mut client, &queue, &timeout));
    });
    rx
}

/// How many backends wait in queue_wait now.
fn waiting(client: &mut Client) -> i64 {
    waiting_in(client, "queue_wait")
}

fn until_waiting(client: &mut Client, n: i64) {
    eventually(&format!("{n} waiters"), || waiting(client) == n);
}

/// The waiter has not returned: it still waits, and nothing arrived.
fn still_waiting(client: &mut Client, rx: &mpsc::Receiver<Result<bool, postgres::Error>>) {
    // (a look at the queue takes a moment: let a wrong wake-up show)
    thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "the waiter returned");
    assert_eq!(waiting(client), 1);
}

fn ready(rx: mpsc::Receiver<Result<bool, postgres::Error>>) -> bool {
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the waiter returns")
        .expect("the wait succeeds")
}

#[test]
fn a_commit_wakes_a_waiter_and_an_uncommitted_or_rolled_back_enqueue_does_not() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('w')").unwrap();

    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    let mut producer = cluster.connect();
    producer
        .batch_execute("BEGIN; SELECT queue_enqueue('w', '{}')")
        .unwrap();
    still_waiting(&mut admin, &rx);
    producer.batch_execute("ROLLBACK").unwrap();
    still_waiting(&mut admin, &rx);
    producer
        .batch_execute("BEGIN; SELECT queue_enqueue('w', '{}')")
        .unwrap();
    still_waiting(&mut admin, &rx);
    producer.batch_execute("COMMIT").unwrap();
    assert!(ready(rx));
    assert_eq!(claim(&mut admin, "w", 10).len(), 1);

    // a job already there: at once; none: false after the timeout
    admin
        .batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    assert!(wait(&mut admin, "w", LONG).unwrap());
    claim(&mut admin, "w", 10);
    assert!(!wait(&mut admin, "w", "200 milliseconds").unwrap());
    assert!(!wait(&mut admin, "w", "0").unwrap());
    // the form without a timeout (30 seconds)
    admin
        .batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    let row = admin.query_one("CALL queue_wait('w', NULL)", &[]).unwrap();
    assert!(row.get::<_, bool>("ready"));
}

#[test]
fn a_transaction_that_enqueues_into_forty_queues_wakes_the_waiters_of_each() {
    // Enqueues into 40 queues and a completion in one transaction: its
    // notes are kept per queue, and its commit wakes a waiter of each.
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('many' || g) FROM generate_series(1, 40) g;
             SELECT queue_create('done');
             SELECT queue_enqueue('done', '{}');",
        )
        .unwrap();
    let job = claim(&mut admin, "done", 1).remove(0);
    let first = waiter(&cluster, "many1", LONG);
    let last = waiter(&cluster, "many40", LONG);
    until_waiting(&mut admin, 2);
    admin
        .batch_execute(&format!(
            "BEGIN;
             SELECT queue_enqueue('many' || g, '{{}}') FROM generate_series(1, 40) g;
             SELECT queue_enqueue('many' || g, '{{}}') FROM generate_series(1, 40) g;
             SELECT queue_complete({}, '{}');
             SELECT queue_complete_batch(ARRAY[{}]::bigint[], ARRAY['{}']::uuid[]);
             COMMIT;",
            job.0, job.1, job.0, job.1
        ))
        .unwrap();
    assert!(ready(first));
    assert!(ready(last));
    let enqueued: i64 = one(
        &mut admin,
        "SELECT count(*) FROM queue_jobs WHERE queue LIKE 'many%'",
        &[],
    );
    assert_eq!(enqueued, 80);
}

#[test]
fn retry_resume_a_failed_attempt_an_expired_lease_and_run_at_wake_waiters() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('w', max_attempts => 1);
             SELECT queue_create('r', max_attempts => 3, retry_delay => '0');",
        )
        .unwrap();

    // queue_retry of a dead letter
    admin
        .batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    admin
        .batch_execute("SELECT queue_fail(id, lease, 'broken') FROM queue_claim('w', 'test', 1)")
        .unwrap();
    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    still_waiting(&mut admin, &rx);
    admin
        .batch_execute("SELECT queue_retry(id) FROM queue_failed WHERE queue = 'w'")
        .unwrap();
    assert!(ready(rx));
    claim(&mut admin, "w", 10);

    // queue_resume of a paused queue with a job
    admin
        .batch_execute("SELECT queue_pause('w'); SELECT queue_enqueue('w', '{}')")
        .unwrap();
    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    still_waiting(&mut admin, &rx);
    admin.batch_execute("SELECT queue_resume('w')").unwrap();
    assert!(ready(rx));
    claim(&mut admin, "w", 10);

    // a failed attempt retried at once (a job given back)
    admin
        .batch_execute("SELECT queue_enqueue('r', '{}')")
        .unwrap();
    let held = claim(&mut admin, "r", 1);
    let rx = waiter(&cluster, "r", LONG);
    until_waiting(&mut admin, 1);
    still_waiting(&mut admin, &rx);
    let status: String = one(
        &mut admin,
        "SELECT queue_fail($1, $2::text::uuid, 'later', retry_in => '0')",
        &[&held[0].0, &held[0].1],
    );
    assert_eq!(status, "pending");
    assert!(ready(rx));
    claim(&mut admin, "r", 10);

    // a lease that expires, and a job due at run_at, by the clock alone
    admin
        .batch_execute("SELECT queue_enqueue('r', '{}')")
        .unwrap();
    admin
        .batch_execute("SELECT FROM queue_claim('r', 'test', 1, lease => '1 second')")
        .unwrap();
    assert!(wait(&mut admin, "r", LONG).unwrap());
    assert_eq!(claim(&mut admin, "r", 10).len(), 1, "the expired job");
    admin
        .batch_execute("SELECT queue_enqueue('r', '{}', delay => '1 second')")
        .unwrap();
    assert!(wait(&mut admin, "r", LONG).unwrap());
    assert_eq!(claim(&mut admin, "r", 10).len(), 1, "the job due at run_at");
    // a job due later than the timeout: false
    admin
        .batch_execute("SELECT queue_enqueue('r', '{}', delay => '1 hour')")
        .unwrap();
    assert!(!wait(&mut admin, "r", "300 milliseconds").unwrap());
}

#[test]
fn a_finished_job_frees_an_ordered_group_and_a_limit_for_a_waiter() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('o', ordered => true);
             SELECT queue_enqueue('o', '{}', group_key => 'g');
             SELECT queue_enqueue('o', '{}', group_key => 'g');
             SELECT queue_create('l', max_in_flight => 1);
             SELECT queue_enqueue('l', '{}');
             SELECT queue_enqueue('l', '{}');",
        )
        .unwrap();
    for queue in ["o", "l"] {
        let first = claim(&mut admin, queue, 10);
        assert_eq!(first.len(), 1, "one at a time in {queue}");
        let rx = waiter(&cluster, queue, LONG);
        until_waiting(&mut admin, 1);
        still_waiting(&mut admin, &rx);
        let done = complete(&mut admin, first[0].0, &first[0].1);
        assert!(done);
        assert!(ready(rx), "{queue}");
        assert_eq!(claim(&mut admin, queue, 10).len(), 1);
    }
}

/// A job that ends wakes a waiter of its own queue held back by a limit,
/// never one of another queue: queues `a` and `b` at `max_in_flight` 1,
/// each with a job in flight and one more pending, ten waiters on `b` and
/// one on `a`, registered first, among the others and last (the order of
/// the slots decided which one a wake-up found first).
#[test]
fn a_finished_job_wakes_a_held_waiter_of_its_own_queue_only() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    for (round, position) in [0, 5, 10].into_iter().enumerate() {
        let (a, b) = (format!("a{round}"), format!("b{round}"));
        admin
            .execute(
                "SELECT queue_create(q, max_in_flight => 1), queue_enqueue(q, '{}'),
                        queue_enqueue(q, '{}')
                   FROM unnest(ARRAY[$1, $2]) q",
                &[&a, &b],
            )
            .unwrap();
        let in_flight_a = claim(&mut admin, &a, 10);
        assert_eq!(in_flight_a.len(), 1);
        assert_eq!(claim(&mut admin, &b, 10).len(), 1);
        let mut others = Vec::new();
        let mut mine = None;
        for n in 0..=10 {
            if n == position {
                mine = Some(waiter(&cluster, &a, LONG));
            } else {
                others.push(waiter(&cluster, &b, LONG));
            }
            until_waiting(&mut admin, n as i64 + 1);
        }
        let mine = mine.unwrap();
        let done = complete(&mut admin, in_flight_a[0].0, &in_flight_a[0].1);
        assert!(done);
        assert!(ready(mine), "round {round}: a's waiter is woken, ready");
        // b's waiters still wait, every one: then they are let go
        until_waiting(&mut admin, 10);
        assert!(others.iter().all(|rx| rx.try_recv().is_err()));
        admin
            .batch_execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
                  WHERE query LIKE 'CALL queue_wait%' AND wait_event_type = 'Extension'",
            )
            .unwrap();
        for rx in others {
            let ended = rx.recv_timeout(Duration::from_secs(120)).expect("returns");
            assert!(ended.is_err(), "b's waiters were cancelled, not woken");
        }
    }
}

#[test]
fn refusals_and_the_waits_of_a_dropped_queue_or_one_given_a_sender() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('w');
             SELECT queue_create('gone');
             SELECT queue_create('pushed');
             CREATE FUNCTION deliver(job jsonb) RETURNS void LANGUAGE sql AS '';",
        )
        .unwrap();
    let code = |r: Result<bool, postgres::Error>| r.unwrap_err().code().unwrap().code().to_string();
    assert_eq!(code(wait(&mut admin, "w", "2 hours")), "22023");
    assert_eq!(code(wait(&mut admin, "w", "-1 second")), "22023");
    assert_eq!(code(wait(&mut admin, "nope", "1 second")), "42704");
    let err = admin
        .batch_execute("BEGIN; CALL queue_wait('w', '1 second', NULL)")
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "25001");
    admin.batch_execute("ROLLBACK").unwrap();

    let dropped = waiter(&cluster, "gone", LONG);
    let given = waiter(&cluster, "pushed", LONG);
    until_waiting(&mut admin, 2);
    admin
        .batch_execute(
            "SELECT queue_drop('gone');
             SELECT queue_register_sender('pushed', 'deliver(jsonb)');",
        )
        .unwrap();
    let ended = |rx: mpsc::Receiver<Result<bool, postgres::Error>>| {
        code(rx.recv_timeout(Duration::from_secs(120)).unwrap())
    };
    assert_eq!(ended(dropped), "42704");
    assert_eq!(ended(given), "55000");
    assert_eq!(code(wait(&mut admin, "pushed", "1 second")), "55000");
}

#[test]
fn cancel_statement_timeout_and_termination_end_a_wait() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('w')").unwrap();
    let pid_of_waiter = |admin: &mut Client| -> i32 {
        one(
            admin,
            "SELECT pid FROM pg_stat_activity
              WHERE query LIKE 'CALL queue_wait%' AND wait_event_type = 'Extension'",
            &[],
        )
    };
    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    let pid = pid_of_waiter(&mut admin);
    admin
        .execute("SELECT pg_cancel_backend($1)", &[&pid])
        .unwrap();
    let err = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "57014");

    let mut timed = cluster.connect();
    timed
        .batch_execute("SET statement_timeout = '300ms'")
        .unwrap();
    let err = wait(&mut timed, "w", LONG).unwrap_err();
    assert_eq!(err.code().unwrap().code(), "57014");
    // the session goes on, and so does the next wait
    timed.batch_execute("RESET statement_timeout").unwrap();
    assert!(!wait(&mut timed, "w", "0").unwrap());

    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    let pid = pid_of_waiter(&mut admin);
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());
    eventually("the terminated waiter gone", || waiting(&mut admin) == 0);
    // its slot is free: a new waiter is woken as usual
    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    admin
        .batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    assert!(ready(rx));
}

#[test]
fn drop_database_with_force_and_a_server_shutdown_end_waits() {
    let cluster = Cluster::start();
    cluster.create_database(
        "tenant",
        "CREATE EXTENSION queue; SELECT queue_create('w');",
    );
    let mut admin = cluster.connect_to("postgres");
    let (tx, rx) = mpsc::channel();
    let mut client = cluster.connect_to("tenant");
    thread::spawn(move || {
        let _ = tx.send(wait(&mut client, "w", LONG));
    });
    until_waiting(&mut admin, 1);
    admin
        .batch_execute("DROP DATABASE tenant WITH (FORCE)")
        .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());

    let mut other = cluster.connect();
    other.batch_execute("SELECT queue_create('w')").unwrap();
    let rx = waiter(&cluster, "w", LONG);
    until_waiting(&mut admin, 1);
    drop(admin);
    drop(other);
    // a fast shutdown ends the waiting session and completes
    cluster.stop_server();
    assert!(rx.recv_timeout(Duration::from_secs(60)).unwrap().is_err());
}

#[test]
fn a_hundred_waiters_hold_no_snapshot_and_no_lock() {
    let cluster = Cluster::start_with(&["max_connections = 130"]);
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('w')").unwrap();
    let waiters: Vec<_> = (0..100).map(|_| waiter(&cluster, "w", LONG)).collect();
    until_waiting(&mut admin, 100);
    let (with_xmin, with_xid): (i64, i64) = one_row(
        &mut admin,
        "SELECT count(backend_xmin), count(backend_xid) FROM pg_stat_activity
          WHERE query LIKE 'CALL queue_wait%'",
        &[],
    );
    assert_eq!((with_xmin, with_xid), (0, 0));
    let locks: i64 = one(
        &mut admin,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
          WHERE a.query LIKE 'CALL queue_wait%' AND l.locktype = 'relation'",
        &[],
    );
    assert_eq!(locks, 0);
    // vacuum removes what a commit after the waits began left dead (read
    // from VACUUM VERBOSE's report: the statistics may count the deletes
    // after vacuum's own figures)
    admin
        .batch_execute(
            "CREATE TABLE churn (n int) WITH (autovacuum_enabled = off);
             INSERT INTO churn SELECT generate_series(1, 1000);
             DELETE FROM churn;",
        )
        .unwrap();
    let report = Arc::new(Mutex::new(String::new()));
    let mut config = cluster.config(queue_client_tests::DB);
    let seen = report.clone();
    config.notice_callback(move |notice| {
        let mut report = seen.lock().unwrap();
        report.push_str(notice.message());
        report.push('\n');
    });
    let mut vacuum = config.connect(postgres::NoTls).unwrap();
    vacuum.batch_execute("VACUUM (VERBOSE) churn").unwrap();
    let report = report.lock().unwrap().clone();
    assert!(
        report.contains("1000 removed") && report.contains("0 are dead but not yet removable"),
        "the waiters held back vacuum:\n{report}"
    );
    // every waiter comes back: 100 jobs, one for each
    admin
        .batch_execute(
            "SELECT queue_enqueue_batch('w', (SELECT array_agg('{}'::jsonb)
                                              FROM generate_series(1, 100)))",
        )
        .unwrap();
    for rx in waiters {
        assert!(ready(rx));
    }
}

#[test]
fn a_herd_of_two_hundred_waiters_and_one_job_all_return_and_one_claims_it() {
    let cluster = Cluster::start_with(&["max_connections = 230"]);
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('w')").unwrap();
    let (tx, rx) = mpsc::channel();
    for _ in 0..200 {
        let mut client = cluster.connect();
        let tx = tx.clone();
        thread::spawn(move || {
            let ready = wait(&mut client, "w", "10 seconds").unwrap();
            let claimed = claim(&mut client, "w", 1).len();
            tx.send((ready, claimed)).unwrap();
        });
    }
    drop(tx);
    until_waiting(&mut admin, 200);
    admin
        .batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    let results: Vec<(bool, usize)> = rx.iter().collect();
    assert_eq!(results.len(), 200, "every waiter returned");
    let claimed: usize = results.iter().map(|r| r.1).sum();
    assert_eq!(claimed, 1);
    let woken = results.iter().filter(|r| r.0).count();
    println!("{woken} of 200 waiters returned ready for 1 job");
    assert_eq!(woken, 1, "one waiter woken for one job");
}

/// A DBA's routine while consumers wait (they hold no lock and no
/// snapshot, so nothing waits for them): REINDEX CONCURRENTLY and VACUUM
/// FULL of the jobs' tables and a pg_dump end within a lock_timeout, and
/// the waiters are still woken after.
#[test]
fn reindex_vacuum_full_and_pg_dump_do_not_wait_for_waiting_consumers() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('w')").unwrap();
    let waiters: Vec<_> = (0..3).map(|_| waiter(&cluster, "w", LONG)).collect();
    until_waiting(&mut admin, 3);
    admin.batch_execute("SET lock_timeout = '20s'").unwrap();
    for statement in [
        "REINDEX TABLE CONCURRENTLY queue_live_0",
        "REINDEX TABLE CONCURRENTLY queue_live_1",
        "VACUUM FULL queue_live_0",
        "VACUUM FULL queue_live_1",
    ] {
        // (each alone: REINDEX CONCURRENTLY refuses a transaction block)
        admin.batch_execute(statement).unwrap();
    }
    let dump = cluster.socket_dir().join("while-waiting.dump");
    cluster.run_client(
        "pg_dump",
        &["-Fc", "-f", dump.to_str().unwrap(), queue_client_tests::DB],
    );
    assert_eq!(waiting(&mut admin), 3, "the waiters still wait");
    admin
        .batch_execute("SELECT queue_enqueue_batch('w', ARRAY['{}', '{}', '{}']::jsonb[])")
        .unwrap();
    for rx in waiters {
        assert!(ready(rx));
    }
}

/// Consumers waiting in more tenant databases than there are worker slots
/// (the default 4): waiters need no worker, and each database's commit
/// wakes its own.
#[test]
fn waiters_in_more_tenant_databases_than_worker_slots_are_each_woken() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect_to("postgres");
    let tenants: Vec<String> = (1..=6).map(|n| format!("tenant{n}")).collect();
    let mut waits = Vec::new();
    for tenant in &tenants {
        cluster.create_database(
            tenant,
            "CREATE EXTENSION queue; SELECT queue_create('jobs');",
        );
        let (tx, rx) = mpsc::channel();
        let mut client = cluster.connect_to(tenant);
        thread::spawn(move || {
            let _ = tx.send(wait(&mut client, "jobs", LONG));
        });
        waits.push(rx);
    }
    until_waiting(&mut admin, 6);
    for tenant in &tenants {
        cluster
            .connect_to(tenant)
            .batch_execute("SELECT queue_enqueue('jobs', '{}')")
            .unwrap();
    }
    for rx in waits {
        assert!(ready(rx));
    }
}
