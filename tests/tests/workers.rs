//! The launcher and the per-database workers, on clusters with the library
//! preloaded: discovery, more databases than slots, wake on commit, DROP
//! DATABASE, CREATE DATABASE ... TEMPLATE, DROP EXTENSION, reloads, a
//! killed worker, and the pull API without the preload. Deadlines are
//! generous (30 s); nothing here asserts a timing.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use queue_client_tests::{all_rows, eventually, one, one_row, Client, Cluster, NoTls, DB};

/// Checks that `f` holds for a while: only for an absence that nothing
/// records (no worker comes back, none starts while switched off); what
/// shared memory counts (wake-ups sent) is asserted exactly instead.
fn stays(what: &str, duration: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        assert!(f(), "{what}");
        sleep(Duration::from_millis(50));
    }
}

/// (pid, database, state) of every row of queue_workers.
fn workers(client: &mut Client) -> Vec<(Option<i32>, Option<String>, String)> {
    all_rows(
        client,
        "SELECT pid, database, state FROM queue_workers",
        &[],
    )
}

/// The pid of `database`'s worker, if one runs.
fn worker_of(client: &mut Client, database: &str) -> Option<i32> {
    workers(client)
        .into_iter()
        .find(|w| w.0.is_some() && w.1.as_deref() == Some(database))
        .and_then(|w| w.0)
}

/// A new database with the extension, a queue and a job in it.
fn served_database(cluster: &Cluster, name: &str) {
    cluster.create_database(
        name,
        // a sender queue: its commits wake a running worker (pull
        // queues' commits only ask for one when none runs)
        "CREATE EXTENSION queue;
         SELECT queue_create('jobs');
         CREATE FUNCTION public.nothing(job jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
         SELECT queue_register_sender('jobs', 'public.nothing(jsonb)');
         SELECT queue_enqueue('jobs', '{}');",
    );
}

fn wakes(client: &mut Client) -> i64 {
    one(client, "SELECT count(*) FROM queue_wake_latencies()", &[])
}

/// A sender that does nothing: a queue delivered by it makes the worker
/// come for its jobs.
const NOTHING_SENDER: &str =
    "CREATE FUNCTION public.nothing(job jsonb) RETURNS void LANGUAGE sql AS 'SELECT'";

/// The no-op sender and a queue `queue` it delivers (whose commits ask for a
/// worker at once); returns once the database's worker runs.
fn nothing_queue_served(main: &mut Client, queue: &str) {
    main.batch_execute(NOTHING_SENDER).unwrap();
    main.batch_execute(&format!(
        "SELECT queue_create('{queue}');
         SELECT queue_register_sender('{queue}', 'public.nothing(jsonb)')"
    ))
    .unwrap();
    eventually("the worker", || worker_of(main, DB).is_some());
}

#[test]
fn the_launcher_finds_databases_and_workers_name_themselves() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    eventually("the worker of the first database", || {
        worker_of(&mut main, DB).is_some()
    });
    served_database(&cluster, "tenant_new");
    eventually(
        "a worker for a database that just got the extension",
        || worker_of(&mut main, "tenant_new").is_some(),
    );
    let named: i64 = one(
        &mut main,
        "SELECT count(*) FROM pg_stat_activity
          WHERE backend_type = 'queue worker' AND application_name = 'queue worker'
            AND datname = 'tenant_new'",
        &[],
    );
    assert_eq!(named, 1);
    let launchers: i64 = one(
        &mut main,
        "SELECT count(*) FROM pg_stat_activity
          WHERE backend_type = 'queue launcher' AND application_name = 'queue launcher'",
        &[],
    );
    assert_eq!(launchers, 1);

    // a database that takes no connections, or a template, is not served
    served_database(&cluster, "tenant_closed");
    served_database(&cluster, "tenant_template");
    eventually("workers for both", || {
        worker_of(&mut main, "tenant_closed").is_some()
            && worker_of(&mut main, "tenant_template").is_some()
    });
    let mut admin = cluster.connect_to("postgres");
    admin
        .batch_execute(
            "ALTER DATABASE tenant_closed WITH ALLOW_CONNECTIONS false;
             ALTER DATABASE tenant_template WITH IS_TEMPLATE true ALLOW_CONNECTIONS false;",
        )
        .unwrap();
    eventually("their workers to go", || {
        worker_of(&mut main, "tenant_closed").is_none()
            && worker_of(&mut main, "tenant_template").is_none()
    });
    stays("no worker comes back", Duration::from_secs(3), || {
        workers(&mut main)
            .iter()
            .all(|w| !matches!(w.1.as_deref(), Some("tenant_closed" | "tenant_template")))
    });
}

#[test]
fn more_databases_than_slots_are_served_in_turn() {
    let cluster = Cluster::start_with(&["queue.max_workers = 1", "queue.idle_exit = 1"]);
    let names = ["tenant_a", "tenant_b", "tenant_c"];
    for name in names {
        served_database(&cluster, name);
        // each delivery holds the one slot a while, so that the others are
        // seen waiting for it
        cluster
            .connect_to(name)
            .batch_execute(
                "CREATE OR REPLACE FUNCTION public.nothing(job jsonb) RETURNS void
                 LANGUAGE sql AS 'SELECT pg_sleep(0.3)'",
            )
            .unwrap();
    }
    // each commit asks for a worker again
    for name in names {
        cluster
            .connect_to(name)
            .batch_execute("SELECT queue_enqueue('jobs', '{}')")
            .unwrap();
    }
    let mut main = cluster.connect();
    let mut tenants: Vec<Client> = names.iter().map(|n| cluster.connect_to(n)).collect();
    let mut waited = HashSet::new();
    eventually("every database's jobs delivered in turn", || {
        let rows = workers(&mut main);
        let running = rows.iter().filter(|w| w.2 != "waiting for slot").count();
        assert!(running <= 1, "more workers than slots: {rows:?}");
        for (pid, database, state) in rows {
            if state == "waiting for slot" {
                assert_eq!(pid, None);
                waited.insert(database.unwrap_or_default());
            }
        }
        tenants.iter_mut().all(|t| {
            one::<i64>(
                t,
                "SELECT count(*) FROM queue_jobs WHERE status <> 'succeeded'",
                &[],
            ) == 0
        })
    });
    assert!(
        !waited.is_empty(),
        "no database was seen waiting for a slot"
    );
}

#[test]
fn a_commit_wakes_the_worker_once_and_a_rollback_never() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    // the worker is woken for jobs it delivers: a queue with a sender
    nothing_queue_served(&mut main, "w");
    // A commit sends its wake-up before it returns: the count of wake-ups
    // sent is exact right after each statement, with no window to wait out.
    let sent = |client: &mut Client| one::<i64>(client, "SELECT queue_wakes_sent()", &[]);
    let before = sent(&mut main);
    let taken = wakes(&mut main);

    main.batch_execute("SELECT queue_enqueue('w', '{}')")
        .unwrap();
    assert_eq!(sent(&mut main), before + 1, "a wake-up for the commit");
    eventually("the worker to take it in", || wakes(&mut main) > taken);

    let mut producer = cluster.connect();
    let mut tx = producer.transaction().unwrap();
    for _ in 0..3 {
        tx.execute("SELECT queue_enqueue('w', '{}')", &[]).unwrap();
    }
    assert_eq!(sent(&mut main), before + 1, "no wake-up before the commit");
    tx.commit().unwrap();
    assert_eq!(
        sent(&mut main),
        before + 2,
        "one wake-up for the transaction"
    );

    let mut tx = producer.transaction().unwrap();
    tx.execute("SELECT queue_enqueue('w', '{}')", &[]).unwrap();
    tx.rollback().unwrap();
    assert_eq!(sent(&mut main), before + 2, "no wake-up for a rollback");

    // a pull queue's jobs are none of a running worker's business
    main.batch_execute("SELECT queue_create('pull'); SELECT queue_enqueue('pull', '{}')")
        .unwrap();
    assert_eq!(sent(&mut main), before + 2, "no wake-up for a pull queue");
    assert!(
        worker_of(&mut main, DB).is_some(),
        "the worker ran throughout (a commit without one asks the launcher instead)"
    );
}

#[test]
fn drop_database_and_create_database_from_a_served_template() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    let mut admin = cluster.connect_to("postgres");

    served_database(&cluster, "tenant_idle");
    eventually("its worker", || {
        worker_of(&mut main, "tenant_idle").is_some()
    });
    admin.batch_execute("DROP DATABASE tenant_idle").unwrap();
    assert!(worker_of(&mut main, "tenant_idle").is_none());

    // busy: commits keep waking the worker until the moment of the drop
    served_database(&cluster, "tenant_busy");
    eventually("its worker", || {
        worker_of(&mut main, "tenant_busy").is_some()
    });
    {
        let mut producer = cluster.connect_to("tenant_busy");
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            producer
                .batch_execute(
                    "SELECT queue_enqueue_batch('jobs', array_fill('{}'::jsonb, ARRAY[100]))",
                )
                .unwrap();
        }
    }
    admin.batch_execute("DROP DATABASE tenant_busy").unwrap();

    served_database(&cluster, "tenant_source");
    eventually("its worker", || {
        worker_of(&mut main, "tenant_source").is_some()
    });
    admin
        .batch_execute("CREATE DATABASE tenant_copy TEMPLATE tenant_source")
        .unwrap();
    eventually("workers for the template and its copy", || {
        worker_of(&mut main, "tenant_source").is_some()
            && worker_of(&mut main, "tenant_copy").is_some()
    });
    let copied: i64 = one(
        &mut cluster.connect_to("tenant_copy"),
        "SELECT count(*) FROM queue_jobs",
        &[],
    );
    assert_eq!(copied, 1);
}

#[test]
fn drop_extension_lets_the_worker_go_and_create_extension_brings_it_back() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    served_database(&cluster, "tenant_other");
    let mut other = cluster.connect_to("tenant_other");
    eventually("the worker", || worker_of(&mut other, DB).is_some());
    main.batch_execute("SET statement_timeout = '20s'; DROP EXTENSION queue")
        .unwrap();
    eventually("the worker to let go", || {
        worker_of(&mut other, DB).is_none()
    });
    main.batch_execute("CREATE EXTENSION queue").unwrap();
    eventually("a worker again", || worker_of(&mut other, DB).is_some());
}

#[test]
fn reloads_change_the_workers_at_once() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    // a sender queue: its commits ask for a worker at once (a pull queue's
    // only make the database's upkeep due, for a visit later)
    nothing_queue_served(&mut main, "r");
    // a shorter idle time: the idle worker gives its slot back
    main.batch_execute("ALTER SYSTEM SET queue.idle_exit = 1")
        .unwrap();
    main.batch_execute("SELECT pg_reload_conf()").unwrap();
    eventually("the idle worker to exit", || {
        worker_of(&mut main, DB).is_none()
    });
    // switched off: a commit starts no worker
    main.batch_execute("ALTER SYSTEM SET queue.idle_exit = 60")
        .unwrap();
    main.batch_execute("ALTER SYSTEM SET queue.enabled = off")
        .unwrap();
    main.batch_execute("SELECT pg_reload_conf()").unwrap();
    sleep(Duration::from_millis(500));
    main.batch_execute("SELECT queue_enqueue('r', '{}')")
        .unwrap();
    stays(
        "no worker while switched off",
        Duration::from_secs(2),
        || worker_of(&mut main, DB).is_none(),
    );
    main.batch_execute("ALTER SYSTEM SET queue.enabled = on")
        .unwrap();
    main.batch_execute("SELECT pg_reload_conf()").unwrap();
    eventually("a worker once switched on", || {
        worker_of(&mut main, DB).is_some()
    });
}

#[test]
fn a_killed_worker_is_replaced() {
    let cluster = Cluster::start();
    let mut main = cluster.connect();
    eventually("the worker", || worker_of(&mut main, DB).is_some());
    let killed = worker_of(&mut main, DB).unwrap();
    kill_hard(killed);
    // PostgreSQL restarts every process after a crash; connect again
    eventually("a new worker", || {
        let Ok(mut client) = cluster.config(DB).connect(NoTls) else {
            return false;
        };
        let Ok(rows) = client.query("SELECT pid FROM queue_workers WHERE database = $1", &[&DB])
        else {
            return false;
        };
        let pid: Option<Option<i32>> = rows.first().map(|r| r.get(0));
        matches!(pid, Some(Some(p)) if p != killed)
    });
}

fn kill_hard(pid: i32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn without_the_preload_the_pull_api_works_and_says_so() {
    let cluster = Cluster::start_with(&["shared_preload_libraries = ''"]);
    cluster
        .connect_to("postgres")
        .batch_execute("CREATE DATABASE plain")
        .unwrap();
    let notices = Arc::new(Mutex::new(Vec::new()));
    let mut config = cluster.config("plain");
    let notices_seen = notices.clone();
    let seen = notices.clone();
    config.notice_callback(move |notice| {
        seen.lock().unwrap().push((
            notice.message().to_string(),
            notice.hint().map(str::to_string),
        ))
    });
    let mut client = config.connect(NoTls).unwrap();
    client.batch_execute("CREATE EXTENSION queue").unwrap();
    // a sender registers, with the same warning
    client
        .batch_execute(
            "SELECT queue_create('pushed');
             CREATE FUNCTION public.send(job jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
             SELECT queue_register_sender('pushed', 'public.send(jsonb)')",
        )
        .unwrap();
    let notices = notices.lock().unwrap().clone();
    assert_eq!(
        notices
            .iter()
            .filter(|(message, _)| message.contains("background worker is not running"))
            .count(),
        2,
        "{notices:?}"
    );
    assert!(
        notices.iter().any(
            |(message, hint)| message.contains("background worker is not running")
                && hint
                    .as_deref()
                    .is_some_and(|h| h.contains("shared_preload_libraries"))
        ),
        "{notices:?}"
    );
    client
        .batch_execute("SELECT queue_create('pull'); SELECT queue_enqueue('pull', '{\"a\": 1}')")
        .unwrap();
    let done: bool = one(
        &mut client,
        "SELECT queue_complete(id, lease) FROM queue_claim('pull')",
        &[],
    );
    assert!(done);
    let rows: i64 = one(&mut client, "SELECT count(*) FROM queue_workers", &[]);
    assert_eq!(rows, 0);
    // a schedule is stored, with a warning and a hint; run by hand, it works
    client
        .batch_execute("SELECT queue_schedule('nightly', 'pull', '0 3 * * *')")
        .unwrap();
    assert!(
        notices_seen
            .lock()
            .unwrap()
            .iter()
            .any(
                |(message, hint)| message.contains("the schedule is stored, but no tick fires")
                    && hint
                        .as_deref()
                        .is_some_and(|h| h.contains("shared_preload_libraries"))
            ),
        "{:?}",
        notices_seen.lock().unwrap()
    );
    let next_run_at_set: bool = one(
        &mut client,
        "SELECT next_run_at IS NOT NULL FROM queue_schedules WHERE name = 'nightly'",
        &[],
    );
    assert!(next_run_at_set);
    let id: i64 = one(&mut client, "SELECT queue_run_schedule('nightly')", &[]);
    let schedule: String = one(
        &mut client,
        "SELECT headers->>'schedule' FROM queue_jobs WHERE id = $1",
        &[&id],
    );
    assert_eq!(schedule, "nightly");
    // queue_wait refuses, saying why and what to do
    let err = client
        .batch_execute("CALL queue_wait('pull', '1 second', NULL)")
        .unwrap_err();
    let err = err.as_db_error().unwrap();
    assert_eq!(err.code().code(), "55000");
    assert!(
        err.message().contains("shared_preload_libraries"),
        "{err:?}"
    );
    assert!(
        err.hint().is_some_and(|h| h.contains("queue_claim")),
        "{err:?}"
    );
}

/// A sender queue `drain` whose sender records each job's id and the
/// backend that delivered it in `sent`.
fn recorded_drain(client: &mut Client) {
    client
        .batch_execute(
            "CREATE TABLE sent (id bigint, pid int);
             CREATE FUNCTION record(job jsonb) RETURNS void LANGUAGE sql
                 AS $$ INSERT INTO sent VALUES ((job->>'id')::bigint, pg_backend_pid()) $$;
             SELECT queue_create('drain');
             SELECT queue_register_sender('drain', 'record(jsonb)', batch_size => 100);",
        )
        .unwrap();
}

/// `jobs` (a multiple of 10,000) enqueued in `drain` while it is paused,
/// then resumed: the worker finds a backlog of full batches.
fn backlog(client: &mut Client, jobs: i32) {
    client
        .batch_execute(&format!(
            "SELECT queue_pause('drain');
             SELECT count(*) FROM generate_series(1, {}) g,
                    LATERAL queue_enqueue_batch('drain', array_fill('{{}}'::jsonb, ARRAY[10000 + 0 * g]));
             SELECT queue_resume('drain');",
            jobs / 10_000
        ))
        .unwrap();
}

/// A database whose worker keeps finding full batches gets a helper
/// (queue.max_workers_per_database, 2 by default): both deliver, no job
/// twice; the helper leaves with the backlog, and DROP DATABASE stops both.
#[test]
fn a_busy_database_gets_a_helper_and_no_job_goes_out_twice() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect_to("postgres");
    admin.batch_execute("CREATE DATABASE busy").unwrap();
    let mut client = cluster.connect_to("busy");
    client.batch_execute("CREATE EXTENSION queue").unwrap();
    recorded_drain(&mut client);
    backlog(&mut client, 60_000);
    let mut most = 0;
    eventually("every job delivered", || {
        let running: i64 = one(
            &mut client,
            "SELECT count(*) FROM queue_workers WHERE database = 'busy' AND pid IS NOT NULL",
            &[],
        );
        most = most.max(running);
        one::<i64>(
            &mut client,
            "SELECT succeeded_total FROM queue_stats WHERE queue = 'drain'",
            &[],
        ) == 60_000
    });
    let (calls, jobs, workers): (i64, i64, i64) = one_row(
        &mut client,
        "SELECT count(*), count(DISTINCT id), count(DISTINCT pid) FROM sent",
        &[],
    );
    assert_eq!((calls, jobs), (60_000, 60_000), "each job delivered once");
    assert!(workers >= 2, "a helper delivered too ({workers} workers)");
    assert!(
        most <= 2,
        "at most queue.max_workers_per_database workers ({most})"
    );
    // the helper leaves with the backlog; the worker stays (idle_exit)
    eventually("the helper gone", || {
        one::<i64>(
            &mut client,
            "SELECT count(*) FROM queue_workers WHERE database = 'busy' AND pid IS NOT NULL",
            &[],
        ) == 1
    });
    // again, and DROP DATABASE while both deliver
    backlog(&mut client, 60_000);
    eventually("two workers", || {
        one::<i64>(
            &mut client,
            "SELECT count(*) FROM queue_workers WHERE database = 'busy' AND pid IS NOT NULL",
            &[],
        ) == 2
    });
    drop(client);
    admin
        .batch_execute("SET statement_timeout = '60s'")
        .unwrap();
    admin.batch_execute("DROP DATABASE busy").unwrap();
    assert_eq!(
        one::<i64>(
            &mut cluster.connect(),
            "SELECT count(*) FROM queue_workers WHERE database = 'busy'",
            &[],
        ),
        0
    );
}

/// With queue.max_workers_per_database = 1 a database never gets a helper.
#[test]
fn one_worker_per_database_when_the_setting_says_so() {
    let cluster = Cluster::start_with(&["queue.max_workers_per_database = 1"]);
    let mut client = cluster.connect();
    recorded_drain(&mut client);
    backlog(&mut client, 30_000);
    eventually("every job delivered", || {
        one::<i64>(
            &mut client,
            "SELECT succeeded_total FROM queue_stats WHERE queue = 'drain'",
            &[],
        ) == 30_000
    });
    let workers: i64 = one(&mut client, "SELECT count(DISTINCT pid) FROM sent", &[]);
    assert_eq!(workers, 1);
}
