//! The latency histograms over real connections: the worker's deliveries
//! through a SQL sender are measured as pull consumers' claims are (golden
//! file metrics.sql), each database sees its own queues, a restart starts
//! them afresh, and queues beyond `queue.metrics_queues` are counted as
//! dropped.

use queue_client_tests::{claim, complete_all, enqueue_many, eventually, one, Client, Cluster};

/// (kind, outcome, count, sum_seconds) of queue `queue`, waits first.
fn histograms(client: &mut Client, queue: &str) -> Vec<(String, Option<String>, i64, f64)> {
    client
        .query(
            "SELECT kind, outcome, count, sum_seconds FROM queue_latency
              WHERE queue = $1 ORDER BY kind DESC, outcome",
            &[&queue],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

fn counts(client: &mut Client, queue: &str) -> Vec<i64> {
    histograms(client, queue).iter().map(|h| h.2).collect()
}

#[test]
fn the_worker_measures_its_deliveries_per_queue_and_database_until_a_restart() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE FUNCTION deliver(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload' ? 'bad' THEN
                     RAISE EXCEPTION 'no' USING ERRCODE = 'QU001';
                 END IF;
                 PERFORM pg_sleep(0.02);
             END $$;
             SELECT queue_create('sent');
             SELECT queue_register_sender('sent', 'deliver(jsonb)');
             SELECT count(*) FROM queue_enqueue_batch('sent', array_fill('{}'::jsonb, ARRAY[19]));
             SELECT queue_enqueue('sent', '{\"bad\": true}');",
        )
        .unwrap();
    eventually("every job delivered", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'sent' AND status IN ('pending', 'processing')",
            &[],
        ) == 0
    });
    // waits, then runs cancelled, failed, succeeded
    let sent = histograms(&mut admin, "sent");
    let counts_of: Vec<i64> = sent.iter().map(|h| h.2).collect();
    assert_eq!(counts_of, [20, 0, 1, 19], "{sent:?}");
    assert!(
        sent[3].3 >= 19.0 * 0.02,
        "the runs' sum holds their sleeps: {sent:?}"
    );

    // another database, a queue of the same name, pulled: its own figures
    cluster.create_database(
        "other",
        "CREATE EXTENSION queue; SELECT queue_create('sent');",
    );
    let mut other = cluster.connect_to("other");
    enqueue_many(&mut other, "sent", 5);
    let jobs = claim(&mut other, "sent", 5);
    complete_all(&mut other, &jobs);
    assert_eq!(counts(&mut other, "sent"), [5, 0, 0, 5]);
    assert_eq!(counts(&mut admin, "sent"), [20, 0, 1, 19]);

    // kept in shared memory: a restart starts afresh
    cluster.stop_server();
    cluster.start_server();
    let mut admin = cluster.connect();
    assert!(counts(&mut admin, "sent").is_empty());
}

#[test]
fn queues_beyond_the_slots_are_counted_as_dropped() {
    let cluster = Cluster::start_with(&["queue.metrics_queues = 16"]);
    let mut admin = cluster.connect();
    for n in 0..20 {
        let queue = format!("q{n}");
        admin.execute("SELECT queue_create($1)", &[&queue]).unwrap();
        enqueue_many(&mut admin, &queue, 1);
        let jobs = claim(&mut admin, &queue, 1);
        complete_all(&mut admin, &jobs);
    }
    let (slots, used, dropped): (i32, i32, i64) = {
        let row = admin
            .query_one("SELECT * FROM queue_metrics_status()", &[])
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    // (each of the 4 queues left out dropped a wait and a run)
    assert_eq!((slots, used, dropped), (16, 16, 8));
    let measured: i64 = one(
        &mut admin,
        "SELECT count(DISTINCT queue) FROM queue_latency WHERE count > 0",
        &[],
    );
    assert_eq!(measured, 16);
}
