//! Races between real connections: concurrent claimers, uncommitted and
//! rolled-back enqueues, dedup keys enqueued at once, expired leases, and
//! storage rotation under load.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use queue_client_tests::{
    claim, complete, complete_all, enqueue_many, eventually, on_connections, one, waits_for_a_lock,
    Cluster,
};

/// 8 connections claim and complete 5,000 jobs until the queue is empty:
/// every job is delivered exactly once, and none is lost.
#[test]
fn eight_consumers_deliver_each_job_exactly_once() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("SELECT queue_create('race.once')")
        .unwrap();
    let enqueued: HashSet<i64> = enqueue_many(&mut admin, "race.once", 5_000)
        .into_iter()
        .collect();
    assert_eq!(enqueued.len(), 5_000);

    let delivered = on_connections(&cluster, 8, |n, client| {
        let mut mine = Vec::new();
        let mut idle = 0;
        while idle < 3 {
            // vary the batch size between consumers
            let jobs = claim(client, "race.once", 1 + (n as i32 % 4) * 7);
            if jobs.is_empty() {
                idle += 1;
                thread::sleep(Duration::from_millis(20));
                continue;
            }
            idle = 0;
            let done = complete_all(client, &jobs);
            assert_eq!(done.len(), jobs.len(), "a held lease did not complete");
            mine.extend(jobs.iter().map(|j| j.0));
        }
        mine
    });

    let mut seen: HashMap<i64, usize> = HashMap::new();
    for id in delivered.iter().flatten() {
        *seen.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let got: HashSet<i64> = seen.keys().copied().collect();
    assert_eq!(got, enqueued, "every job delivered, and only those");
    let busy = delivered.iter().filter(|d| !d.is_empty()).count();
    assert!(busy >= 2, "several consumers took part ({busy})");
    let row = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*)
               FROM queue_jobs WHERE queue = 'race.once'",
            &[],
        )
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (5_000, 5_000));
}

/// An enqueue that is not committed, or rolled back, is never claimed.
#[test]
fn uncommitted_and_rolled_back_enqueues_are_invisible() {
    let cluster = Cluster::start();
    let mut producer = cluster.connect();
    let mut consumer = cluster.connect();
    producer
        .batch_execute("SELECT queue_create('race.tx')")
        .unwrap();

    let mut tx = producer.transaction().unwrap();
    let pending: i64 = one(
        &mut tx,
        "SELECT queue_enqueue('race.tx', '{\"n\": 1}')",
        &[],
    );
    assert!(
        claim(&mut consumer, "race.tx", 10).is_empty(),
        "uncommitted job claimed"
    );
    tx.rollback().unwrap();
    assert!(
        claim(&mut consumer, "race.tx", 10).is_empty(),
        "rolled-back job claimed"
    );

    let mut tx = producer.transaction().unwrap();
    let committed: i64 = one(
        &mut tx,
        "SELECT queue_enqueue('race.tx', '{\"n\": 2}')",
        &[],
    );
    assert!(claim(&mut consumer, "race.tx", 10).is_empty());
    tx.commit().unwrap();
    let got = claim(&mut consumer, "race.tx", 10);
    assert_eq!(got.iter().map(|j| j.0).collect::<Vec<_>>(), vec![committed]);
    assert_ne!(pending, committed);
    let n: i64 = one(
        &mut consumer,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'race.tx'",
        &[],
    );
    assert_eq!(n, 1, "the rolled-back job left no trace");
}

/// Two sessions enqueue the same dedup_key at once: both get one id, and no
/// unique violation.
#[test]
fn concurrent_dedup_enqueues_get_one_id() {
    let cluster = Cluster::start();
    cluster
        .connect()
        .batch_execute("SELECT queue_create('race.dedup')")
        .unwrap();

    // Many keys, two sessions released together on each.
    const KEYS: usize = 200;
    let barrier = Arc::new(Barrier::new(2));
    let results = on_connections(&cluster, 2, move |_, client| {
        (0..KEYS)
            .map(|k| {
                barrier.wait();
                one::<i64>(
                    &mut *client,
                    "SELECT queue_enqueue('race.dedup', '{}', dedup_key => $1)",
                    &[&format!("key-{k}")],
                )
            })
            .collect::<Vec<i64>>()
    });
    assert_eq!(
        results[0], results[1],
        "both sessions got the same id for every key"
    );
    let n: i64 = one(
        &mut cluster.connect(),
        "SELECT count(*) FROM queue_jobs WHERE queue = 'race.dedup'",
        &[],
    );
    assert_eq!(n, KEYS as i64);

    // One session holds its enqueue open: the other waits for it, then gets
    // its id if it committed, or a job of its own if it rolled back.
    for commit in [true, false] {
        let key = format!("held-{commit}");
        let mut first = cluster.connect();
        let mut tx = first.transaction().unwrap();
        let held: i64 = one(
            &mut tx,
            "SELECT queue_enqueue('race.dedup', '{}', dedup_key => $1)",
            &[&key],
        );
        let mut second = cluster.connect();
        let second_pid: i32 = one(&mut second, "SELECT pg_backend_pid()", &[]);
        let key2 = key.clone();
        let waiter = thread::spawn(move || {
            let id: i64 = one(
                &mut second,
                "SELECT queue_enqueue('race.dedup', '{}', dedup_key => $1)",
                &[&key2],
            );
            id
        });
        waits_for_a_lock(&cluster, second_pid, "the second enqueue");
        if commit {
            tx.commit().unwrap();
        } else {
            tx.rollback().unwrap();
        }
        let id = waiter.join().unwrap();
        if commit {
            assert_eq!(id, held);
        } else {
            assert_ne!(id, held);
        }
        let n: i64 = one(
            &mut cluster.connect(),
            "SELECT count(*) FROM queue_jobs WHERE dedup_key = $1",
            &[&key],
        );
        assert_eq!(n, 1, "one job for the key ({key})");
    }
}

/// A lease expires and the job is claimed again; the old lease can no longer
/// complete, fail or extend it.
#[test]
fn an_expired_lease_is_reclaimed_and_fenced_off() {
    let cluster = Cluster::start();
    let mut first = cluster.connect();
    let mut second = cluster.connect();
    first
        .batch_execute("SELECT queue_create('race.lease', lease => '1 second')")
        .unwrap();
    let job: i64 = one(
        &mut first,
        "SELECT queue_enqueue('race.lease', '{\"work\": 1}')",
        &[],
    );
    let old = first
        .query_one(
            "SELECT id, lease::text, attempt FROM queue_claim('race.lease', 'first')",
            &[],
        )
        .unwrap();
    let old_lease: String = old.get(1);
    assert_eq!(old.get::<_, i64>(0), job);
    assert_eq!(old.get::<_, i32>(2), 1);
    assert!(second
        .query("SELECT id FROM queue_claim('race.lease', 'second')", &[])
        .unwrap()
        .is_empty());

    eventually("the first lease to expire", || {
        one::<bool>(
            &mut second,
            "SELECT lease_expires_at < clock_timestamp() FROM queue_jobs WHERE id = $1",
            &[&job],
        )
    });
    let new = second
        .query_one(
            "SELECT id, lease::text, attempt FROM queue_claim('race.lease', 'second', lease => '1 hour')",
            &[],
        )
        .unwrap();
    let new_lease: String = new.get(1);
    assert_eq!(new.get::<_, i64>(0), job);
    assert_eq!(new.get::<_, i32>(2), 2);
    assert_ne!(new_lease, old_lease);

    let completed = complete(&mut first, job, &old_lease);
    assert!(!completed);
    let failed: Option<String> = one(
        &mut first,
        "SELECT queue_fail($1, $2::text::uuid, 'late')",
        &[&job, &old_lease],
    );
    assert_eq!(failed, None);
    let extended: Option<String> = one(
        &mut first,
        "SELECT queue_extend($1, $2::text::uuid, '1 hour')::text",
        &[&job, &old_lease],
    );
    assert_eq!(extended, None);
    let row = first
        .query_one(
            "SELECT status, attempts, worker, last_error FROM queue_job($1)",
            &[&job],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "processing");
    assert_eq!(row.get::<_, i32>(1), 2);
    assert_eq!(row.get::<_, String>(2), "second");
    assert_eq!(
        row.get::<_, Option<String>>(3).unwrap(),
        "lease expired during attempt 1 of 5 (worker first)"
    );

    let completed = complete(&mut second, job, &new_lease);
    assert!(completed);
}

/// A completion that meets an uncommitted change of its job waits for it,
/// then looks at the job again: an extended lease still completes; a failed
/// attempt or a cancel that committed first wins. Alike for a queue that
/// keeps nothing (completed without the statement) and one that keeps
/// history (by the statement). In REPEATABLE READ the change is a
/// serialization failure, as for any DELETE.
#[test]
fn a_completion_waits_for_a_change_of_its_job_and_looks_again() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    let changes = [
        (
            "SELECT queue_extend($1, $2::text::uuid, '2 hours') IS NOT NULL",
            true,
            "succeeded",
        ),
        (
            "SELECT queue_fail($1, $2::text::uuid, 'boom') IS NOT NULL",
            false,
            "pending",
        ),
        (
            "SELECT queue_cancel($1) AND $2::text IS NOT NULL",
            false,
            "cancelled",
        ),
    ];
    for (n, retention) in ["0", "1 day"].into_iter().enumerate() {
        for (k, (change, completes, status)) in changes.iter().enumerate() {
            let queue = format!("race.look.{n}.{k}");
            let created =
                "SELECT queue_create($1, retention => $2::text::interval, retry_delay => '1 hour')";
            admin.execute(created, &[&queue, &retention]).unwrap();
            enqueue_many(&mut admin, &queue, 1);
            let (id, lease) = claim(&mut admin, &queue, 1).remove(0);

            let mut changer = cluster.connect();
            let mut tx = changer.transaction().unwrap();
            assert!(one::<bool>(&mut tx, change, &[&id, &lease]), "{change}");
            let mut completer = cluster.connect();
            let pid: i32 = one(&mut completer, "SELECT pg_backend_pid()", &[]);
            let lease2 = lease.clone();
            let waiter = thread::spawn(move || complete(&mut completer, id, &lease2));
            waits_for_a_lock(&cluster, pid, "the completion");
            tx.commit().unwrap();
            let completed = waiter.join().unwrap();
            assert_eq!(completed, *completes, "retention {retention}: {change}");
            // a queue with retention 0 keeps no row of a job that
            // succeeded or was cancelled
            let ended: String = one(
                &mut admin,
                "SELECT coalesce((SELECT status FROM queue_job($1)), 'gone')",
                &[&id],
            );
            let expected = match (retention, *status) {
                ("0", "succeeded" | "cancelled") => "gone",
                (_, status) => status,
            };
            assert_eq!(ended, expected, "retention {retention}: {change}");
            let succeeded: i64 = one(
                &mut admin,
                "SELECT succeeded_total FROM queue_stats WHERE queue = $1",
                &[&queue],
            );
            assert_eq!(
                succeeded,
                i64::from(*completes),
                "retention {retention}: {change}"
            );
        }

        let queue = format!("race.look.{n}.rr");
        let created = "SELECT queue_create($1, retention => $2::text::interval)";
        admin.execute(created, &[&queue, &retention]).unwrap();
        enqueue_many(&mut admin, &queue, 1);
        let (id, lease) = claim(&mut admin, &queue, 1).remove(0);
        let mut completer = cluster.connect();
        let mut tx = completer
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .start()
            .unwrap();
        one::<i32>(&mut tx, "SELECT 1", &[]);
        let extended: bool = one(
            &mut admin,
            "SELECT queue_extend($1, $2::text::uuid, '2 hours') IS NOT NULL",
            &[&id, &lease],
        );
        assert!(extended);
        let err = tx
            .query_one("SELECT queue_complete($1, $2::text::uuid)", &[&id, &lease])
            .unwrap_err();
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::T_R_SERIALIZATION_FAILURE),
            "retention {retention}: {err}"
        );
    }
}

/// Rotating the live partitions while producers and consumers run loses no
/// job, delivers none twice, and never refuses a lease that is held.
#[test]
fn rotation_under_load_keeps_every_job_and_lease() {
    rotate_under_load("1 day", Completions::Batches);
}

/// The same with one completion per job, in a queue that keeps nothing (so
/// completed without the statement).
#[test]
fn rotation_under_single_completions_keeps_every_job_and_lease() {
    rotate_under_load("0", Completions::One);
}

enum Completions {
    Batches,
    One,
}

fn rotate_under_load(retention: &'static str, completions: Completions) {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .execute(
            "SELECT queue_create('race.ring', retention => $1::text::interval)",
            &[&retention],
        )
        .unwrap();
    let single = matches!(completions, Completions::One);
    const PER_PRODUCER: usize = 1_500;
    let stop = Arc::new(AtomicBool::new(false));

    let rotations = {
        let stop = stop.clone();
        let mut client = cluster.connect();
        thread::spawn(move || {
            let mut rotated = 0;
            while !stop.load(Ordering::SeqCst) {
                let row = client.query_one(
                    "SELECT live_rotated FROM queue_maintain(force => true)",
                    &[],
                );
                if row.unwrap().get::<_, bool>(0) {
                    rotated += 1;
                }
                thread::sleep(Duration::from_millis(30));
            }
            rotated
        })
    };
    let total = Arc::new(AtomicUsize::new(0));
    let results = on_connections(&cluster, 6, move |n, client| {
        let mut produced = Vec::new();
        let mut consumed = Vec::new();
        if n < 2 {
            for _ in 0..PER_PRODUCER / 50 {
                produced.extend(enqueue_many(client, "race.ring", 50));
            }
        } else {
            let deadline = Instant::now() + Duration::from_secs(120);
            while total.load(Ordering::SeqCst) < 2 * PER_PRODUCER && Instant::now() < deadline {
                let jobs = claim(client, "race.ring", 20);
                if jobs.is_empty() {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                }
                let done = if single {
                    jobs.iter()
                        .filter(|(id, lease)| complete(client, *id, lease))
                        .map(|(id, _)| *id)
                        .collect()
                } else {
                    complete_all(client, &jobs)
                };
                assert_eq!(
                    done.len(),
                    jobs.len(),
                    "a held lease did not complete after rotation"
                );
                total.fetch_add(done.len(), Ordering::SeqCst);
                consumed.extend(done);
            }
        }
        (produced, consumed)
    });
    stop.store(true, Ordering::SeqCst);
    let rotated = rotations.join().unwrap();
    assert!(rotated >= 3, "the ring rotated during the run ({rotated})");

    let produced: HashSet<i64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    let consumed: Vec<i64> = results.iter().flat_map(|r| r.1.iter().copied()).collect();
    let unique: HashSet<i64> = consumed.iter().copied().collect();
    assert_eq!(unique.len(), consumed.len(), "no job completed twice");
    assert_eq!(produced.len(), 2 * PER_PRODUCER);
    assert!(unique.is_subset(&produced));
    // (a queue with retention 0 keeps no row of a succeeded job: the
    // counters say how many succeeded)
    let row = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*),
                    (SELECT succeeded_total FROM queue_stats WHERE queue = 'race.ring')
               FROM queue_jobs WHERE queue = 'race.ring'",
            &[],
        )
        .unwrap();
    let (kept, left, succeeded): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(succeeded, unique.len() as i64);
    if single {
        assert_eq!(left, produced.len() as i64 - succeeded, "no job lost");
        assert_eq!(kept, 0);
    } else {
        assert_eq!(left, produced.len() as i64, "no job lost");
        assert_eq!(kept, succeeded);
    }
}

/// A queue is never dropped under an enqueue in progress: the drop waits for
/// it, and then either refuses (the job is unfinished) or takes the job along.
#[test]
fn a_drop_waits_for_enqueues_in_progress() {
    let cluster = Cluster::start();
    let mut producer = cluster.connect();
    producer
        .batch_execute("SELECT queue_create('race.drop')")
        .unwrap();
    for force in [false, true] {
        let mut tx = producer.transaction().unwrap();
        let job: i64 = one(&mut tx, "SELECT queue_enqueue('race.drop', '{}')", &[]);
        let mut dropper = cluster.connect();
        let dropper_pid: i32 = one(&mut dropper, "SELECT pg_backend_pid()", &[]);
        let drop = thread::spawn(move || {
            dropper
                .query_one("SELECT queue_drop('race.drop', force => $1)", &[&force])
                .map(|r| r.get::<_, bool>(0))
                .map_err(|e| e.code().map(|c| c.code().to_string()))
        });
        waits_for_a_lock(&cluster, dropper_pid, "the drop");
        tx.commit().unwrap();
        let result = drop.join().unwrap();
        let left: i64 = one(
            &mut producer,
            "SELECT count(*) FROM queue_jobs WHERE id = $1",
            &[&job],
        );
        if force {
            assert_eq!(result, Ok(true));
            assert_eq!(left, 0, "the job went with its queue");
        } else {
            assert_eq!(result, Err(Some("55006".to_string())));
            assert_eq!(left, 1, "the job is still there, in its queue");
            producer
                .batch_execute("SELECT queue_complete(id, lease) FROM queue_claim('race.drop')")
                .unwrap();
        }
    }
}
