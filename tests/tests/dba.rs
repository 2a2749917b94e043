//! The DBA side under concurrency: pausing while consumers run, counters
//! that stay exact while every kind of transition and cleanup run at once,
//! cancellation racing completion, and retries racing each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use queue_client_tests::{
    claim, column, complete, complete_all, enqueue_many, eventually, on_connections, one, Client,
    Cluster, DB,
};

/// Consumers claim in a tight loop; once queue_pause() has returned, no
/// claim that starts afterwards gets a job, and after queue_resume() they
/// get jobs again.
#[test]
fn pause_stops_claims_at_once_and_resume_restarts_them() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("SELECT queue_create('paused')")
        .unwrap();
    for _ in 0..20 {
        enqueue_many(&mut admin, "paused", 1000);
    }
    let paused_at: Mutex<Option<Instant>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    // each claim: (started after the pause returned, jobs received)
    let consumer = |client: &mut Client| {
        let mut claims = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let started = Instant::now();
            let jobs = claim(client, "paused", 5);
            let after_pause = paused_at.lock().unwrap().is_some_and(|at| started > at);
            claims.push((after_pause, jobs.len()));
            for (id, lease) in &jobs {
                complete(client, *id, lease);
            }
        }
        claims
    };
    let claims: Vec<(bool, usize)> = thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mut client = cluster.connect();
                s.spawn(move || consumer(&mut client))
            })
            .collect();
        thread::sleep(Duration::from_millis(500));
        admin.batch_execute("SELECT queue_pause('paused')").unwrap();
        *paused_at.lock().unwrap() = Some(Instant::now());
        thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let before: usize = claims.iter().filter(|c| !c.0).map(|c| c.1).sum();
    let after: Vec<usize> = claims.iter().filter(|c| c.0).map(|c| c.1).collect();
    assert!(before > 0, "consumers claimed jobs before the pause");
    assert!(!after.is_empty(), "consumers kept claiming after the pause");
    assert!(
        after.iter().all(|&n| n == 0),
        "claims after the pause got jobs: {after:?}"
    );
    let pending: i64 = one(
        &mut admin,
        "SELECT pending FROM queue_stats WHERE queue = 'paused'",
        &[],
    );
    assert!(pending > 0);
    admin
        .batch_execute("SELECT queue_resume('paused')")
        .unwrap();
    assert_eq!(claim(&mut cluster.connect(), "paused", 5).len(), 5);
}

/// Six connections enqueue, complete, fail (retried and for good), cancel,
/// retry and purge at once, while another runs queue_cleanup() on a queue
/// that retains nothing. Afterwards every figure of queue_stats matches the
/// jobs that are there, and every _total matches what the clients saw.
#[test]
fn counters_stay_exact_under_concurrent_transitions_and_cleanup() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('counted', max_attempts => 2, retry_delay => '0',
                                 retention => '1 millisecond')",
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cleaner = {
        let mut client = cluster.connect();
        let stop = stop.clone();
        thread::spawn(move || {
            let mut removed = 0i64;
            while !stop.load(Ordering::SeqCst) {
                removed += one::<i64>(&mut client, "SELECT queue_cleanup()", &[]);
                thread::sleep(Duration::from_millis(20));
            }
            removed
        })
    };
    // (enqueued, succeeded, failed for good)
    let seen = on_connections(&cluster, 6, |n, client| {
        let (mut enqueued, mut succeeded, mut failed) = (0i64, 0i64, 0i64);
        for round in 0..60 {
            enqueued += enqueue_many(client, "counted", 20).len() as i64;
            for (k, (id, lease)) in claim(client, "counted", 12).into_iter().enumerate() {
                match (k + n + round) % 4 {
                    0 | 1 => succeeded += complete(client, id, &lease) as i64,
                    2 => {
                        let status: Option<String> = one(
                            client,
                            "SELECT queue_fail($1, $2::text::uuid, 'transient')",
                            &[&id, &lease],
                        );
                        failed += (status.as_deref() == Some("failed")) as i64;
                    }
                    _ => {
                        let status: Option<String> = one(
                            client,
                            "SELECT queue_fail($1, $2::text::uuid, 'fatal', permanent => true)",
                            &[&id, &lease],
                        );
                        failed += (status.as_deref() == Some("failed")) as i64;
                    }
                }
            }
            // cancel a pending job, retry a dead letter now and then
            client
                .batch_execute(
                    "SELECT queue_cancel(id) FROM queue_jobs
                      WHERE queue = 'counted' AND status = 'pending' ORDER BY id DESC LIMIT 1",
                )
                .unwrap();
            if round % 5 == 0 {
                client
                    .batch_execute(
                        "SELECT queue_retry(id) FROM queue_failed WHERE queue = 'counted' LIMIT 2",
                    )
                    .unwrap();
            }
        }
        (enqueued, succeeded, failed)
    });
    // a purge of the dead letters, then everything that is left finishes
    admin
        .batch_execute("SELECT queue_purge('counted', 'failed')")
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    let removed = cleaner.join().unwrap();
    assert!(removed > 0, "cleanup ran while the jobs moved");

    let stats = |admin: &mut Client| -> Vec<i64> {
        let row = admin
            .query_one(
                "SELECT pending, scheduled, processing, succeeded, failed, cancelled,
                        enqueued_total, succeeded_total, failed_total
                   FROM queue_stats WHERE queue = 'counted'",
                &[],
            )
            .unwrap();
        (0..9).map(|i| row.get(i)).collect()
    };
    let actual = |admin: &mut Client| -> Vec<i64> {
        let row = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'pending' AND run_at <= now()),
                        count(*) FILTER (WHERE status = 'pending' AND run_at > now()),
                        count(*) FILTER (WHERE status = 'processing'),
                        count(*) FILTER (WHERE status = 'succeeded'),
                        count(*) FILTER (WHERE status = 'failed'),
                        count(*) FILTER (WHERE status = 'cancelled')
                   FROM queue_jobs WHERE queue = 'counted'",
                &[],
            )
            .unwrap();
        (0..6).map(|i| row.get(i)).collect()
    };
    let (enqueued, succeeded, failed) = seen
        .iter()
        .fold((0, 0, 0), |a, s| (a.0 + s.0, a.1 + s.1, a.2 + s.2));
    for fold in [false, true] {
        if fold {
            admin.batch_execute("SELECT queue_cleanup()").unwrap();
        }
        let (s, a) = (stats(&mut admin), actual(&mut admin));
        assert_eq!(s[..6], a[..], "current counts (folded: {fold})");
        assert_eq!(
            s[6..],
            [enqueued, succeeded, failed],
            "totals (folded: {fold})"
        );
    }
}

/// Cancel and complete race for the same jobs: for each job exactly one of
/// them wins, and the job ends the way the winner says.
#[test]
fn cancel_and_complete_race_with_one_winner() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT queue_create('race')").unwrap();
    enqueue_many(&mut admin, "race", 400);
    let jobs = Arc::new(claim(&mut admin, "race", 400));
    let barrier = Arc::new(Barrier::new(2));
    let results = {
        let (jobs, barrier) = (jobs.clone(), barrier.clone());
        on_connections(&cluster, 2, move |n, client| {
            barrier.wait();
            jobs.iter()
                .map(|(id, lease)| {
                    if n == 0 {
                        complete(client, *id, lease)
                    } else {
                        one::<bool>(client, "SELECT queue_cancel($1)", &[id])
                    }
                })
                .collect::<Vec<bool>>()
        })
    };
    let mut winners = HashMap::new();
    for (k, (id, _)) in jobs.iter().enumerate() {
        let (completed, cancelled) = (results[0][k], results[1][k]);
        assert!(
            completed != cancelled,
            "job {id}: complete {completed}, cancel {cancelled}"
        );
        let status: String = one(&mut admin, "SELECT status FROM queue_job($1)", &[id]);
        let expected = if completed { "succeeded" } else { "cancelled" };
        assert_eq!(status, expected, "job {id}");
        *winners.entry(expected).or_insert(0) += 1;
    }
    let row = admin
        .query_one(
            "SELECT succeeded, cancelled FROM queue_stats WHERE queue = 'race'",
            &[],
        )
        .unwrap();
    assert_eq!(
        row.get::<_, i64>(0),
        winners.get("succeeded").copied().unwrap_or(0)
    );
    assert_eq!(
        row.get::<_, i64>(1),
        winners.get("cancelled").copied().unwrap_or(0)
    );
}

/// Two connections retry the same dead letters at once: each goes back to
/// its queue once, and only one of them is told it did.
#[test]
fn concurrent_retries_move_each_dead_letter_once() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("SELECT queue_create('dead', max_attempts => 1)")
        .unwrap();
    enqueue_many(&mut admin, "dead", 300);
    for (id, lease) in claim(&mut admin, "dead", 300) {
        admin
            .execute(
                "SELECT queue_fail($1, $2::text::uuid, 'down')",
                &[&id, &lease],
            )
            .unwrap();
    }
    let dead: Arc<Vec<i64>> = Arc::new(column(
        &mut admin,
        "SELECT id FROM queue_failed ORDER BY id",
        &[],
    ));
    assert_eq!(dead.len(), 300);
    let barrier = Arc::new(Barrier::new(3));
    let results = {
        let (dead, barrier) = (dead.clone(), barrier.clone());
        on_connections(&cluster, 3, move |_, client| {
            barrier.wait();
            dead.iter()
                .map(|id| one::<bool>(client, "SELECT queue_retry($1)", &[id]))
                .collect::<Vec<bool>>()
        })
    };
    for (k, id) in dead.iter().enumerate() {
        let told = results.iter().filter(|r| r[k]).count();
        assert_eq!(told, 1, "job {id} was retried {told} times");
    }
    let row = admin
        .query_one(
            "SELECT pending, failed, enqueued_total, failed_total FROM queue_stats
              WHERE queue = 'dead'",
            &[],
        )
        .unwrap();
    let figures: Vec<i64> = (0..4).map(|i| row.get(i)).collect();
    assert_eq!(figures, [300, 0, 300, 300]);
    let live: i64 = one(&mut admin, "SELECT count(*) FROM queue_live", &[]);
    assert_eq!(live, 300);
}

#[test]
fn upkeep_calls_at_once_never_fail() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("SELECT queue_create('m')").unwrap();
    enqueue_many(&mut client, "m", 2000);
    // two sessions rotating the live partitions over and over, as a
    // scheduled upkeep and the worker's own may: each either rotates or
    // skips, and no call fails (it once could with deadlock_detected)
    let failures = on_connections(&cluster, 2, |_, client| {
        (0..30)
            .filter_map(|_| {
                client
                    .query("SELECT * FROM queue_maintain(force => true)", &[])
                    .err()
                    .map(|e| format!("{:?}", e.as_db_error()))
            })
            .collect::<Vec<_>>()
    });
    assert!(failures.iter().all(Vec::is_empty), "{failures:?}");
    let pending: i64 = one(
        &mut client,
        "SELECT pending FROM queue_stats WHERE queue = 'm'",
        &[],
    );
    assert_eq!(pending, 2000, "every job kept");
}

/// A rotation keeps its partition locked until its caller commits: another
/// queue_maintain() meanwhile skips every step it cannot lock within
/// lock_timeout (the burial of expired leases, the rotation, the cleanup)
/// and returns, as documented, rather than failing with lock_not_available
/// (it did, under a slow machine's longer upkeeps). Forced or not.
#[test]
fn an_upkeep_beside_an_uncommitted_rotation_skips_rather_than_fails() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("SELECT queue_create('m')").unwrap();
    enqueue_many(&mut client, "m", 100);
    let mut holder = cluster.connect();
    holder.batch_execute("BEGIN").unwrap();
    let rotated: bool = one(
        &mut holder,
        "SELECT live_rotated FROM queue_maintain(force => true)",
        &[],
    );
    assert!(rotated);
    for force in [true, false] {
        let row = client
            .query_one("SELECT * FROM queue_maintain(force => $1)", &[&force])
            .unwrap_or_else(|e| panic!("force {force}: {:?}", e.as_db_error()));
        let (rotated, cleaned): (bool, i64) = (row.get(0), row.get(1));
        assert!(!rotated, "force {force}: rotated beside a held rotation");
        assert_eq!(cleaned, 0);
    }
    holder.batch_execute("COMMIT").unwrap();
    let rotated: bool = one(
        &mut client,
        "SELECT live_rotated FROM queue_maintain(force => true)",
        &[],
    );
    assert!(rotated, "the next call rotates");
    let pending: i64 = one(
        &mut client,
        "SELECT pending FROM queue_stats WHERE queue = 'm'",
        &[],
    );
    assert_eq!(pending, 100, "every job kept");
}

/// While another session holds a snapshot open, vacuum can clean nothing,
/// and the worker rotates the live ring much sooner than its usual rule
/// (dead tuples outnumbering jobs), checking every second: here after 3,000
/// claims and completions (6,000 dead tuples) with 7,000 jobs waiting, with
/// queue_maintain()'s own cadence an hour; then again with 17,000 jobs.
/// Every job is kept, and folding the counters leaves no dead rows either.
#[test]
fn the_worker_rotates_the_live_ring_while_a_snapshot_is_held() {
    let cluster = Cluster::start_with(&["queue.upkeep_interval = 3600", "queue.idle_exit = 3600"]);
    let mut client = cluster.connect();
    client.batch_execute("SELECT queue_create('h')").unwrap();
    enqueue_many(&mut client, "h", 10_000);
    let generation =
        |c: &mut Client| -> i64 { one(c, "SELECT last_value FROM queue_live_generation", &[]) };
    // claims and completes `rounds` batches of 100; how many completed
    let claim_and_complete = |c: &mut Client, rounds: usize| -> usize {
        (0..rounds)
            .map(|_| {
                let jobs = claim(c, "h", 100);
                complete_all(c, &jobs).len()
            })
            .sum()
    };
    let before = generation(&mut client);

    let mut holder = cluster.connect();
    holder
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pg_class")
        .unwrap();
    // (it counts once queue_cleanup_held_back() says so)
    eventually("the snapshot to hold cleanup back", || {
        one::<bool>(&mut client, "SELECT queue_cleanup_held_back()", &[])
    });
    assert_eq!(claim_and_complete(&mut client, 30), 3000);
    eventually("the worker rotating the live ring", || {
        generation(&mut client) > before
    });
    // the counter deltas are folded with TRUNCATE: no dead rows left that
    // the snapshot would keep
    client.batch_execute("SELECT queue_cleanup()").unwrap();
    let tallies: i64 = one(&mut client, "SELECT pg_relation_size('queue_tallies')", &[]);
    assert_eq!(tallies, 0);

    let row = client
        .query_one(
            "SELECT pending, processing, succeeded FROM queue_stats WHERE queue = 'h'",
            &[],
        )
        .unwrap();
    let figures: Vec<i64> = (0..3).map(|i| row.get(i)).collect();
    assert_eq!(figures, [7000, 0, 3000]);
    let current: i64 = one(
        &mut client,
        "SELECT count(*) FROM queue_live WHERE slot = (SELECT last_value % 2 FROM queue_live_generation)",
        &[],
    );
    assert_eq!(
        current, 7000,
        "every waiting job moved to the current partition"
    );

    // Without a snapshot held, past 10,000 jobs the partition is left to
    // vacuum (storage.sql); with one, the same rule still rotates: 17,000
    // jobs after 3,000 more claims and completions.
    let before = generation(&mut client);
    enqueue_many(&mut client, "h", 13_000);
    assert_eq!(claim_and_complete(&mut client, 30), 3000);
    eventually("the worker rotating 17,000 jobs", || {
        generation(&mut client) > before
    });
    let pending: i64 = one(
        &mut client,
        "SELECT pending FROM queue_stats WHERE queue = 'h'",
        &[],
    );
    assert_eq!(pending, 17_000, "every job kept");
    holder.batch_execute("COMMIT").unwrap();
}

/// Folding the counters empties queue_tallies with TRUNCATE only when it
/// can have the table at once. While another session holds it in a
/// transaction open for longer than a statement takes (a lock as autovacuum
/// takes, a reader or a writer that stays open, a prepared transaction),
/// the fold deletes the deltas without ever asking for the lock: a request
/// that waited would make every writer queue behind it. The fold's session
/// logs every lock wait of over a millisecond to itself; none may appear,
/// and the counts stay exact.
#[test]
fn the_counter_fold_never_waits_for_a_busy_tally_table() {
    let cluster = Cluster::start_with(&[
        "queue.upkeep_interval = 3600",
        "max_prepared_transactions = 2",
    ]);
    let mut client = cluster.connect();
    // (autovacuum would be a holder of its own, at moments of its choosing)
    client
        .batch_execute(
            "SELECT queue_create('f');
             ALTER TABLE queue_tallies SET (autovacuum_enabled = false)",
        )
        .unwrap();

    let waits = Arc::new(Mutex::new(Vec::new()));
    let mut config = cluster.config(DB);
    let seen = waits.clone();
    config.notice_callback(move |notice| seen.lock().unwrap().push(notice.message().to_string()));
    let mut folder = config.connect(postgres::NoTls).unwrap();
    folder
        .batch_execute(
            "SET log_lock_waits = on; SET deadlock_timeout = '1ms'; SET client_min_messages = log",
        )
        .unwrap();
    let filenode = |c: &mut Client| -> u32 {
        one::<postgres::types::Oid>(c, "SELECT pg_relation_filenode('queue_tallies')", &[])
    };
    // folds, and says whether it truncated
    let fold = |folder: &mut Client| -> bool {
        let before = filenode(folder);
        folder.batch_execute("SELECT queue_cleanup()").unwrap();
        filenode(folder) != before
    };

    let holds = [
        "BEGIN; LOCK TABLE queue_tallies IN SHARE UPDATE EXCLUSIVE MODE",
        "BEGIN; SELECT * FROM queue_stats",
        "BEGIN; SELECT queue_enqueue('f', '{}')",
        "BEGIN; SELECT queue_enqueue('f', '{}'); PREPARE TRANSACTION 'held'",
    ];
    let mut enqueued = 0;
    for hold in holds {
        enqueue_many(&mut client, "f", 10);
        enqueued += 10;
        assert!(fold(&mut folder), "alone, the fold truncates");

        enqueue_many(&mut client, "f", 10);
        enqueued += 10;
        let mut holder = cluster.connect();
        holder.batch_execute(hold).unwrap();
        // (a holder counts once its transaction has been open for 10 ms)
        thread::sleep(Duration::from_millis(50));
        assert!(!fold(&mut folder), "{hold}: the fold deletes instead");
        let left: i64 = one(&mut folder, "SELECT count(*) FROM queue_tallies", &[]);
        assert_eq!(left, 0, "{hold}: every committed delta folded");
        if hold.contains("PREPARE") {
            holder.batch_execute("COMMIT PREPARED 'held'").unwrap();
        } else {
            holder.batch_execute("COMMIT").unwrap();
        }
        if hold.contains("queue_enqueue") {
            enqueued += 1;
        }
    }
    let waited = waits.lock().unwrap().clone();
    assert!(
        !waited.iter().any(|m| m.contains("still waiting")),
        "{waited:?}"
    );
    assert!(fold(&mut folder));
    let counted: i64 = one(
        &mut client,
        "SELECT enqueued_total FROM queue_stats WHERE queue = 'f'",
        &[],
    );
    assert_eq!(counted, enqueued);
}

#[test]
fn queue_maintain_alone_buries_expired_leases_without_the_preload() {
    // no background worker: queue_maintain(), scheduled by the user, is the
    // whole upkeep, expired leases with no attempt left included
    let cluster = Cluster::start_with(&["shared_preload_libraries = ''"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('pull', max_attempts => 1);
             SELECT queue_enqueue('pull', '{}');
             SELECT queue_claim('pull', 'gone', lease => '10 ms');",
        )
        .unwrap();
    eventually("queue_maintain() to bury the job", || {
        client.batch_execute("SELECT queue_maintain()").unwrap();
        one::<String>(&mut client, "SELECT status FROM queue_jobs", &[]) == "failed"
    });
    let error: String = one(&mut client, "SELECT last_error FROM queue_failed", &[]);
    assert_eq!(error, "lease expired during attempt 1 of 1 (worker gone)");
}
