//! Routine DBA maintenance beside consumers that stay connected (as pooled
//! connections do) and whose completions skip the statement
//! (src/complete_one.rs): REINDEX CONCURRENTLY of every table of the
//! extension, an index dropped and made again, ALTER TABLE and VACUUM FULL
//! of the tables that path writes, an index or a CHECK constraint added to
//! queue_tallies, a queue changed by another session while a transaction
//! that already used the queue goes on, and REINDEX of the group indexes
//! while an ordered queue is claimed behind a deep backlog. The consumers
//! keep working through each, and every job is completed once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use postgres::error::SqlState;
use queue_client_tests::{claim, column, complete, eventually, one, one_row, Client, Cluster};

/// A queue that keeps nothing (its completions skip the statement) and one
/// that keeps history (they run it).
const QUEUES: [&str; 2] = ["m.none", "m.kept"];

fn create_queues(admin: &mut Client) {
    admin
        .batch_execute(
            "SELECT queue_create('m.none', retention => '0');
             SELECT queue_create('m.kept', retention => '1 day');",
        )
        .unwrap();
}

/// One connection, made before the maintenance and kept, that enqueues,
/// claims and completes one job at a time of each queue in turn until it
/// is stopped. Its first error is kept, and fails the test.
struct Consumer {
    stop: Arc<AtomicBool>,
    completed: Arc<AtomicUsize>,
    error: Arc<Mutex<Option<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Consumer {
    fn start(cluster: &Cluster) -> Consumer {
        let mut client = cluster.connect();
        let stop = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let error = Arc::new(Mutex::new(None));
        let (s, c, e) = (stop.clone(), completed.clone(), error.clone());
        let thread = thread::spawn(move || {
            let mut turn = 0;
            while !s.load(Ordering::SeqCst) {
                let queue = QUEUES[turn % 2];
                turn += 1;
                if let Err(err) = Consumer::one_job(&mut client, queue) {
                    *e.lock().unwrap() = Some(format!("{queue}: {err:?}"));
                    return;
                }
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
        Consumer {
            stop,
            completed,
            error,
            thread: Some(thread),
        }
    }

    fn one_job(client: &mut Client, queue: &str) -> Result<(), String> {
        client
            .execute("SELECT queue_enqueue($1, '{}')", &[&queue])
            .map_err(text)?;
        let row = client
            .query_one(
                "SELECT id, lease::text FROM queue_claim($1, 'maintenance', 1, '1 hour')",
                &[&queue],
            )
            .map_err(text)?;
        complete_under_lease(client, row.get(0), row.get(1))
    }

    fn check(&self) {
        if let Some(error) = self.error.lock().unwrap().as_ref() {
            panic!("the consumer failed: {error}");
        }
    }

    /// Waits until the consumer has completed `n` more jobs.
    fn goes_on(&self, n: usize, after: &str) {
        let from = self.completed.load(Ordering::SeqCst);
        eventually(&format!("the consumer to go on after {after}"), || {
            self.check();
            self.completed.load(Ordering::SeqCst) >= from + n
        });
    }

    /// Stops it; how many jobs it completed.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.check();
        self.completed.load(Ordering::SeqCst)
    }
}

/// Completes job `id` under `lease`, which must still hold.
fn complete_under_lease(client: &mut Client, id: i64, lease: String) -> Result<(), String> {
    let done: bool = client
        .query_one("SELECT queue_complete($1, $2::text::uuid)", &[&id, &lease])
        .map_err(text)?
        .get(0);
    match done {
        true => Ok(()),
        false => Err(format!("job {id} was not completed under its lease")),
    }
}

/// An error as the server reported it: its SQLSTATE and message.
fn text(e: postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// Each job the consumer enqueued was completed once, and the counters say
/// so.
fn every_job_completed_once(admin: &mut Client, completed: usize) {
    let left: i64 = one(
        admin,
        "SELECT count(*) FROM queue_jobs WHERE queue = ANY($1) AND status <> 'succeeded'",
        &[&QUEUES.to_vec()],
    );
    assert_eq!(left, 0, "jobs not completed");
    let totals: i64 = one(
        admin,
        "SELECT sum(succeeded_total)::bigint FROM queue_stats WHERE queue = ANY($1)",
        &[&QUEUES.to_vec()],
    );
    assert_eq!(totals, completed as i64);
    let kept: i64 = one(
        admin,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'm.kept'",
        &[],
    );
    // (the consumer takes m.none first, then m.kept, in turn)
    assert_eq!(kept as usize, completed / 2, "m.kept keeps each job");
}

/// Runs each statement beside a consumer that stays connected, which must
/// go on completing jobs after each.
fn beside_a_consumer(cluster: &Cluster, admin: &mut Client, statements: &[String]) {
    let consumer = Consumer::start(cluster);
    consumer.goes_on(20, "its start");
    for statement in statements {
        admin
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        consumer.goes_on(20, statement);
    }
    let completed = consumer.stop();
    every_job_completed_once(admin, completed);
    assert!(
        !cluster.server_log().contains("terminated by signal"),
        "a backend crashed"
    );
}

/// Every table of the extension (partitions too), by name.
fn extension_tables(admin: &mut Client) -> Vec<String> {
    column(
        admin,
        "SELECT c.relname::text FROM pg_depend d
           JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
          WHERE d.refclassid = 'pg_extension'::regclass
            AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'queue')
            AND c.relkind IN ('r', 'p')
          ORDER BY 1",
        &[],
    )
}

/// REINDEX INDEX CONCURRENTLY of the index a completion finds jobs by,
/// REINDEX TABLE CONCURRENTLY of every table of the extension, and the
/// live tables' id index dropped and made again in one transaction,
/// committed and rolled back: a consumer connected before goes on.
#[test]
fn reindex_and_a_rebuilt_index_beside_a_connected_consumer() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_queues(&mut admin);
    // a schedule fires every second meanwhile (its table is reindexed too)
    admin
        .batch_execute(
            "SELECT queue_create('m.ticks');
             SELECT queue_schedule('m.tick', 'm.ticks', '* * * * * *', catch_up => 'all');",
        )
        .unwrap();
    let mut statements = vec![
        "REINDEX INDEX CONCURRENTLY queue_live_0_id_idx".to_string(),
        "REINDEX INDEX CONCURRENTLY queue_live_1_id_idx".to_string(),
    ];
    let tables = extension_tables(&mut admin);
    assert!(tables.contains(&"queue_tallies".to_string()), "{tables:?}");
    statements.extend(
        tables
            .iter()
            .map(|t| format!("REINDEX TABLE CONCURRENTLY {t}")),
    );
    for end in ["COMMIT", "ROLLBACK"] {
        statements.push(format!(
            "BEGIN;
             DROP INDEX queue_live_id;
             CREATE INDEX queue_live_id ON queue_live (id);
             {end}"
        ));
    }
    let fired = |admin: &mut Client| -> i64 {
        one(
            admin,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'm.ticks'",
            &[],
        )
    };
    eventually("a first tick", || fired(&mut admin) >= 1);
    beside_a_consumer(&cluster, &mut admin, &statements);
    // ticks go on after the statements
    let after = fired(&mut admin);
    eventually("two more ticks", || fired(&mut admin) >= after + 2);
    // one job per tick, none missing, through every statement
    let (ticks, distinct, span): (i64, i64, i64) = one_row(
        &mut admin,
        "SELECT count(*), count(DISTINCT headers->>'scheduled_for'),
                extract(epoch FROM max((headers->>'scheduled_for')::timestamptz)
                                 - min((headers->>'scheduled_for')::timestamptz))::bigint
           FROM queue_jobs WHERE queue = 'm.ticks'",
        &[],
    );
    assert!(ticks >= 3, "ticks fired: {ticks}");
    assert_eq!(
        (ticks, distinct),
        (span + 1, span + 1),
        "one job per tick, none missing"
    );
}

/// ALTER TABLE of queue_tallies and of the live tables, as an upgrade
/// script would make it, and VACUUM FULL of both, while a consumer that
/// used the path without the statement stays connected: no crash, and the
/// counters stay exact.
#[test]
fn alter_table_beside_a_connected_consumer() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    create_queues(&mut admin);
    let statements = [
        "ALTER TABLE queue_tallies ADD COLUMN note text",
        "ALTER TABLE queue_live ADD COLUMN extra integer NOT NULL DEFAULT 0",
        "VACUUM FULL queue_tallies",
        "VACUUM FULL queue_live_0",
        "VACUUM FULL queue_live_1",
        "ALTER TABLE queue_live DROP COLUMN extra",
        "ALTER TABLE queue_tallies DROP COLUMN note",
        "ALTER TABLE queue_tallies RENAME COLUMN failed TO failed_now",
        "ALTER TABLE queue_tallies RENAME COLUMN failed_now TO failed",
    ]
    .map(String::from);
    beside_a_consumer(&cluster, &mut admin, &statements);
}

/// An index added to queue_tallies while a consumer completes jobs stays
/// right (amcheck finds every row in it), and a CHECK constraint added to
/// it is checked by every completion, which fails with 23514 and keeps its
/// job as the statement does. (No worker runs: its upkeep would empty
/// queue_tallies before amcheck looks.)
#[test]
fn an_index_or_a_check_added_to_tallies_is_kept() {
    let cluster = Cluster::start_with(&["queue.enabled = off"]);
    let mut admin = cluster.connect();
    create_queues(&mut admin);
    admin.batch_execute("CREATE EXTENSION amcheck").unwrap();
    let statements =
        ["CREATE INDEX queue_tallies_by_queue ON queue_tallies (queue_id, slot)".to_string()];
    beside_a_consumer(&cluster, &mut admin, &statements);
    let rows: i64 = one(&mut admin, "SELECT count(*) FROM queue_tallies", &[]);
    assert!(rows > 0, "queue_tallies has the consumer's rows");
    admin
        .batch_execute("SELECT bt_index_check('queue_tallies_by_queue', true)")
        .unwrap();

    let mut consumer = cluster.connect();
    consumer
        .batch_execute("SELECT queue_enqueue('m.none', '{}')")
        .unwrap();
    let job = claim(&mut consumer, "m.none", 1).remove(0);
    let id: i32 = one(
        &mut admin,
        "SELECT id FROM queue_queues WHERE name = 'm.none'",
        &[],
    );
    admin
        .batch_execute(&format!(
            "ALTER TABLE queue_tallies ADD CONSTRAINT no_none CHECK (queue_id <> {id}) NOT VALID"
        ))
        .unwrap();
    let refused = consumer
        .query_one(
            "SELECT queue_complete($1, $2::text::uuid)",
            &[&job.0, &job.1],
        )
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(&SqlState::CHECK_VIOLATION),
        "{refused}"
    );
    let status: String = one(
        &mut admin,
        "SELECT status FROM queue_jobs WHERE id = $1",
        &[&job.0],
    );
    assert_eq!(status, "processing", "the refused completion kept its job");
    admin
        .batch_execute("ALTER TABLE queue_tallies DROP CONSTRAINT no_none")
        .unwrap();
    assert!(complete(&mut consumer, job.0, &job.1));
}

/// A transaction that completed a job goes on to complete another after
/// another session changed the queue's retention: the second follows the
/// new retention, both ways.
#[test]
fn a_completion_follows_a_retention_changed_meanwhile() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    let mut consumer = cluster.connect();
    for (n, (from, to)) in [("0", "1 day"), ("1 day", "0")].into_iter().enumerate() {
        let queue = format!("m.retention-{n}");
        admin
            .execute(
                "SELECT queue_create($1, retention => $2::text::interval)",
                &[&queue, &from],
            )
            .unwrap();
        admin
            .execute(
                "SELECT queue_enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[2]))",
                &[&queue],
            )
            .unwrap();
        let jobs = claim(&mut consumer, &queue, 2);
        assert_eq!(jobs.len(), 2);
        let mut tx = consumer.transaction().unwrap();
        assert!(completes(&mut tx, &jobs[0]));
        admin
            .execute(
                "SELECT queue_alter($1, retention => $2::text::interval)",
                &[&queue, &to],
            )
            .unwrap();
        assert!(completes(&mut tx, &jobs[1]));
        tx.commit().unwrap();
        let kept: Vec<i64> = column(
            &mut admin,
            "SELECT id FROM queue_jobs WHERE queue = $1 ORDER BY id",
            &[&queue],
        );
        let expected = if to == "0" {
            vec![jobs[0].0]
        } else {
            vec![jobs[1].0]
        };
        assert_eq!(kept, expected, "retention {from} -> {to}");
        let total: i64 = one(
            &mut admin,
            "SELECT succeeded_total FROM queue_stats WHERE queue = $1",
            &[&queue],
        );
        assert_eq!(total, 2);
    }
}

/// A transaction that claimed from a queue claims again after another
/// session paused it: the second claim gets nothing, as a statement
/// started after the pause committed would see.
#[test]
fn a_claim_follows_a_pause_committed_meanwhile() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    let mut consumer = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('m.paused');
             SELECT queue_enqueue_batch('m.paused', array_fill('{}'::jsonb, ARRAY[4]));",
        )
        .unwrap();
    let mut tx = consumer.transaction().unwrap();
    let claimed = |tx: &mut postgres::Transaction<'_>| -> i64 {
        one(
            tx,
            "SELECT count(*) FROM queue_claim('m.paused', 'maintenance', 1)",
            &[],
        )
    };
    assert_eq!(claimed(&mut tx), 1);
    admin
        .batch_execute("SELECT queue_pause('m.paused')")
        .unwrap();
    assert_eq!(claimed(&mut tx), 0, "a paused queue handed out a job");
    tx.commit().unwrap();
}

/// queue_complete of one claimed job, in `tx`.
fn completes(tx: &mut postgres::Transaction<'_>, (id, lease): &(i64, String)) -> bool {
    one(
        tx,
        "SELECT queue_complete($1, $2::text::uuid)",
        &[id, lease],
    )
}

/// REINDEX CONCURRENTLY of the group indexes, and of the live tables as a
/// whole, while an ordered queue is claimed behind a deep backlog: group
/// `a` keeps its head in flight with 9,999 jobs behind it at the front of
/// the claim order, so each claim finds group `b`'s head by the walk over
/// the group index (group_firsts.sql). A connection made before the
/// statements claims and completes throughout: `b`'s jobs one at a time in
/// id order, none of `a`'s.
#[test]
fn reindex_of_the_group_indexes_beside_ordered_claims_behind_a_deep_backlog() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('m.ord', ordered => true);
             SELECT count(*) FROM queue_enqueue_batch('m.ord',
                 array_fill('{\"g\": \"a\"}'::jsonb, ARRAY[10000]),
                 group_keys => array_fill('a'::text, ARRAY[10000]));
             SELECT count(*) FROM queue_enqueue_batch('m.ord',
                 array_fill('{\"g\": \"b\"}'::jsonb, ARRAY[10000]),
                 group_keys => array_fill('b'::text, ARRAY[10000]));",
        )
        .unwrap();
    let a_head: i64 = one(
        &mut admin,
        "SELECT id FROM queue_claim('m.ord', 'holder', 1, '1 hour')",
        &[],
    );
    let mut statements: Vec<String> = column(
        &mut admin,
        "SELECT format('REINDEX INDEX CONCURRENTLY %I', indexname) FROM pg_indexes
          WHERE tablename IN ('queue_live_0', 'queue_live_1')
            AND indexdef LIKE '%(queue_id, group_key, id)%'
          ORDER BY indexname",
        &[],
    );
    assert_eq!(statements.len(), 4, "two group indexes per partition");
    statements.push("REINDEX TABLE CONCURRENTLY queue_live_0".into());
    statements.push("REINDEX TABLE CONCURRENTLY queue_live_1".into());

    let stop = Arc::new(AtomicBool::new(false));
    let claimed = Arc::new(Mutex::new(Vec::<(i64, String)>::new()));
    let mut client = cluster.connect();
    let consumer = {
        let (stop, claimed) = (stop.clone(), claimed.clone());
        thread::spawn(move || -> Result<(), String> {
            while !stop.load(Ordering::SeqCst) {
                let rows = client
                    .query(
                        "SELECT id, lease::text, payload->>'g' FROM queue_claim('m.ord', 'c', 10)",
                        &[],
                    )
                    .map_err(text)?;
                for row in rows {
                    let (id, lease, group): (i64, String, String) =
                        (row.get(0), row.get(1), row.get(2));
                    claimed.lock().unwrap().push((id, group));
                    complete_under_lease(&mut client, id, lease)?;
                }
            }
            Ok(())
        })
    };
    let goes_on = |after: &str| {
        let from = claimed.lock().unwrap().len();
        eventually(&format!("claims to go on after {after}"), || {
            consumer.is_finished() || claimed.lock().unwrap().len() >= from + 20
        });
    };
    goes_on("the start");
    for statement in &statements {
        admin
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        goes_on(statement);
    }
    stop.store(true, Ordering::SeqCst);
    consumer.join().unwrap().expect("the consumer failed");

    let claimed = claimed.lock().unwrap().clone();
    assert!(
        claimed.len() >= 20 * (statements.len() + 1),
        "{} claimed",
        claimed.len()
    );
    assert!(
        claimed.iter().all(|(_, group)| group == "b"),
        "a job of group a was claimed while its head was in flight"
    );
    assert!(
        claimed.windows(2).all(|w| w[0].0 < w[1].0),
        "b's jobs were claimed out of order"
    );
    let left: (i64, i64, i64) = one_row(
        &mut admin,
        "SELECT pending, processing, head_id FROM queue_groups('m.ord')
          WHERE group_key = 'a'",
        &[],
    );
    assert_eq!(left, (9999, 1, a_head), "group a waits on its head, whole");
    let b_left: i64 = one(
        &mut admin,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'm.ord' AND payload->>'g' = 'b'
            AND status = 'pending'",
        &[],
    );
    assert_eq!(
        b_left as usize,
        10000 - claimed.len(),
        "b's jobs, each claimed once"
    );
    assert!(
        !cluster.server_log().contains("terminated by signal"),
        "a backend crashed"
    );
}
