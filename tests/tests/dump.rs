//! pg_dump of a tenant database keeps its queues and jobs: restored into a
//! new database, every job is back in the same state, and the queue works on.

use queue_client_tests::{column, eventually, one, Cluster, DB};

/// Every retained job, every column, as text.
fn snapshot(client: &mut queue_client_tests::Client) -> Vec<String> {
    column(client, "SELECT j::text FROM queue_jobs j ORDER BY id", &[])
}

#[test]
fn pg_dump_keeps_queues_and_jobs() {
    let cluster = Cluster::start();
    let mut source = cluster.connect();
    source
        .batch_execute(
            "SELECT queue_create('dump.a', max_attempts => 3, lease => '1 hour');
             SELECT queue_create('dump.b', backoff => 'fixed', retention => '30 days');
             SELECT queue_enqueue('dump.a', '{\"n\": 1}', priority => 5, dedup_key => 'k',
                                  headers => '{\"h\": 1}');
             SELECT queue_enqueue('dump.a', '{\"n\": 2}', delay => '1 day');
             SELECT count(*) FROM queue_enqueue_batch('dump.b',
                 ARRAY['{\"n\": 3}', '{\"n\": 4}', '{\"n\": 5}']::jsonb[]);
             SELECT queue_complete(id, lease) FROM queue_claim('dump.b');
             SELECT queue_fail(id, lease, 'broken', permanent => true) FROM queue_claim('dump.b');
             SELECT count(*) FROM queue_claim('dump.b', 'holder');
             SELECT count(*) FROM queue_claim('dump.a', 'holder');",
        )
        .unwrap();
    // one rotation, so that jobs sit in the second partition too
    source
        .batch_execute("SELECT queue_maintain(force => true)")
        .unwrap();
    source
        .batch_execute("SELECT queue_enqueue('dump.b', '{\"n\": 6}')")
        .unwrap();
    let before = snapshot(&mut source);
    assert_eq!(before.len(), 6);

    let dump = std::env::temp_dir().join(format!("queue-dump-{}.sql", std::process::id()));
    let file = dump.to_str().unwrap();
    cluster.run_client("pg_dump", &["-f", file, DB]);
    cluster
        .connect_to("postgres")
        .batch_execute("CREATE DATABASE restored")
        .unwrap();
    cluster.run_client(
        "psql",
        &[
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            "restored",
            "-f",
            file,
        ],
    );
    let _ = std::fs::remove_file(&dump);

    let mut restored = cluster.connect_to("restored");
    assert_eq!(snapshot(&mut restored), before);
    let same_queues: bool = one(
        &mut restored,
        "SELECT count(*) = 2 AND bool_and(owner = 'postgres'::regrole) FROM queue_queues
              WHERE (name, max_attempts, backoff, lease, retention) IN
                    (('dump.a', 3, 'exponential', '1 hour', '1 day'),
                     ('dump.b', 5, 'fixed', '5 minutes', '30 days'))",
        &[],
    );
    assert!(same_queues);

    // The restored queues work: new ids continue, and dedup keys still hold.
    let max_before: i64 = one(&mut source, "SELECT max(id) FROM queue_jobs", &[]);
    let next: i64 = one(
        &mut restored,
        "SELECT queue_enqueue('dump.a', '{\"n\": 7}')",
        &[],
    );
    assert!(next > max_before);
    let dedup: i64 = one(
        &mut restored,
        "SELECT queue_enqueue('dump.a', '{}', dedup_key => 'k')",
        &[],
    );
    let original: i64 = one(
        &mut source,
        "SELECT id FROM queue_jobs WHERE dedup_key = 'k'",
        &[],
    );
    assert_eq!(dedup, original);
    let claimed: i64 = one(
        &mut restored,
        "SELECT count(*) FROM queue_claim('dump.b', max_jobs => 10)",
        &[],
    );
    assert_eq!(claimed, 1, "the job enqueued after the rotation");
}

/// A tenant database with queues, pending and dead jobs, a sender, a webhook
/// with its secret, counters and grants, dumped with `pg_dump -Fc` and
/// restored with `pg_restore` into another cluster (where the roles were
/// made first, as roles belong to the cluster): everything is there, ids
/// continue, and once its worker runs the restored database is served.
#[test]
fn pg_restore_into_another_cluster_keeps_everything_and_is_served() {
    use queue_client_tests::receiver::Receiver;
    let receiver = Receiver::start();
    let allow = format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port);
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let source = Cluster::start_with(&[&allow]);
    let mut admin = source.connect();
    admin
        .batch_execute(&format!(
            "CREATE ROLE app LOGIN;
             REVOKE EXECUTE ON FUNCTION queue_enqueue(text, jsonb, interval, int, text, timestamptz, jsonb, text, bigint[], text)
                 FROM PUBLIC;
             GRANT EXECUTE ON FUNCTION queue_enqueue(text, jsonb, interval, int, text, timestamptz, jsonb, text, bigint[], text)
                 TO app;
             CREATE TABLE effects (job_id bigint);
             CREATE FUNCTION record_effect(job jsonb) RETURNS void LANGUAGE sql
                 AS $$ INSERT INTO effects VALUES ((job->>'id')::bigint) $$;
             SELECT queue_create('d.pull', max_attempts => 1);
             SELECT queue_enqueue_batch('d.pull', array_fill('{{}}'::jsonb, ARRAY[4]));
             SELECT queue_complete(id, lease) FROM queue_claim('d.pull', 'w', 1);
             SELECT queue_fail(id, lease, 'dead', permanent => true) FROM queue_claim('d.pull', 'w', 1);
             SELECT queue_maintain(force => true);
             SELECT queue_create('d.sql');
             SELECT queue_register_sender('d.sql', 'record_effect(jsonb)');
             SELECT queue_create('d.hook');
             SELECT queue_register_webhook('d.hook', '{}', secret => '{secret}');
             SELECT queue_pause('d.sql');
             SELECT queue_pause('d.hook');
             SELECT queue_enqueue_batch('d.sql', array_fill('{{}}'::jsonb, ARRAY[3]));
             SELECT queue_enqueue_batch('d.hook', array_fill('{{}}'::jsonb, ARRAY[2]));
             SELECT queue_schedule('d.tick', 'd.pull', '* * * * * *', paused => true);
             SELECT queue_schedule('d.nightly', 'd.sql', '0 3 * * *', time_zone => 'Europe/Berlin',
                                   catch_up => 'all', no_overlap => true);",
            receiver.url("/restored")
        ))
        .unwrap();
    let state = |client: &mut queue_client_tests::Client| -> Vec<String> {
        let mut all = snapshot(client);
        for sql in [
            "SELECT row(queue, paused, sender, pending, scheduled, processing, succeeded, failed,
                        cancelled, enqueued_total, succeeded_total, failed_total)::text
               FROM queue_stats ORDER BY queue",
            "SELECT row(q.name, w.url, w.secret, w.max_in_flight)::text
               FROM queue_webhooks w JOIN queue_queues q ON q.id = w.queue_id",
            "SELECT row(s.*)::text FROM queue_schedules s ORDER BY name",
            "SELECT p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '')
               FROM pg_proc p WHERE p.proname LIKE 'queue%' ORDER BY 1",
        ] {
            all.extend(client.query(sql, &[]).unwrap().iter().map(|r| r.get(0)));
        }
        all
    };
    let before = state(&mut admin);
    let max_before: i64 = one(&mut admin, "SELECT max(id) FROM queue_jobs", &[]);

    let dump = std::env::temp_dir().join(format!("queue-dump-{}.custom", std::process::id()));
    let file = dump.to_str().unwrap();
    source.run_client("pg_dump", &["-Fc", "-f", file, DB]);
    let target = Cluster::start_bare(&queue_client_tests::pg_config(), &[&allow]);
    let mut postgres = target.connect_to("postgres");
    postgres.batch_execute("CREATE ROLE app LOGIN").unwrap();
    postgres
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .unwrap();
    target.run_client("pg_restore", &["--exit-on-error", "-d", DB, file]);
    let _ = std::fs::remove_file(&dump);

    let mut restored = target.connect();
    assert_eq!(state(&mut restored), before);
    let next: i64 = one(&mut restored, "SELECT queue_enqueue('d.pull', '{}')", &[]);
    assert!(next > max_before, "ids continue: {next} after {max_before}");
    restored
        .batch_execute("SELECT queue_resume('d.sql'); SELECT queue_resume('d.hook');")
        .unwrap();
    eventually("the restored database to be served", || {
        one::<i64>(&mut restored, "SELECT count(*) FROM effects", &[]) == 3
            && receiver.seen("/restored").len() == 2
    });
    for seen in receiver.seen("/restored") {
        assert!(seen
            .header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,")));
    }
    // the restored schedules fire
    restored
        .batch_execute("SELECT queue_schedule('d.tick', 'd.pull', '* * * * * *')")
        .unwrap();
    eventually("a restored schedule's tick", || {
        one::<i64>(
            &mut restored,
            "SELECT count(*) FROM queue_jobs WHERE headers->>'schedule' = 'd.tick'",
            &[],
        ) > 0
    });
}
