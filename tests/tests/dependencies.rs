//! Jobs that wait for other jobs, over real connections: parents that end
//! at once from many connections release their child exactly once; the
//! worker delivers a chain in order and its senders see `depends_on`; a
//! release wakes a consumer waiting on the child's queue; and an immediate
//! stop or a failover to a synchronous standby loses and doubles no release.
//! (The interleavings that can be written step by step are isolation specs:
//! pg_test/isolation/specs/dependencies.spec.)

use std::collections::HashMap;

use queue_client_tests::{
    claim, column, complete, enqueue_many, eventually, on_connections, one, one_row, Client,
    Cluster, DURABLE,
};

/// (status, waiting_for) of job `id`.
fn state(client: &mut Client, id: i64) -> (String, i32) {
    one_row(
        client,
        "SELECT status, waiting_for FROM queue_jobs WHERE id = $1",
        &[&id],
    )
}

#[test]
fn parents_ending_at_once_from_eight_connections_release_their_child_once() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('parts', lease => '1 hour');
             SELECT queue_create('joins');",
        )
        .unwrap();
    for round in 0..3 {
        let parents = enqueue_many(&mut admin, "parts", 400);
        let child: i64 = one(
            &mut admin,
            "SELECT queue_enqueue('joins', jsonb_build_object('round', $1::int), depends_on => $2)",
            &[&round, &parents],
        );
        assert_eq!(state(&mut admin, child), ("pending".into(), 400));
        // 8 consumers claim and complete the parents as fast as they can,
        // one job per transaction, so that their ends meet on the child
        let done: Vec<usize> = on_connections(&cluster, 8, |_, client| {
            let mut done = 0;
            loop {
                let jobs = claim(client, "parts", 1);
                let Some((id, lease)) = jobs.first() else {
                    return done;
                };
                assert!(complete(client, *id, lease));
                done += 1;
            }
        });
        assert_eq!(done.iter().sum::<usize>(), 400);
        assert_eq!(
            state(&mut admin, child),
            ("pending".into(), 0),
            "round {round}"
        );
        let claimed: Vec<i64> = claim(&mut admin, "joins", 10).iter().map(|j| j.0).collect();
        assert_eq!(claimed, vec![child], "released once, round {round}");
        let edges: i64 = one(&mut admin, "SELECT count(*) FROM queue_edges", &[]);
        assert_eq!(edges, 0, "every edge counted");
    }
}

#[test]
fn the_worker_delivers_a_chain_in_order_and_senders_see_their_parents() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE TABLE seen (job bigint, step text, depends_on jsonb, parents jsonb,
                                at timestamptz DEFAULT clock_timestamp());
             CREATE FUNCTION step(job jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO seen (job, step, depends_on, parents)
                 SELECT (job->>'id')::bigint, job->'payload'->>'step', job->'depends_on',
                        (SELECT jsonb_agg(jsonb_build_object('status', p.status, 'result', p.result))
                           FROM queue_parents((job->>'id')::bigint) p);
                 RETURN jsonb_build_object('step', job->'payload'->>'step');
             END $$;
             SELECT queue_create('extract');
             SELECT queue_create('transform');
             SELECT queue_register_sender('extract', 'step(jsonb)');
             SELECT queue_register_sender('transform', 'step(jsonb)');",
        )
        .unwrap();
    // a diamond: b and c wait for a, d for both; enqueued in one
    // transaction, d first in claim order of its queue
    let ids: Vec<i64> = column(
        &mut admin,
        "WITH a AS (SELECT queue_enqueue('extract', '{\"step\": \"a\"}') AS id),
              b AS (SELECT queue_enqueue('transform', '{\"step\": \"b\"}',
                                         depends_on => ARRAY[(SELECT id FROM a)]) AS id),
              c AS (SELECT queue_enqueue('transform', '{\"step\": \"c\"}',
                                         depends_on => ARRAY[(SELECT id FROM a)]) AS id)
         SELECT id FROM a UNION ALL SELECT id FROM b UNION ALL SELECT id FROM c",
        &[],
    );
    let d: i64 = one(
        &mut admin,
        "SELECT queue_enqueue('transform', '{\"step\": \"d\"}', priority => 10, depends_on => $1)",
        &[&vec![ids[1], ids[2]]],
    );
    eventually("the diamond delivered", || {
        one::<i64>(&mut admin, "SELECT count(*) FROM seen", &[]) == 4
    });
    let order: Vec<String> = column(&mut admin, "SELECT step FROM seen ORDER BY at", &[]);
    assert_eq!(order[0], "a");
    assert_eq!(order[3], "d", "d after b and c: {order:?}");
    let (depends_on, parents): (serde_json::Value, serde_json::Value) = one_row(
        &mut admin,
        "SELECT depends_on, parents FROM seen WHERE job = $1",
        &[&d],
    );
    assert_eq!(depends_on, serde_json::json!([ids[1], ids[2]]));
    assert_eq!(
        parents,
        serde_json::json!([
            {"status": "succeeded", "result": {"step": "b"}},
            {"status": "succeeded", "result": {"step": "c"}}
        ])
    );
    let root: Option<serde_json::Value> = one(
        &mut admin,
        "SELECT depends_on FROM seen WHERE step = 'a'",
        &[],
    );
    assert_eq!(root, None, "no depends_on without parents");
}

/// A chain in a sender queue: each delivery's commit releases the next
/// job, which no other session announces. With a poll of an hour, a worker
/// that waited for its next look after each job (its upkeep's, once a
/// second) would take 100 seconds over a chain of 100, past the deadline;
/// it goes straight on when a round's own commits made jobs due.
#[test]
fn the_worker_goes_down_a_chain_without_waiting_for_its_poll() {
    let cluster = Cluster::start_with(&["queue.poll_interval = '1h'"]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE TABLE seen (n serial, step int);
             CREATE FUNCTION step(job jsonb) RETURNS void LANGUAGE sql
                 AS $$ INSERT INTO seen (step) VALUES ((job->'payload'->>'step')::int) $$;
             SELECT queue_create('chain');
             SELECT queue_register_sender('chain', 'step(jsonb)');
             BEGIN;
             DO $$
             DECLARE parent bigint;
             BEGIN
                 FOR i IN 1..100 LOOP
                     parent := queue_enqueue('chain', jsonb_build_object('step', i),
                                             depends_on => CASE WHEN parent IS NULL THEN NULL
                                                                ELSE ARRAY[parent] END);
                 END LOOP;
             END $$;
             COMMIT;",
        )
        .unwrap();
    eventually("the chain delivered", || {
        one::<i64>(&mut admin, "SELECT count(*) FROM seen", &[]) == 100
    });
    let order: Vec<i32> = column(&mut admin, "SELECT step FROM seen ORDER BY n", &[]);
    assert_eq!(order, (1..=100).collect::<Vec<i32>>());
}

#[test]
fn a_release_wakes_a_consumer_waiting_on_the_childs_queue() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('first', lease => '1 hour');
             SELECT queue_create('then');",
        )
        .unwrap();
    let parent = enqueue_many(&mut admin, "first", 1)[0];
    admin
        .execute(
            "SELECT queue_enqueue('then', '{}', depends_on => ARRAY[$1::bigint])",
            &[&parent],
        )
        .unwrap();
    let (lease_id, lease) = claim(&mut admin, "first", 1).remove(0);
    assert_eq!(lease_id, parent);
    let mut waiter = cluster.connect();
    let waiting = std::thread::spawn(move || -> bool {
        waiter
            .query_one("CALL queue_wait('then', '60 seconds', NULL)", &[])
            .unwrap()
            .get("ready")
    });
    eventually("the consumer waiting", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM pg_stat_activity
              WHERE query LIKE 'CALL queue_wait%' AND wait_event_type = 'Extension'",
            &[],
        ) == 1
    });
    assert!(complete(&mut admin, parent, &lease));
    assert!(waiting.join().unwrap(), "woken by the release, ready");
}

/// Every child of `parents` (each with two parents, two children per pair)
/// is released once all of its parents have ended, and never twice.
fn check_released_once(client: &mut Client, children: &[i64]) {
    let rows = client
        .query(
            "SELECT id, status, waiting_for FROM queue_jobs WHERE id = ANY ($1)",
            &[&children],
        )
        .unwrap();
    let states: HashMap<i64, (String, i32)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let edges: i64 = one(client, "SELECT count(*) FROM queue_edges", &[]);
    assert_eq!(edges, 0, "every edge counted once");
    for child in children {
        assert_eq!(
            states.get(child),
            Some(&("pending".to_string(), 0)),
            "child {child} released"
        );
    }
    let claimed = claim(client, "children", 10_000).len();
    assert_eq!(claimed, children.len(), "each child claimable once");
}

/// 300 parents in pairs, each pair with two children; the parents are
/// completed from 4 connections while `interrupt` stops the server, after
/// which the rest are completed.
fn parents_and_children(cluster: &Cluster) -> Vec<i64> {
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT queue_create('parents', lease => '2 seconds', retry_delay => '0',
                                 max_attempts => 100);
             SELECT queue_create('children');",
        )
        .unwrap();
    let parents = enqueue_many(&mut admin, "parents", 300);
    let mut children = Vec::new();
    for pair in parents.chunks(2) {
        for _ in 0..2 {
            children.push(one::<i64>(
                &mut admin,
                "SELECT queue_enqueue('children', '{}', depends_on => $1)",
                &[&pair.to_vec()],
            ));
        }
    }
    children
}

/// Consumers complete parents until none is left (a lease lost in a
/// stop makes its job come back after 2 seconds).
fn complete_every_parent(cluster: &Cluster) {
    let mut admin = cluster.connect();
    eventually("every parent done", || {
        on_connections(cluster, 4, |_, client| loop {
            let jobs = claim(client, "parents", 5);
            if jobs.is_empty() {
                return;
            }
            for (id, lease) in jobs {
                complete(client, id, &lease);
            }
        });
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'parents' AND status <> 'succeeded'",
            &[],
        ) == 0
    });
}

#[test]
fn an_immediate_stop_amid_releases_loses_and_doubles_none() {
    let cluster = Cluster::start_with(&[DURABLE]);
    let children = parents_and_children(&cluster);
    // complete some parents from 4 connections, and stop the server the
    // hard way while they do
    let config = cluster.config(queue_client_tests::DB);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let config = config.clone();
            std::thread::spawn(move || {
                let Ok(mut client) = config.connect(queue_client_tests::NoTls) else {
                    return;
                };
                while let Ok(rows) = client.query(
                    "SELECT id, lease::text FROM queue_claim('parents', 'w', 3, '2 seconds')",
                    &[],
                ) {
                    for row in rows {
                        let (id, lease): (i64, String) = (row.get(0), row.get(1));
                        if client
                            .execute("SELECT queue_complete($1, $2::text::uuid)", &[&id, &lease])
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    let mut admin = cluster.connect();
    eventually("some parents done", || {
        one::<i64>(
            &mut admin,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'parents' AND status = 'succeeded'",
            &[],
        ) >= 60
    });
    drop(admin);
    cluster.crash();
    for w in workers {
        let _ = w.join();
    }
    cluster.start_server();
    // (the jobs in flight at the stop come back once their leases expire)
    complete_every_parent(&cluster);
    let mut admin = cluster.connect();
    check_released_once(&mut admin, &children);
}

#[test]
fn a_failover_to_a_synchronous_standby_loses_and_doubles_no_release() {
    let primary = Cluster::start_with(&[DURABLE]);
    let standby = primary.synchronous_standby(&[]);
    let children = parents_and_children(&primary);
    // half the parents, then the primary goes
    let mut client = primary.connect();
    for _ in 0..30 {
        for (id, lease) in claim(&mut client, "parents", 5) {
            assert!(complete(&mut client, id, &lease));
        }
    }
    drop(client);
    primary.crash();
    standby.promote();
    complete_every_parent(&standby);
    let mut admin = standby.connect();
    check_released_once(&mut admin, &children);
}
