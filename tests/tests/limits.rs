//! Limits (docs/groups.md) over real connections: `max_in_flight` and
//! `group_max_in_flight` sampled while consumers and the worker race, kept
//! by a transaction that claims twice, beside a claim that waits for it, and
//! by a prepared claim; rate windows counted from the claim times, a
//! rate-limited queue delivered by the worker as its windows free, and jobs a
//! stopped worker left in flight counted in their window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_client_tests::{
    all_rows, claim, complete, complete_all, enqueue_group, eventually, one, one_row, unfinished,
    waits_for_a_lock, Client, Cluster, EVENT_LOG,
};

/// The most jobs seen in flight at once, of the queue and of one group,
/// sampled by a connection of its own until `stop`.
fn sample_in_flight(
    config: postgres::Config,
    queue: &'static str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(i64, i64, usize)> {
    std::thread::spawn(move || {
        let mut client = config.connect(postgres::NoTls).unwrap();
        let (mut queue_max, mut group_max, mut samples) = (0, 0, 0);
        while !stop.load(Ordering::Relaxed) {
            // (one statement: one snapshot)
            let row = client
                .query_one(
                    "SELECT coalesce(sum(n), 0)::bigint, coalesce(max(n), 0)
                       FROM (SELECT group_key, count(*) AS n FROM queue_live l
                               JOIN queue_queues q ON q.id = l.queue_id
                              WHERE q.name = $1 AND l.state = 'processing'
                              GROUP BY group_key) g",
                    &[&queue],
                )
                .unwrap();
            queue_max = queue_max.max(row.get::<_, i64>(0));
            group_max = group_max.max(row.get::<_, i64>(1));
            samples += 1;
        }
        (queue_max, group_max, samples)
    })
}

#[test]
fn limits_hold_while_eight_consumers_and_the_worker_race() {
    // (limits per group: each claim runs alone)
    let (pull, push) = race_eight_consumers_and_the_worker(
        "max_in_flight => 5, group_max_in_flight => 2",
        "max_in_flight => 3, group_max_in_flight => 1",
    );
    assert!(pull.0 <= 5 && pull.1 <= 2, "pulled over a limit");
    assert!(push.0 <= 3 && push.1 <= 1, "pushed over a limit");
}

#[test]
fn limits_of_the_queue_as_a_whole_hold_while_claims_run_side_by_side() {
    // (limits of the queue as a whole: claims run beside each other, each
    // reserving what it may take; the worker's batches, delivered in one
    // transaction each, too)
    let (pull, push) = race_eight_consumers_and_the_worker(
        "max_in_flight => 5, rate_limit => '100000/1 second'",
        "max_in_flight => 3",
    );
    assert!(pull.0 <= 5, "pulled over a limit");
    assert!(push.0 <= 3, "pushed over a limit");
}

/// The sender of the limit tests' push queues: each call waits 2 ms and
/// writes down its job, its batch (the worker's transaction), its worker
/// and when it was called. (Needs `track_commit_timestamp`.)
const PUSH: &str = "CREATE TABLE pushed (job bigint, batch xid8, pid int, called_at timestamptz);
     CREATE FUNCTION push(job jsonb) RETURNS void LANGUAGE sql AS
         $$ SELECT pg_sleep(0.002);
            INSERT INTO pushed VALUES ((job->>'id')::bigint, pg_current_xact_id(),
                                       pg_backend_pid(), clock_timestamp()) $$;";

/// The most jobs that the worker had in flight at once, read from the
/// calls of `push`: each batch from its first call to its commit. A batch
/// was locked, or claimed, before its first call: this may miss a moment
/// in flight, never add one.
fn pushed_at_most(client: &mut Client) -> i64 {
    let mut events: Vec<(f64, i64)> = all_rows(
        client,
        "SELECT extract(epoch FROM t)::float8, n
           FROM (SELECT min(called_at) AS t, count(*) AS n FROM pushed GROUP BY batch
                 UNION ALL
                 -- (each call wrote in a subtransaction of the batch's)
                 SELECT max(pg_xact_commit_timestamp(xmin)), -count(*)
                   FROM pushed GROUP BY batch) b",
        &[],
    );
    // (a batch ending when another starts is counted out first)
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0, 0);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    most
}

#[test]
fn max_in_flight_holds_while_the_worker_delivers_in_one_transaction_per_batch() {
    // A queue whose limits are all the queue's as a whole is delivered in
    // one transaction per batch: its jobs are locked, not claimed, and the
    // batch holds a reservation (which claims beside it count) until it
    // commits. The jobs in flight are read afterwards from the calls and
    // commit times: a batch from its first call (its lock came earlier, so
    // this may miss a moment, never add one) to its commit, whichever of
    // the database's workers (it may get a helper) delivered it.
    let cluster = Cluster::start_with(&["track_commit_timestamp = on"]);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "{PUSH}
             SELECT queue_create('both', max_in_flight => 4, rate_limit => '100000/1 second');
             SELECT queue_pause('both');
             SELECT queue_register_sender('both', 'push(jsonb)', 50);"
        ))
        .unwrap();
    for g in 0..10 {
        enqueue_group(&mut client, "both", &format!("g{g}"), 60);
    }
    client.batch_execute("SELECT queue_resume('both')").unwrap();
    eventually("the worker to deliver every job", || {
        unfinished(&mut client, "both") == 0
    });
    let (pushed, twice): (i64, i64) = one_row(
        &mut client,
        "SELECT count(*), count(*) - count(DISTINCT job) FROM pushed",
        &[],
    );
    assert_eq!((pushed, twice), (600, 0), "every job once");
    let most = pushed_at_most(&mut client);
    let (batches, workers, largest): (i64, i64, i64) = one_row(
        &mut client,
        "SELECT count(*), count(DISTINCT pid), max(n)
           FROM (SELECT batch, min(pid) AS pid, count(*) AS n FROM pushed GROUP BY batch) b",
        &[],
    );
    println!(
        "600 jobs in {batches} batches by {workers} worker(s), the largest {largest}; \
         at most {most} in flight"
    );
    assert!(most >= 2, "the jobs in flight were seen");
    assert!(most <= 4, "{most} jobs in flight, over max_in_flight 4");
}

/// Queue `queue` with `max_in_flight` 3 and 10 due jobs.
fn ten_jobs_three_in_flight(client: &mut Client, queue: &str) {
    client
        .execute("SELECT queue_create($1, max_in_flight => 3)", &[&queue])
        .unwrap();
    client
        .execute(
            "SELECT count(*) FROM queue_enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[10]))",
            &[&queue],
        )
        .unwrap();
}

/// The jobs of `queue` in flight (processing).
fn processing(client: &mut Client, queue: &str) -> i64 {
    one(
        client,
        "SELECT count(*) FROM queue_jobs WHERE queue = $1 AND status = 'processing'",
        &[&queue],
    )
}

#[test]
fn a_transaction_that_claims_twice_counts_its_own_first_claim() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    ten_jobs_three_in_flight(&mut client, "twice");
    let mut other = cluster.connect();
    let mut tx = client.transaction().unwrap();
    let claim = |tx: &mut postgres::Transaction<'_>| -> i64 {
        tx.query_one(
            "SELECT count(*) FROM queue_claim('twice', max_jobs => 2)",
            &[],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(claim(&mut tx), 2);
    // (its first claim is under way: it does not wait for itself)
    assert_eq!(claim(&mut tx), 1, "the limit left one");
    tx.commit().unwrap();
    let after: i64 = one(
        &mut other,
        "SELECT count(*) FROM queue_claim('twice', max_jobs => 2)",
        &[],
    );
    assert_eq!(after, 0, "three in flight already");
}

/// A transaction claims, a second session's claim waits for it (the limit
/// would leave it short), and the first transaction claims again: its
/// second claim takes what the waiting claim leaves it, without waiting for
/// that claim in turn (which would close a circle that PostgreSQL's
/// deadlock detector ends with 40P01), and the limit holds throughout.
#[test]
fn a_transaction_that_claims_again_does_not_wait_for_a_claim_that_waits_for_it() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    ten_jobs_three_in_flight(&mut client, "again");
    let mut second = cluster.connect();
    let second_pid: i32 = one(&mut second, "SELECT pg_backend_pid()", &[]);
    let mut tx = client.transaction().unwrap();
    let claim = |tx: &mut postgres::Transaction<'_>, n: i32| -> Result<i64, postgres::Error> {
        tx.query_one(
            "SELECT count(*) FROM queue_claim('again', max_jobs => $1)",
            &[&n],
        )
        .map(|row| row.get(0))
    };
    assert_eq!(claim(&mut tx, 1).unwrap(), 1);
    // (room for 2 beside the first claim's 1: it waits for it to end)
    let waiting = std::thread::spawn(move || {
        one::<i64>(
            &mut second,
            "SELECT count(*) FROM queue_claim('again', max_jobs => 3)",
            &[],
        )
    });
    waits_for_a_lock(&cluster, second_pid, "the second session's claim");
    // (the waiting claim reserved 3: nothing is left beside it; before,
    // this claim waited for it, and one of the two ended with 40P01)
    let again = claim(&mut tx, 2);
    assert_eq!(again.map_err(|e| e.to_string()), Ok(0));
    tx.commit().unwrap();
    assert_eq!(
        waiting.join().unwrap(),
        2,
        "what the first transaction's 1 leaves"
    );
    assert_eq!(processing(&mut client, "again"), 3);
}

/// A claim in a transaction that is then prepared keeps its reservation:
/// a claim beside it that the limit would leave short waits until the
/// prepared transaction is committed, and then counts its jobs in flight. A
/// prepared claim rolled back with no claim waiting leaves its entry
/// behind, and the next claim that would be short by it finds it ended,
/// frees it and takes the whole room.
#[test]
fn a_prepared_claim_counts_until_it_commits_and_its_entry_is_freed_after() {
    let cluster = Cluster::start_with(&["max_prepared_transactions = 4"]);
    let mut client = cluster.connect();
    ten_jobs_three_in_flight(&mut client, "prepared");
    let claim_in = |client: &mut Client, gid: &str, n: i32| {
        client.batch_execute("BEGIN").unwrap();
        let jobs = claim(client, "prepared", n);
        client
            .batch_execute(&format!("PREPARE TRANSACTION '{gid}'"))
            .unwrap();
        jobs
    };
    let first = claim_in(&mut client, "first", 2);
    assert_eq!(first.len(), 2);
    let mut second = cluster.connect();
    let second_pid: i32 = one(&mut second, "SELECT pg_backend_pid()", &[]);
    let waiting = std::thread::spawn(move || {
        let jobs = claim(&mut second, "prepared", 3);
        (jobs, second)
    });
    waits_for_a_lock(&cluster, second_pid, "the claim beside the prepared one");
    client.batch_execute("COMMIT PREPARED 'first'").unwrap();
    let (beside, mut second) = waiting.join().unwrap();
    assert_eq!(beside.len(), 1, "the 2 of the prepared claim are in flight");
    assert_eq!(processing(&mut client, "prepared"), 3);
    assert_eq!(
        complete_all(&mut client, &[first, beside].concat()).len(),
        3
    );
    assert_eq!(claim_in(&mut client, "rolled back", 1).len(), 1);
    client
        .batch_execute("ROLLBACK PREPARED 'rolled back'")
        .unwrap();
    assert_eq!(
        claim(&mut second, "prepared", 3).len(),
        3,
        "the rolled back claim's entry no longer counts"
    );
    assert_eq!(processing(&mut client, "prepared"), 3);
}

/// 8 consumers pull 1,000 jobs of 20 groups from a queue with
/// `pull_limits` while the worker delivers 400 from one with
/// `push_limits`; samplers watch both. The most in flight seen, of the
/// queue and of a group: (pulled, pushed).
fn race_eight_consumers_and_the_worker(
    pull_limits: &str,
    push_limits: &str,
) -> ((i64, i64), (i64, i64)) {
    let cluster = Cluster::start_with(&["track_commit_timestamp = on"]);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "{PUSH}
             SELECT queue_create('lim', {pull_limits});
             SELECT queue_create('lim_push', {push_limits});
             SELECT queue_pause('lim_push');
             SELECT queue_register_sender('lim_push', 'push(jsonb)', 50);",
        ))
        .unwrap();
    for g in 0..20 {
        enqueue_group(&mut client, "lim", &format!("g{g}"), 50);
        enqueue_group(&mut client, "lim_push", &format!("g{g}"), 20);
    }
    let config = cluster.config(queue_client_tests::DB);
    let stop = Arc::new(AtomicBool::new(false));
    let pull_sampler = sample_in_flight(config.clone(), "lim", stop.clone());
    let push_sampler = sample_in_flight(config.clone(), "lim_push", stop.clone());
    client
        .batch_execute("SELECT queue_resume('lim_push')")
        .unwrap();
    let consumers: Vec<_> = (0..8)
        .map(|_| {
            let config = config.clone();
            std::thread::spawn(move || {
                let mut client = config.connect(postgres::NoTls).unwrap();
                let mut taken = 0;
                loop {
                    let jobs: Vec<(i64, String)> = all_rows(
                        &mut client,
                        "SELECT id, lease::text FROM queue_claim('lim', max_jobs => 3)",
                        &[],
                    );
                    if jobs.is_empty() {
                        if unfinished(&mut client, "lim") == 0 {
                            return taken;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    std::thread::sleep(Duration::from_millis(3));
                    for (id, lease) in jobs {
                        let done: bool = complete(&mut client, id, &lease);
                        assert!(done);
                        taken += 1;
                    }
                }
            })
        })
        .collect();
    let taken: usize = consumers.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(taken, 1000, "every pulled job once");
    eventually("the worker to deliver every job", || {
        one::<i64>(&mut client, "SELECT count(DISTINCT job) FROM pushed", &[]) == 400
    });
    stop.store(true, Ordering::Relaxed);
    let (pull_queue, pull_group, pull_samples) = pull_sampler.join().unwrap();
    let (push_sampled, push_group, push_samples) = push_sampler.join().unwrap();
    // (a queue with limits of the queue as a whole only is delivered in one
    // transaction per batch, its jobs never `processing`: the calls say)
    let push_queue = push_sampled.max(pushed_at_most(&mut client));
    println!(
        "in flight at most: pulled {pull_queue} (group {pull_group}) in {pull_samples} samples, \
         pushed {push_queue} (group {push_group}; {push_sampled} in {push_samples} samples)"
    );
    assert!(pull_queue >= 2, "the samples saw the consumers at work");
    assert!(push_queue >= 2, "the worker's jobs in flight were seen");
    let pushed_twice: i64 = one(
        &mut client,
        "SELECT count(*) - count(DISTINCT job) FROM pushed",
        &[],
    );
    assert_eq!(pushed_twice, 0);
    ((pull_queue, pull_group), (push_queue, push_group))
}

#[test]
fn rate_limits_hold_in_every_window_and_the_queue_drains_near_the_rate() {
    // (a limit per group: each claim runs alone)
    let worst = race_eight_consumers_at_forty_a_second(", group_rate_limit => '10/1 second'");
    assert!(worst[0] <= 40, "a window with {} claims", worst[0]);
    assert!(worst[1] <= 10, "a group's window with {} claims", worst[1]);
}

#[test]
fn a_rate_of_the_queue_as_a_whole_holds_while_claims_run_side_by_side() {
    let worst = race_eight_consumers_at_forty_a_second("");
    assert!(worst[0] <= 40, "a window with {} claims", worst[0]);
}

/// 8 consumers claim 240 jobs of 6 groups, 5 at a time, from a queue with
/// `rate_limit => '40/1 second'` and `more` options, and log each claim's
/// time. The fullest window of a second that ends at a claim: [of the
/// queue, of one group].
fn race_eight_consumers_at_forty_a_second(more: &str) -> Vec<i64> {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute(EVENT_LOG).unwrap();
    client
        .batch_execute(&format!(
            "SELECT queue_create('rate', lease => '1 second', rate_limit => '40/1 second'{more})"
        ))
        .unwrap();
    for g in 0..6 {
        enqueue_group(&mut client, "rate", &format!("g{g}"), 40);
    }
    let config = cluster.config(queue_client_tests::DB);
    let started = Instant::now();
    let consumers: Vec<_> = (0..8)
        .map(|n| {
            let config = config.clone();
            std::thread::spawn(move || {
                let mut client = config.connect(postgres::NoTls).unwrap();
                loop {
                    // the claim time is the lease's expiry less the lease
                    let claimed: Vec<(i64, String)> = all_rows(
                        &mut client,
                        "WITH c AS (SELECT * FROM queue_claim('rate', max_jobs => 5))
                         INSERT INTO log (job, grp, event, claimed_at)
                         SELECT c.id, c.payload->>'g', 'claim',
                                c.lease_expires_at - interval '1 second' FROM c
                         RETURNING job, (SELECT lease::text FROM c WHERE c.id = job)",
                        &[],
                    );
                    for (id, lease) in &claimed {
                        complete(&mut client, *id, lease);
                    }
                    if claimed.is_empty() {
                        if unfinished(&mut client, "rate") == 0 {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(5 + n));
                    }
                }
            })
        })
        .collect();
    for t in consumers {
        t.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    // every window of a second that ends at a claim holds at most 40
    // claims, and at most 10 of one group
    let worst: Vec<i64> = one(
        &mut client,
        "SELECT ARRAY[max((SELECT count(*) FROM log o
                            WHERE o.claimed_at > l.claimed_at - interval '1 second'
                              AND o.claimed_at <= l.claimed_at)),
                      max((SELECT count(*) FROM log o
                            WHERE o.grp = l.grp
                              AND o.claimed_at > l.claimed_at - interval '1 second'
                              AND o.claimed_at <= l.claimed_at))]
           FROM log l",
        &[],
    );
    let claims: i64 = one(&mut client, "SELECT count(*) FROM log", &[]);
    // the fastest drain the rate allows: 40 at once, then 40 a second
    let fastest = 240.0 / 40.0 - 1.0;
    println!(
        "240 jobs at 40/s: drained in {elapsed:.2} s, {:.2} of the fastest drain the rate \
         allows ({fastest} s); fullest window {} (of one group {})",
        fastest / elapsed,
        worst[0],
        worst[1]
    );
    assert_eq!(claims, 240, "each job claimed once");
    worst
}

#[test]
fn the_worker_delivers_a_rate_limited_queue_as_the_windows_free() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE paced (job bigint, at timestamptz);
             CREATE FUNCTION pace(job jsonb) RETURNS void LANGUAGE sql AS
                 $$ INSERT INTO paced VALUES ((job->>'id')::bigint, clock_timestamp()) $$;
             SELECT queue_create('paced', rate_limit => '20/1 second');
             SELECT queue_pause('paced');
             SELECT queue_register_sender('paced', 'pace(jsonb)', 100);
             SELECT count(*) FROM queue_enqueue_batch('paced', array_fill('{}'::jsonb, ARRAY[60]));",
        )
        .unwrap();
    let resumed: f64 = one(
        &mut client,
        "SELECT extract(epoch FROM clock_timestamp())::float8 FROM queue_resume('paced')",
        &[],
    );
    eventually("60 deliveries", || {
        one::<i64>(&mut client, "SELECT count(DISTINCT job) FROM paced", &[]) == 60
    });
    let (rows, last): (i64, f64) = one_row(
        &mut client,
        "SELECT count(*), extract(epoch FROM max(at))::float8 FROM paced",
        &[],
    );
    let bursts: Vec<f64> = client
        .query(
            "SELECT extract(epoch FROM min(at))::float8 FROM (SELECT at, ntile(3) OVER (ORDER BY at) AS b
               FROM paced) t GROUP BY b ORDER BY b",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get::<_, f64>(0) - resumed)
        .collect();
    println!("each window's first delivery, after the resume: {bursts:.2?}");
    let elapsed = last - resumed;
    // 20 at once, 20 when the first window has passed, 20 after the second
    println!("60 jobs at 20/s delivered in {elapsed:.2} s after the resume (at best 2 s)");
    assert_eq!(rows, 60, "each job delivered once");
    assert!(
        elapsed >= 2.0,
        "delivered faster than the rate allows: {elapsed:.2} s"
    );
}

#[test]
fn jobs_a_stopped_worker_left_in_flight_wait_for_the_rate_window_and_count_in_it() {
    // The first claim takes 2 jobs of 3, which fills the window; the first
    // job's sender stops the worker (registered by a superuser, who may).
    // The next worker must claim the 2 again only when the window has
    // room, and that claim must count: the third job waits a window more.
    // Their leases end before the window does: the 2 must still be claimed
    // again by the recovery (each alone), not as expired leases.
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE calls (job bigint, attempt int, at timestamptz);
             CREATE FUNCTION stop_once(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload' ? 'stop' AND (job->>'attempt')::int = 1 THEN
                     PERFORM pg_terminate_backend(pg_backend_pid());
                 END IF;
                 INSERT INTO calls VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                                           clock_timestamp());
             END $$;
             SELECT queue_create('paced', rate_limit => '2/5 seconds', lease => '1 second');
             SELECT queue_pause('paced');
             SELECT queue_register_sender('paced', 'stop_once(jsonb)', 10);",
        )
        .unwrap();
    let ids: Vec<i64> = ["{\"stop\": true}", "{}", "{}"]
        .iter()
        .map(|payload| {
            one(
                &mut client,
                "SELECT queue_enqueue('paced', $1::text::jsonb)",
                &[payload],
            )
        })
        .collect();
    let resumed: f64 = one(
        &mut client,
        "SELECT extract(epoch FROM clock_timestamp())::float8 FROM queue_resume('paced')",
        &[],
    );
    eventually("3 deliveries", || {
        one::<i64>(&mut client, "SELECT count(*) FROM calls", &[]) == 3
    });
    let calls: Vec<(i64, i32, f64)> = client
        .query(
            "SELECT job, attempt, extract(epoch FROM at)::float8 FROM calls ORDER BY job",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get::<_, f64>(2) - resumed))
        .collect();
    println!("(job, attempt, seconds after the resume): {calls:.2?}");
    let jobs: Vec<(i64, i32)> = calls.iter().map(|c| (c.0, c.1)).collect();
    assert_eq!(
        jobs,
        vec![(ids[0], 2), (ids[1], 2), (ids[2], 1)],
        "the 2 left in flight claimed again (attempt 2), the third once"
    );
    for (job, _, after) in &calls[..2] {
        assert!(
            *after >= 5.0,
            "job {job} claimed again {after:.2} s after the first claim, in its window"
        );
    }
    assert!(
        calls[2].2 >= 10.0,
        "the third job claimed {:.2} s after the resume: the claims again were not counted",
        calls[2].2
    );
    let ended: Vec<(String, Option<String>)> = all_rows(
        &mut client,
        "SELECT status, last_error FROM queue_jobs WHERE queue = 'paced' ORDER BY id",
        &[],
    );
    let stopped = Some("the queue worker stopped during attempt 1 of 5".to_string());
    assert_eq!(
        ended,
        vec![
            ("succeeded".to_string(), stopped.clone()),
            ("succeeded".to_string(), stopped),
            ("succeeded".to_string(), None),
        ],
        "the 2 claimed again by the recovery, the third once"
    );
}
