//! Replicas and failover: a hot standby (`pg_basebackup -R`) runs no
//! worker, serves the views and refuses every change with 25006; a
//! promoted standby serves its databases; and a failover to a synchronous
//! standby in the middle of enqueues, SQL-sender and webhook deliveries and
//! held leases loses no acknowledged job, repeats no sender's effect, and
//! repeats webhooks only of jobs that were in flight, each with one
//! `webhook-id`. The old primary, rewound into a standby, delivers nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use queue_client_tests::receiver::{Receiver, Reply};
use queue_client_tests::{all_rows, complete, eventually, one, one_row, Client, Cluster, DURABLE};

/// Waits until the standby has replayed everything the primary wrote so
/// far.
fn caught_up(primary: &mut Client, standby: &mut Client) {
    let lsn: String = one(primary, "SELECT pg_current_wal_lsn()::text", &[]);
    eventually("the standby to replay the primary's WAL", || {
        one::<bool>(
            standby,
            "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
            &[&lsn],
        )
    });
}

/// The queue's background processes that the server runs now.
fn queue_processes(client: &mut Client) -> i64 {
    one(
        client,
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('queue launcher', 'queue worker')",
        &[],
    )
}

/// For a while (a few seconds, polled), no launcher or worker runs.
fn no_worker_for_a_while(client: &mut Client, what: &str) {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .unwrap();
        assert_eq!(queue_processes(client), 0, "{what} runs a queue process");
        thread::sleep(Duration::from_millis(100));
    }
}

const EFFECTS: &str = "
    CREATE TABLE effects (job_id bigint);  -- no unique key: a repeat would show
    CREATE FUNCTION record_effect(job jsonb) RETURNS void LANGUAGE sql
        AS $$ INSERT INTO effects VALUES ((job->>'id')::bigint) $$;";

/// Every change the API offers, each with arguments that would work on the
/// primary.
const CHANGES: &[&str] = &[
    "SELECT queue_create('r.new')",
    "SELECT queue_alter('r.pull', max_attempts => 9)",
    "SELECT queue_pause('r.pull')",
    "SELECT queue_resume('r.pull')",
    "SELECT queue_drop('r.pull', force => true)",
    "SELECT queue_purge('r.pull')",
    "SELECT queue_enqueue('r.pull', '{}')",
    "SELECT queue_enqueue_batch('r.pull', ARRAY['{}'::jsonb])",
    "SELECT * FROM queue_claim('r.pull', 'standby-test')",
    "SELECT queue_complete(id, lease) FROM held",
    "SELECT queue_complete_batch(ARRAY[id], ARRAY[lease]) FROM held",
    "SELECT queue_fail(id, lease, 'no') FROM held",
    "SELECT queue_extend(id, lease, '1 hour') FROM held",
    "SELECT queue_retry(id) FROM queue_failed",
    "SELECT queue_cancel(id) FROM held",
    "SELECT queue_cleanup()",
    "SELECT queue_maintain()",
    "SELECT queue_bury_expired()",
    "SELECT queue_register_sender('r.pull', 'record_effect(jsonb)')",
    "SELECT queue_unregister_sender('r.sql')",
    "SELECT queue_schedule('r.new', 'r.pull', '@daily')",
    "SELECT queue_unschedule('r.tick')",
    "SELECT queue_run_schedule('r.tick')",
];

/// On a hot standby: no launcher or worker, the views and queue_job()
/// read what the primary wrote, and every change fails with 25006. Once
/// promoted, its worker delivers the jobs its primary left pending, and a
/// lease claimed on the primary completes.
#[test]
fn a_standby_reads_refuses_changes_with_25006_and_serves_once_promoted() {
    // (the primary delivers nothing, so that the standby has work waiting)
    let primary = Cluster::start_with(&["queue.enabled = off", DURABLE]);
    let mut admin = primary.connect();
    admin.batch_execute(EFFECTS).unwrap();
    admin
        .batch_execute(
            "SELECT queue_create('r.pull', max_attempts => 1);
             SELECT queue_enqueue_batch('r.pull', array_fill('{}'::jsonb, ARRAY[5]));
             SELECT queue_fail(id, lease, 'dead', permanent => true)
               FROM queue_claim('r.pull', 'primary', 1);
             SELECT queue_create('r.sql');
             SELECT queue_register_sender('r.sql', 'record_effect(jsonb)');
             SELECT queue_enqueue_batch('r.sql', array_fill('{}'::jsonb, ARRAY[20]));
             SELECT queue_enqueue('r.pull', '{}', group_key => 'tenant-1');
             SELECT queue_schedule('r.tick', 'r.pull', '@daily', paused => true);",
        )
        .unwrap();
    let (held_id, held_lease): (i64, String) = one_row(
        &mut admin,
        "SELECT id, lease::text FROM queue_claim('r.pull', 'primary', 1, '1 hour')",
        &[],
    );
    let standby = primary.standby(&["queue.enabled = on"]);
    let mut reader = standby.connect();
    caught_up(&mut admin, &mut reader);

    assert!(one::<bool>(&mut reader, "SELECT pg_is_in_recovery()", &[]));
    no_worker_for_a_while(&mut reader, "a standby");
    let view =
        "SELECT array_agg(queue || ':' || status || ':' || id ORDER BY id)::text FROM queue_jobs";
    assert_eq!(
        one::<String>(&mut reader, view, &[]),
        one::<String>(&mut admin, view, &[])
    );
    let stats = "SELECT array_agg(queue || ':' || pending || ':' || processing || ':' || failed
                                  || ':' || enqueued_total ORDER BY queue)::text FROM queue_stats";
    assert_eq!(
        one::<String>(&mut reader, stats, &[]),
        one::<String>(&mut admin, stats, &[])
    );
    assert_eq!(
        one::<i64>(&mut reader, "SELECT count(*) FROM queue_failed", &[]),
        1
    );
    assert_eq!(
        one::<String>(&mut reader, "SELECT status FROM queue_job($1)", &[&held_id]),
        "processing"
    );
    assert_eq!(
        one::<i64>(&mut reader, "SELECT count(*) FROM queue_workers", &[]),
        0
    );
    // queue_groups, the schedules and their ticks read on a standby too
    let groups = "SELECT array_agg(group_key || ':' || pending)::text FROM queue_groups('r.pull')";
    assert_eq!(
        one::<String>(&mut reader, groups, &[]),
        one::<String>(&mut admin, groups, &[])
    );
    let schedules = "SELECT array_agg(name || ':' || next_run_at)::text FROM queue_schedules";
    assert_eq!(
        one::<String>(&mut reader, schedules, &[]),
        one::<String>(&mut admin, schedules, &[])
    );
    assert_eq!(
        one::<i64>(
            &mut reader,
            "SELECT count(*) FROM queue_schedule_ticks('@hourly')",
            &[]
        ),
        5
    );

    for change in CHANGES {
        let change = change.replace(
            "FROM held",
            &format!("FROM (SELECT {held_id}::bigint AS id, '{held_lease}'::uuid AS lease) held"),
        );
        let error = reader.batch_execute(&change).unwrap_err();
        let db = error
            .as_db_error()
            .unwrap_or_else(|| panic!("{change}: {error}"));
        assert_eq!(
            db.code(),
            &SqlState::READ_ONLY_SQL_TRANSACTION,
            "{change}: {} {}",
            db.code().code(),
            db.message()
        );
    }

    standby.promote();
    let mut promoted = standby.connect();
    eventually("the promoted standby to deliver r.sql", || {
        one::<i64>(&mut promoted, "SELECT count(*) FROM effects", &[]) == 20
    });
    assert!(complete(&mut promoted, held_id, &held_lease));
    assert_eq!(
        one::<i64>(
            &mut promoted,
            "SELECT count(DISTINCT job_id) FROM effects",
            &[]
        ),
        20
    );
}

/// A job acknowledged to the client that enqueued it.
type Acked = (String, i64);

/// A failover in the middle of the work: a primary with a synchronous
/// standby, 8 connections enqueuing into a SQL-sender queue, a webhook
/// queue and a pull queue (10,000 jobs at most), pull consumers holding
/// leases; the primary is killed (`-m immediate`) and the standby promoted.
/// Every acknowledged job exists on the new primary and is delivered,
/// each sender's effect exists once, the receiver saw every webhook job
/// and repeats only of jobs that were in flight, each job with one
/// `webhook-id`; the held leases complete and `queue_stats` is exact. The
/// old primary, rewound into a standby of the new one, delivers nothing.
#[test]
fn a_failover_to_a_synchronous_standby_loses_nothing() {
    const IN_FLIGHT: i64 = 16;
    let receiver = Receiver::start();
    let allow = format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port);
    // (pg_rewind reads the old primary's WAL back to the checkpoint before
    // the point where the two diverged: the crash recovery it runs first
    // must not recycle it)
    let primary = Cluster::start_with(&[
        &allow,
        "wal_log_hints = on",
        "wal_keep_size = '1GB'",
        DURABLE,
    ]);
    let mut admin = primary.connect();
    admin.batch_execute(EFFECTS).unwrap();
    admin
        .batch_execute(&format!(
            "SELECT queue_create('f.sql', retention => '1 day');
             SELECT queue_register_sender('f.sql', 'record_effect(jsonb)', batch_size => 20);
             SELECT queue_create('f.hook', retention => '1 day');
             SELECT queue_register_webhook('f.hook', '{}', max_in_flight => {IN_FLIGHT});
             SELECT queue_create('f.pull', retention => '1 day');",
            receiver.url("/hook")
        ))
        .unwrap();
    let standby = primary.synchronous_standby(&[&allow]);

    let acked: Arc<Mutex<Vec<Acked>>> = Arc::new(Mutex::new(Vec::new()));
    let held: Arc<Mutex<Vec<(i64, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let enqueued = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for n in 0..8 {
        let (acked, enqueued, mut client) = (acked.clone(), enqueued.clone(), primary.connect());
        threads.push(thread::spawn(move || {
            let queues = ["f.sql", "f.hook", "f.pull"];
            let mut turn = n;
            while enqueued.fetch_add(1, Ordering::SeqCst) < 10_000 {
                let queue = queues[turn % 3];
                turn += 1;
                match client.query_one("SELECT queue_enqueue($1, '{}')", &[&queue]) {
                    Ok(row) => acked.lock().unwrap().push((queue.to_string(), row.get(0))),
                    Err(_) => return, // the primary is gone
                }
            }
        }));
    }
    for _ in 0..2 {
        let (held, stop, mut client) = (held.clone(), stop.clone(), primary.connect());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let claimed = client.query(
                    "SELECT id, lease::text FROM queue_claim('f.pull', 'puller', 5, '1 hour')",
                    &[],
                );
                match claimed {
                    Ok(rows) => held
                        .lock()
                        .unwrap()
                        .extend(rows.iter().map(|r| (r.get(0), r.get(1)))),
                    Err(_) => return,
                }
                thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    eventually("4,000 enqueues acknowledged", || {
        acked.lock().unwrap().len() >= 4_000
    });
    primary.crash();
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    standby.promote();
    let mut new = standby.connect();

    let acked = acked.lock().unwrap().clone();
    let held = held.lock().unwrap().clone();
    assert!(!held.is_empty(), "the pull consumers held leases");
    for (id, lease) in &held {
        assert!(
            complete(&mut new, *id, lease),
            "the lease of job {id}, claimed on the old primary, completes"
        );
    }
    loop {
        let rows = new
            .query(
                "SELECT queue_complete(id, lease) FROM queue_claim('f.pull', 'after', 100)",
                &[],
            )
            .unwrap();
        if rows.is_empty() {
            break;
        }
    }
    eventually("the new primary to deliver every pushed job", || {
        one::<i64>(
            &mut new,
            "SELECT count(*) FROM queue_jobs WHERE queue IN ('f.sql', 'f.hook') AND status <> 'succeeded'",
            &[],
        ) == 0
    });

    // every acknowledged job is there; every pulled one succeeded but
    // those whose claim committed as the primary died, before its answer
    // reached the consumer (still leased)
    let jobs: BTreeMap<i64, (String, String)> = new
        .query("SELECT id, queue, status FROM queue_jobs", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    for (queue, id) in &acked {
        let found = jobs.get(id).map(|(q, _)| q);
        assert_eq!(found, Some(queue), "acknowledged job {id} of {queue}");
    }
    let unanswered: Vec<&String> = jobs
        .values()
        .filter(|(_, status)| status != "succeeded")
        .map(|(_, status)| status)
        .collect();
    assert!(
        unanswered.len() <= 10 && unanswered.iter().all(|s| *s == "processing"),
        "{unanswered:?}"
    );
    // each SQL sender's effect once, for every f.sql job
    let effects: BTreeMap<i64, i64> = all_rows(
        &mut new,
        "SELECT job_id, count(*) FROM effects GROUP BY job_id",
        &[],
    )
    .into_iter()
    .collect();
    let sql_jobs: BTreeSet<i64> = jobs
        .iter()
        .filter(|(_, (q, _))| q == "f.sql")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(effects.keys().copied().collect::<BTreeSet<_>>(), sql_jobs);
    assert!(effects.values().all(|&n| n == 1), "an effect repeated");
    // the receiver saw every webhook job; repeats only of jobs in flight,
    // each job under one webhook-id
    let mut posts: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for seen in receiver.seen("/hook") {
        let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
        let id = body["id"].as_i64().unwrap();
        posts
            .entry(id)
            .or_default()
            .push(seen.header("webhook-id").unwrap().to_string());
    }
    let hook_jobs: BTreeSet<i64> = jobs
        .iter()
        .filter(|(_, (q, _))| q == "f.hook")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(posts.keys().copied().collect::<BTreeSet<_>>(), hook_jobs);
    let repeated = posts.values().filter(|ids| ids.len() > 1).count() as i64;
    assert!(
        repeated <= IN_FLIGHT,
        "{repeated} jobs posted again, more than the {IN_FLIGHT} that can be in flight"
    );
    for (id, ids) in &posts {
        assert!(ids.iter().all(|i| i == &ids[0]), "job {id} under {ids:?}");
    }
    // queue_stats exact
    for queue in ["f.sql", "f.hook", "f.pull"] {
        let count = |status: Option<&str>| {
            jobs.values()
                .filter(|(q, s)| q == queue && status.is_none_or(|status| s == status))
                .count() as i64
        };
        let (enqueued, succeeded): (i64, i64) = one_row(
            &mut new,
            "SELECT enqueued_total, succeeded_total FROM queue_stats WHERE queue = $1",
            &[&queue],
        );
        assert_eq!(
            (enqueued, succeeded),
            (count(None), count(Some("succeeded"))),
            "{queue}"
        );
    }

    // the old primary, rewound into a standby of the new one, delivers
    // nothing; the new primary delivers what is enqueued now, once
    primary.rewind_as_standby_of(&standby);
    let mut old = primary.connect();
    assert!(one::<bool>(&mut old, "SELECT pg_is_in_recovery()", &[]));
    new.batch_execute("SELECT queue_enqueue_batch('f.sql', array_fill('{}'::jsonb, ARRAY[100]))")
        .unwrap();
    no_worker_for_a_while(&mut old, "the old primary, now a standby");
    eventually("the new primary to deliver the last 100", || {
        one::<i64>(&mut new, "SELECT count(*) FROM effects", &[]) == sql_jobs.len() as i64 + 100
    });
    assert_eq!(
        one::<i64>(
            &mut new,
            "SELECT count(*) - count(DISTINCT job_id) FROM effects",
            &[]
        ),
        0
    );
}

/// Point-in-time recovery to a restore point taken while a SQL sender's
/// job and three webhook requests were in flight: the jobs enqueued before
/// it are there and those after it are not, the jobs in flight are
/// delivered again (each sender effect once, each webhook job under the
/// webhook-id it was posted with), and the recovered cluster is served.
#[test]
fn a_point_in_time_recovery_keeps_jobs_and_recovers_those_in_flight() {
    let receiver = Receiver::start();
    let allow = format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port);
    let archive = std::path::PathBuf::from(format!("/tmp/queue-archive-{}", std::process::id()));
    queue_client_tests::server_writable_dir(&archive);
    let archive_command = format!("archive_command = 'cp %p {}/%f'", archive.display());
    let primary = Cluster::start_with(&[
        &allow,
        "archive_mode = on",
        &archive_command,
        "queue.sender_timeout = 0",
        "cluster_name = 'primary'",
        DURABLE,
    ]);
    let mut admin = primary.connect();
    admin
        .batch_execute(
            "CREATE TABLE effects (job_id bigint);
             -- a job whose payload says slow is held in flight on the primary
             CREATE FUNCTION slow_effect(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload' ? 'slow' AND current_setting('cluster_name') = 'primary' THEN
                     PERFORM pg_sleep(600);
                 END IF;
                 INSERT INTO effects VALUES ((job->>'id')::bigint);
             END $$;",
        )
        .unwrap();
    let backup = primary.base_backup(&[]);

    receiver.answer("/pitr", vec![Reply::Hang]);
    admin
        .batch_execute(&format!(
            "SELECT queue_create('p.sql', retention => '1 day');
             SELECT queue_register_sender('p.sql', 'slow_effect(jsonb)', batch_size => 1);
             SELECT queue_enqueue_batch('p.sql', array_fill('{{}}'::jsonb, ARRAY[3]));
             SELECT queue_create('p.hook', retention => '1 day');
             SELECT queue_register_webhook('p.hook', '{}');
             SELECT queue_enqueue_batch('p.hook', array_fill('{{}}'::jsonb, ARRAY[3]));",
            receiver.url("/pitr")
        ))
        .unwrap();
    eventually("the fast jobs' effects", || {
        one::<i64>(&mut admin, "SELECT count(*) FROM effects", &[]) == 3
    });
    let slow: i64 = one(
        &mut admin,
        "SELECT queue_enqueue('p.sql', '{\"slow\": true}')",
        &[],
    );
    // (a queue without limits is delivered in one transaction per batch:
    // its job shows pending until that commits, so its sender is seen at
    // work instead)
    eventually("the slow job and three requests in flight", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
            &[],
        ) == 1
            && one::<String>(&mut admin, "SELECT status FROM queue_job($1)", &[&slow]) == "pending"
            && receiver.seen("/pitr").len() == 3
    });
    admin
        .batch_execute("SELECT pg_create_restore_point('in flight')")
        .unwrap();
    admin
        .batch_execute(
            "SELECT queue_create('p.after');
             SELECT queue_enqueue('p.after', '{}');
             SELECT pg_switch_wal();",
        )
        .unwrap();
    drop(admin);
    primary.stop_server();
    let before = receiver.seen("/pitr");
    receiver.answer("/pitr", vec![Reply::Status(204, Vec::new())]);

    backup.recover_to(&archive, "in flight", &["cluster_name = 'recovered'"]);
    let mut recovered = backup.connect();
    eventually("the recovery to end", || {
        !one::<bool>(&mut recovered, "SELECT pg_is_in_recovery()", &[])
    });
    assert_eq!(
        one::<i64>(
            &mut recovered,
            "SELECT count(*) FROM queue_queues WHERE name = 'p.after'",
            &[]
        ),
        0,
        "a queue made after the restore point"
    );
    eventually("every job delivered after the recovery", || {
        one::<i64>(
            &mut recovered,
            "SELECT count(*) FILTER (WHERE status = 'succeeded') FROM queue_jobs",
            &[],
        ) == 7
    });
    assert_eq!(
        one::<String>(
            &mut recovered,
            "SELECT count(*) || ' ' || count(DISTINCT job_id) FROM effects",
            &[]
        ),
        "4 4"
    );
    let mut posts: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for seen in receiver.seen("/pitr") {
        let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
        posts
            .entry(body["id"].as_i64().unwrap())
            .or_default()
            .push(seen.header("webhook-id").unwrap().to_string());
    }
    assert_eq!(before.len(), 3);
    assert_eq!(posts.len(), 3);
    for (id, ids) in &posts {
        assert_eq!(
            ids.len(),
            2,
            "job {id} posted before and after the recovery"
        );
        assert_eq!(ids[0], ids[1], "job {id} under one webhook-id");
    }
    let _ = std::fs::remove_dir_all(&archive);
}
