//! Races between real connections under load: concurrent claimers, dedup
//! keys enqueued at once, expired leases, and storage rotation. (The
//! interleavings that can be written down step by step are isolation specs:
//! pg_test/isolation.)

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use queue_client_tests::{
    claim, complete, complete_all, enqueue_many, eventually, on_connections, one, one_row, Cluster,
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

/// Two sessions enqueue the same dedup_key at once: both get one id, and no
/// unique violation. (One that holds its enqueue open while the other waits:
/// pg_test/isolation/specs/dedup_held.spec.)
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
    let (old_id, old_lease, old_attempt): (i64, String, i32) = one_row(
        &mut first,
        "SELECT id, lease::text, attempt FROM queue_claim('race.lease', 'first')",
        &[],
    );
    assert_eq!(old_id, job);
    assert_eq!(old_attempt, 1);
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
    let (new_id, new_lease, new_attempt): (i64, String, i32) = one_row(
        &mut second,
        "SELECT id, lease::text, attempt FROM queue_claim('race.lease', 'second', lease => '1 hour')",
        &[],
    );
    assert_eq!(new_id, job);
    assert_eq!(new_attempt, 2);
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
    let (kept, left, succeeded): (i64, i64, i64) = one_row(
        &mut admin,
        "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*),
                (SELECT succeeded_total FROM queue_stats WHERE queue = 'race.ring')
           FROM queue_jobs WHERE queue = 'race.ring'",
        &[],
    );
    assert_eq!(succeeded, unique.len() as i64);
    if single {
        assert_eq!(left, produced.len() as i64 - succeeded, "no job lost");
        assert_eq!(kept, 0);
    } else {
        assert_eq!(left, produced.len() as i64, "no job lost");
        assert_eq!(kept, succeeded);
    }
}
