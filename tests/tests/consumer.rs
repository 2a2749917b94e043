//! The example consumer loop of examples/consumer, run against a real
//! cluster, so that the example stays true: every job ends the way its
//! handler said, failed attempts are retried by the queue's policy, and a
//! job that outlives its lease keeps it by extending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use queue_client_tests::{one, Cluster};
use queue_consumer_example::{Consumer, Outcome};

#[test]
fn the_example_consumer_completes_retries_and_fails_by_the_queue_policy() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('mail', max_attempts => 3, retry_delay => '0');
             SELECT queue_enqueue_batch('mail',
                 (SELECT array_agg(jsonb_build_object('n', n)) FROM generate_series(1, 30) n));",
        )
        .unwrap();
    let mut consumer = Consumer::new("mail", "example");
    consumer.idle = Duration::from_millis(50);
    let total = consumer
        .run(
            &mut cluster.connect(),
            |job, _lease| {
                let payload: serde_json::Value = serde_json::from_str(&job.payload).unwrap();
                match payload["n"].as_i64().unwrap() % 10 {
                    0 => Outcome::Fail {
                        error: "no such address".into(),
                    },
                    3 if job.attempt == 1 => Outcome::Retry {
                        error: "timeout".into(),
                        retry_in: None,
                    },
                    _ => Outcome::Done,
                }
            },
            |round| round.claimed > 0,
        )
        .unwrap();
    assert_eq!(
        (
            total.claimed,
            total.completed,
            total.retried,
            total.failed,
            total.lost
        ),
        (33, 27, 3, 3, 0)
    );
    let jobs = admin
        .query(
            "SELECT (payload->>'n')::int, status, attempts, last_error
               FROM queue_jobs WHERE queue = 'mail' ORDER BY id",
            &[],
        )
        .unwrap();
    assert_eq!(jobs.len(), 30);
    for row in jobs {
        let (n, status, attempts): (i32, String, i32) = (row.get(0), row.get(1), row.get(2));
        let last_error: Option<String> = row.get(3);
        let want = match n % 10 {
            0 => ("failed", 1, Some("no such address")),
            3 => ("succeeded", 2, Some("timeout")),
            _ => ("succeeded", 1, None),
        };
        assert_eq!(
            (status.as_str(), attempts, last_error.as_deref()),
            want,
            "job {n}"
        );
    }
}

/// A job that runs for 2.5 s under a 1 s lease keeps it by extending: a
/// second connection trying to claim all along never gets it, and the
/// completion at the end still holds the lease.
#[test]
fn the_example_consumer_keeps_a_long_job_by_extending_its_lease() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('long', lease => '1 second');
             SELECT queue_enqueue('long', '{\"work_ms\": 2500}');",
        )
        .unwrap();
    let (running, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let thief = {
        let mut client = cluster.connect();
        let (running, stop) = (running.clone(), stop.clone());
        thread::spawn(move || {
            let mut stolen = 0;
            while !running.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(10));
            }
            while !stop.load(Ordering::SeqCst) {
                stolen += client
                    .query("SELECT id FROM queue_claim('long', 'thief')", &[])
                    .unwrap()
                    .len();
                thread::sleep(Duration::from_millis(50));
            }
            stolen
        })
    };
    let mut extensions = 0;
    let round = Consumer::new("long", "example")
        .run_once(&mut cluster.connect(), |_job, lease| {
            running.store(true, Ordering::SeqCst);
            for _ in 0..10 {
                thread::sleep(Duration::from_millis(250));
                assert!(lease.extend(Duration::from_secs(1)).unwrap(), "lease held");
                extensions += 1;
            }
            Outcome::Done
        })
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    assert_eq!(thief.join().unwrap(), 0, "the job was claimed while it ran");
    assert_eq!(extensions, 10);
    assert_eq!((round.claimed, round.completed, round.lost), (1, 1, 0));
    let status: String = one(
        &mut admin,
        "SELECT status FROM queue_jobs WHERE queue = 'long'",
        &[],
    );
    assert_eq!(status, "succeeded");
}
