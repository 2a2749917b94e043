//! Groups, order and limits (docs/groups.md) over real connections: fair
//! turns for pull consumers, a SQL sender and a webhook; ordered queues under
//! 8 racing consumers with failures, retries, expired leases, cancels and
//! dead letters put back while a later job of their group is in flight,
//! checked from a log the consumers write; limits sampled while consumers
//! and the worker race; rate windows counted from the claim times; and all
//! of it across an immediate stop of the server.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_client_tests::receiver::Receiver;
use queue_client_tests::{
    claim, complete_all, eventually, one, waits_for_a_lock, Client, Cluster, DURABLE,
};

/// A small deterministic random number generator (xorshift), so that a
/// failing run can be read again: each thread seeds its own.
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in 0..n.
    fn roll(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `group`'s `n` jobs, enqueued in batches of 1,000, each with payload
/// `{"g": group}`.
fn enqueue_group(client: &mut Client, queue: &str, group: &str, n: i32) {
    let mut left = n;
    while left > 0 {
        let batch = left.min(1000);
        client
            .execute(
                "SELECT count(*) FROM queue_enqueue_batch($1,
                    array_fill(jsonb_build_object('g', $2::text), ARRAY[$3::int]),
                    group_keys => array_fill($2::text, ARRAY[$3::int]))",
                &[&queue, &group, &batch],
            )
            .unwrap();
        left -= batch;
    }
}

/// The fairness set-up of issue 28: one group with 100,000 due jobs, then
/// 100 groups `s0` to `s99` with one job each.
fn one_big_group_and_a_hundred_small(client: &mut Client, queue: &str) -> HashSet<String> {
    enqueue_group(client, queue, "big", 100_000);
    let small: HashSet<String> = (0..100).map(|i| format!("s{i}")).collect();
    for group in &small {
        enqueue_group(client, queue, group, 1);
    }
    small
}

/// Asserts that every small group comes within the first `first` of
/// `order` (groups in the order their jobs were claimed or delivered).
fn small_groups_within(order: &[String], small: &HashSet<String>, first: usize) {
    let served: HashSet<&String> = order.iter().take(first).collect();
    let late: Vec<&String> = small.iter().filter(|g| !served.contains(g)).collect();
    assert!(
        late.is_empty(),
        "groups not served within the first {first}: {late:?}"
    );
}

#[test]
fn a_group_with_100000_jobs_never_starves_a_hundred_groups_with_one() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("SELECT queue_create('fair')").unwrap();
    let small = one_big_group_and_a_hundred_small(&mut client, "fair");
    let mut order = Vec::new();
    for _ in 0..2 {
        for row in client
            .query(
                "SELECT payload->>'g' FROM queue_claim('fair', max_jobs => 100)",
                &[],
            )
            .unwrap()
        {
            order.push(row.get::<_, String>(0));
        }
    }
    assert_eq!(order.len(), 200);
    small_groups_within(&order, &small, 200);
    // the big group is served too, in its turn
    assert!(order.iter().any(|g| g == "big"));
}

#[test]
fn a_sql_sender_delivers_the_small_groups_within_its_first_two_batches() {
    // (one worker: a helper's batches would interleave with its own)
    let cluster = Cluster::start_with(&["queue.max_workers_per_database = 1"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE delivered (n bigserial, grp text);
             CREATE FUNCTION take(job jsonb) RETURNS void LANGUAGE sql AS
                 $$ INSERT INTO delivered (grp) VALUES (job->'payload'->>'g') $$;
             SELECT queue_create('fair_push');
             SELECT queue_pause('fair_push');
             SELECT queue_register_sender('fair_push', 'take(jsonb)', 100);",
        )
        .unwrap();
    let small = one_big_group_and_a_hundred_small(&mut client, "fair_push");
    client
        .batch_execute("SELECT queue_resume('fair_push')")
        .unwrap();
    eventually("200 deliveries", || {
        one::<i64>(&mut client, "SELECT count(*) FROM delivered", &[]) >= 200
    });
    client
        .batch_execute("SELECT queue_pause('fair_push')")
        .unwrap();
    let order: Vec<String> = client
        .query("SELECT grp FROM delivered ORDER BY n LIMIT 200", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    small_groups_within(&order, &small, 200);
}

/// (One request open at a time: requests open at once reach the receiver in
/// any order; with 10 open, a request on a connection being opened was seen
/// to arrive after a hundred sent later on kept-alive ones.)
#[test]
fn a_webhook_posts_the_small_groups_among_its_first_two_hundred_requests() {
    let receiver = Receiver::start();
    let cluster = Cluster::start_with(&[
        &format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port),
        "queue.max_workers_per_database = 1",
    ]);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "SELECT queue_create('fair_hook');
             SELECT queue_pause('fair_hook');
             SELECT queue_register_webhook('fair_hook', '{}', max_in_flight => 1);",
            receiver.url("/fair")
        ))
        .unwrap();
    let small = one_big_group_and_a_hundred_small(&mut client, "fair_hook");
    client
        .batch_execute("SELECT queue_resume('fair_hook')")
        .unwrap();
    eventually("200 requests", || receiver.seen("/fair").len() >= 200);
    client
        .batch_execute("SELECT queue_pause('fair_hook')")
        .unwrap();
    let order: Vec<String> = receiver
        .seen("/fair")
        .iter()
        .map(|s| {
            let body: serde_json::Value = serde_json::from_str(&s.body).unwrap();
            body["payload"]["g"].as_str().unwrap().to_string()
        })
        .collect();
    small_groups_within(&order, &small, 200);
}

/// What the consumers of the order tests write, one row per event, in the
/// transaction of the event itself: `claim` with the claim (with the time
/// after it and its lease's end), `done`, `retry`, `dead` and `cancel` in
/// the statement that ended the attempt, `revive` in the `queue_retry` of a
/// dead letter.
const LOG: &str = "CREATE TABLE log (seq bigserial, job bigint, grp text, event text,
                                     claimed_at timestamptz, lease_until timestamptz)";

/// 200 groups of 10 jobs each, enqueued interleaved at random.
fn two_hundred_groups(client: &mut Client, queue: &str) {
    let mut groups: Vec<String> = (0..2000).map(|i| format!("g{}", i % 200)).collect();
    let mut dice = Dice::new(7);
    for i in (1..groups.len()).rev() {
        groups.swap(i, dice.roll(i as u64 + 1) as usize);
    }
    for chunk in groups.chunks(500) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        client
            .execute(
                "SELECT count(*) FROM queue_enqueue_batch($1,
                    (SELECT array_agg(jsonb_build_object('g', g) ORDER BY o)
                       FROM unnest($2::text[]) WITH ORDINALITY AS u(g, o)),
                    group_keys => $2)",
                &[&queue, &chunk],
            )
            .unwrap();
    }
}

/// Unfinished jobs of `queue`.
fn unfinished(client: &mut Client, queue: &str) -> i64 {
    one(
        client,
        "SELECT count(*) FROM queue_jobs WHERE queue = $1 AND status IN ('pending', 'processing')",
        &[&queue],
    )
}

/// One consumer of the order tests: claims up to 4 jobs at a time and, at
/// random, completes, fails for a retry, fails for good, cancels, or
/// sleeps past its lease first; before some completions it puts an older
/// dead letter of the job's group back (`queue_retry`), which must then wait
/// for the job in flight. Reconnects after an error (a crash).
fn consume_at_random(config: postgres::Config, queue: &'static str, seed: u64) {
    let connect = || loop {
        match config.connect(postgres::NoTls) {
            Ok(client) => return client,
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let mut client = connect();
    let mut dice = Dice::new(seed);
    let worker = format!("c{seed}");
    loop {
        let step = (|| -> Result<bool, postgres::Error> {
            let mut tx = client.transaction()?;
            let claimed: Vec<(i64, String, String)> = tx
                .query(
                    "SELECT id, lease::text, payload->>'g', lease_expires_at::text
                       FROM queue_claim($1, $2, 4)",
                    &[&queue, &worker],
                )?
                .iter()
                .map(|r| -> Result<_, postgres::Error> {
                    let (id, group, until): (i64, String, String) = (r.get(0), r.get(2), r.get(3));
                    tx.execute(
                        "INSERT INTO log (job, grp, event, claimed_at, lease_until)
                         VALUES ($1, $2, 'claim', clock_timestamp(), $3::text::timestamptz)",
                        &[&id, &group, &until],
                    )?;
                    Ok((id, r.get(1), group))
                })
                .collect::<Result<_, _>>()?;
            tx.commit()?;
            if claimed.is_empty() {
                let left: i64 = client
                    .query_one(
                        "SELECT count(*) FROM queue_jobs
                          WHERE queue = $1 AND status IN ('pending', 'processing')",
                        &[&queue],
                    )?
                    .get(0);
                if left == 0 {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            for (id, lease, group) in &claimed {
                let roll = dice.roll(1000);
                if roll < 8 {
                    // past the lease of a second: another consumer may take it
                    std::thread::sleep(Duration::from_millis(1300));
                }
                if (150..250).contains(&roll) {
                    let put_back = client.execute(
                        "INSERT INTO log (job, grp, event)
                         SELECT d.id, $2, 'revive'
                           FROM (SELECT id FROM queue_jobs
                                  WHERE queue = $3 AND status = 'failed'
                                    AND payload->>'g' = $2 AND id < $1
                                  ORDER BY id LIMIT 1) d
                          WHERE queue_retry(d.id)",
                        &[id, group, &queue],
                    )?;
                    if put_back > 0 {
                        // (this job stays in flight a while, for the claims
                        // beside it to pass the job put back by)
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                let (sql, event) = match roll {
                    0..=99 => (
                        "SELECT queue_fail($1, $3::text::uuid, 'again', retry_in => '0') = 'pending'",
                        "retry",
                    ),
                    100..=119 => (
                        "SELECT queue_fail($1, $3::text::uuid, 'no', permanent => true) = 'failed'",
                        "dead",
                    ),
                    120..=149 => (
                        "SELECT queue_cancel($1) AND $3::text IS NOT NULL",
                        "cancel",
                    ),
                    _ => ("SELECT queue_complete($1, $3::text::uuid)", "done"),
                };
                client.execute(
                    &format!(
                        "INSERT INTO log (job, grp, event) SELECT $1, $2, '{event}'
                          WHERE coalesce(({sql}), false)"
                    ),
                    &[id, group, lease],
                )?;
            }
            Ok(true)
        })();
        match step {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(200));
                client = connect();
            }
        }
    }
}

/// Checks the consumers' log of an ordered queue: per group, a job is
/// claimed only once the job of its group claimed before it has ended
/// (done, dead or cancelled), never an earlier one after a later one but a
/// dead letter put back (which may also go once that job's lease has
/// expired: its consumer was cut off by a crash), and the jobs that
/// succeeded did so in id order (those put back apart). Returns the jobs
/// that ended.
fn check_order(client: &mut Client) -> usize {
    let rows = client
        .query(
            "SELECT job, grp, event, extract(epoch FROM claimed_at)::float8,
                    extract(epoch FROM lease_until)::float8
               FROM log ORDER BY seq",
            &[],
        )
        .unwrap();
    // per group: the job claimed last, and the jobs that ended
    let mut head: HashMap<String, i64> = HashMap::new();
    let mut ended: HashSet<i64> = HashSet::new();
    let mut revived: HashSet<i64> = HashSet::new();
    // per job: the end of the lease of its last claim
    let mut lease_until: HashMap<i64, f64> = HashMap::new();
    let mut succeeded: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for row in &rows {
        let (job, group, event): (i64, String, String) = (row.get(0), row.get(1), row.get(2));
        match event.as_str() {
            "claim" => {
                let claimed_at: f64 = row.get(3);
                if let Some(&before) = head.get(&group) {
                    let lease_gone = lease_until.get(&before).is_some_and(|&t| t <= claimed_at);
                    assert!(
                        before == job
                            || (ended.contains(&before)
                                && (job > before || revived.contains(&job)))
                            || (revived.contains(&job) && lease_gone),
                        "group {group}: job {job} claimed while {before} had not ended"
                    );
                }
                lease_until.insert(job, row.get(4));
                assert!(!ended.contains(&job), "job {job} claimed after it ended");
                head.insert(group, job);
            }
            "retry" => {}
            "revive" => {
                assert!(ended.remove(&job), "job {job} put back before it ended");
                revived.insert(job);
            }
            "done" | "dead" | "cancel" => {
                assert!(ended.insert(job), "job {job} ended twice");
                if event == "done" {
                    succeeded.entry(group).or_default().push(job);
                }
            }
            other => panic!("an event {other}"),
        }
    }
    assert!(
        !revived.is_empty(),
        "no dead letter was put back while a later job of its group was in flight"
    );
    for (group, jobs) in &succeeded {
        let jobs: Vec<i64> = jobs
            .iter()
            .filter(|j| !revived.contains(j))
            .copied()
            .collect();
        assert!(
            jobs.windows(2).all(|w| w[0] < w[1]),
            "group {group} succeeded out of order: {jobs:?}"
        );
    }
    ended.len()
}

/// A cluster with the consumers' log and the ordered queue `ord` (leases
/// of a second, retries at once, `more` options) holding 200 groups of 10.
fn ordered_queue_of_two_hundred_groups(more: &str) -> (Cluster, Client) {
    // (one of its tests stops the server the hard way)
    let cluster = Cluster::start_with(&[DURABLE]);
    let mut client = cluster.connect();
    client.batch_execute(LOG).unwrap();
    client
        .batch_execute(&format!(
            "SELECT queue_create('ord', ordered => true, lease => '1 second',
                                 max_attempts => 1000, retry_delay => '0'{more})"
        ))
        .unwrap();
    two_hundred_groups(&mut client, "ord");
    (cluster, client)
}

#[test]
fn eight_consumers_keep_each_group_in_order_one_job_at_a_time() {
    let (cluster, mut client) = ordered_queue_of_two_hundred_groups("");
    let config = cluster.config(queue_client_tests::DB);
    let threads: Vec<_> = (0..8)
        .map(|seed| {
            let config = config.clone();
            std::thread::spawn(move || consume_at_random(config, "ord", seed))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(check_order(&mut client), 2000, "every job ended once");
    let groups: i64 = one(&mut client, "SELECT count(*) FROM queue_groups('ord')", &[]);
    assert_eq!(groups, 0);
}

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
    let mut events: Vec<(f64, i64)> = client
        .query(
            "SELECT extract(epoch FROM t)::float8, n
               FROM (SELECT min(called_at) AS t, count(*) AS n FROM pushed GROUP BY batch
                     UNION ALL
                     -- (each call wrote in a subtransaction of the batch's)
                     SELECT max(pg_xact_commit_timestamp(xmin)), -count(*)
                       FROM pushed GROUP BY batch) b",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
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
    let (pushed, twice): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT count(*), count(*) - count(DISTINCT job) FROM pushed",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((pushed, twice), (600, 0), "every job once");
    let most = pushed_at_most(&mut client);
    let (batches, workers, largest): (i64, i64, i64) = {
        let row = client
            .query_one(
                "SELECT count(*), count(DISTINCT pid), max(n)
                   FROM (SELECT batch, min(pid) AS pid, count(*) AS n FROM pushed GROUP BY batch) b",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    println!(
        "600 jobs in {batches} batches by {workers} worker(s), the largest {largest}; \
         at most {most} in flight"
    );
    assert!(most >= 2, "the jobs in flight were seen");
    assert!(most <= 4, "{most} jobs in flight, over max_in_flight 4");
}

#[test]
fn a_transaction_that_claims_twice_counts_its_own_first_claim() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('twice', max_in_flight => 3);
             SELECT count(*) FROM queue_enqueue_batch('twice', array_fill('{}'::jsonb, ARRAY[10]));",
        )
        .unwrap();
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
    client
        .batch_execute(
            "SELECT queue_create('again', max_in_flight => 3);
             SELECT count(*) FROM queue_enqueue_batch('again', array_fill('{}'::jsonb, ARRAY[10]));",
        )
        .unwrap();
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
    let in_flight: i64 = one(
        &mut client,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'again' AND status = 'processing'",
        &[],
    );
    assert_eq!(in_flight, 3);
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
    client
        .batch_execute(
            "SELECT queue_create('prepared', max_in_flight => 3);
             SELECT count(*) FROM queue_enqueue_batch('prepared', array_fill('{}'::jsonb, ARRAY[10]));",
        )
        .unwrap();
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
    let in_flight = |client: &mut Client| -> i64 {
        one(
            client,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'prepared' AND status = 'processing'",
            &[],
        )
    };
    assert_eq!(in_flight(&mut client), 3);
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
    assert_eq!(in_flight(&mut client), 3);
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
                    let jobs: Vec<(i64, String)> = client
                        .query(
                            "SELECT id, lease::text FROM queue_claim('lim', max_jobs => 3)",
                            &[],
                        )
                        .unwrap()
                        .iter()
                        .map(|r| (r.get(0), r.get(1)))
                        .collect();
                    if jobs.is_empty() {
                        if unfinished(&mut client, "lim") == 0 {
                            return taken;
                        }
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    std::thread::sleep(Duration::from_millis(3));
                    for (id, lease) in jobs {
                        let done: bool = one(
                            &mut client,
                            "SELECT queue_complete($1, $2::text::uuid)",
                            &[&id, &lease],
                        );
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
    client.batch_execute(LOG).unwrap();
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
                    let claimed: Vec<(i64, String)> = client
                        .query(
                            "WITH c AS (SELECT * FROM queue_claim('rate', max_jobs => 5))
                             INSERT INTO log (job, grp, event, claimed_at)
                             SELECT c.id, c.payload->>'g', 'claim',
                                    c.lease_expires_at - interval '1 second' FROM c
                             RETURNING job, (SELECT lease::text FROM c WHERE c.id = job)",
                            &[],
                        )
                        .unwrap()
                        .iter()
                        .map(|r| (r.get(0), r.get(1)))
                        .collect();
                    for (id, lease) in &claimed {
                        let _: bool = one(
                            &mut client,
                            "SELECT queue_complete($1, $2::text::uuid)",
                            &[id, lease],
                        );
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
fn order_and_limits_hold_across_an_immediate_stop_and_nothing_is_lost() {
    let (cluster, _) =
        ordered_queue_of_two_hundred_groups(", max_in_flight => 6, rate_limit => '2000/1 second'");
    let config = cluster.config(queue_client_tests::DB);
    let threads: Vec<_> = (0..8)
        .map(|seed| {
            let config = config.clone();
            std::thread::spawn(move || consume_at_random(config, "ord", 100 + seed))
        })
        .collect();
    // stop the server the hard way while they work, twice
    for ended in [300, 1200] {
        eventually("jobs to end", || {
            config
                .connect(postgres::NoTls)
                .map(|mut c| {
                    one::<i64>(
                        &mut c,
                        "SELECT count(*) FROM log WHERE event <> 'claim'",
                        &[],
                    )
                })
                .unwrap_or(0)
                >= ended
        });
        cluster.crash();
        cluster.start_server();
        // jobs in flight before the stop still hold their places
        let in_flight: i64 = one(
            &mut cluster.connect(),
            "SELECT count(*) FROM queue_live WHERE state = 'processing'",
            &[],
        );
        assert!(in_flight <= 6, "{in_flight} in flight after the restart");
    }
    for t in threads {
        t.join().unwrap();
    }
    let mut client = cluster.connect();
    assert_eq!(check_order(&mut client), 2000, "every job ended once");
    let statuses: Vec<(String, i64)> = client
        .query(
            "SELECT status, count(*) FROM queue_jobs WHERE queue = 'ord' GROUP BY 1 ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let total: i64 = statuses.iter().map(|s| s.1).sum();
    assert_eq!(total, 2000, "no job lost: {statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|(s, _)| ["succeeded", "failed", "cancelled"].contains(&s.as_str())),
        "every job ended: {statuses:?}"
    );
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
    let (rows, last): (i64, f64) = {
        let row = client
            .query_one(
                "SELECT count(*), extract(epoch FROM max(at))::float8 FROM paced",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
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

/// An ordered queue delivered by the worker, through a SQL sender (in one
/// transaction per batch, and, with a limit that counts, claimed first) and
/// a webhook: a group's next job goes out once the one before it has ended,
/// though no other session commits anything to wake the worker and its poll
/// interval is an hour (the 60-s deadline of `eventually` is far below it,
/// and below what rests between the jobs of a group cost 300 of them).
#[test]
fn the_worker_delivers_an_ordered_group_job_after_job_without_a_poll() {
    let receiver = Receiver::start();
    let cluster = Cluster::start_with(&[
        &format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port),
        "queue.poll_interval = '1h'",
    ]);
    let mut client = cluster.connect();
    client
        .batch_execute(&format!(
            "CREATE TABLE chain (n bigserial, job bigint, grp text);
             CREATE FUNCTION link(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO chain (job, grp)
                 VALUES ((job->>'id')::bigint, (job->>'queue') || '/' || (job->'payload'->>'g'))
             $$;
             SELECT queue_create('chain', ordered => true);
             SELECT queue_create('chain_claimed', ordered => true, max_in_flight => 1000);
             SELECT queue_create('chain_hook', ordered => true);
             SELECT queue_pause(q) FROM unnest(ARRAY['chain', 'chain_claimed', 'chain_hook']) q;
             SELECT queue_register_sender('chain', 'link(jsonb)', 100);
             SELECT queue_register_sender('chain_claimed', 'link(jsonb)', 100);
             SELECT queue_register_webhook('chain_hook', '{}');",
            receiver.url("/chain")
        ))
        .unwrap();
    // (300 in a row where the claim comes first: a worker that rested
    // between them, woken only by its upkeep, took 0.3 s a job)
    for group in ["a", "b", "c"] {
        for (queue, n) in [("chain", 10), ("chain_claimed", 300), ("chain_hook", 10)] {
            enqueue_group(&mut client, queue, group, n);
        }
    }
    // one queue at a time: the worker's commits for one would wake it
    // for the others
    for (queue, delivered) in [("chain", 30), ("chain_claimed", 930)] {
        client
            .execute("SELECT queue_resume($1)", &[&queue])
            .unwrap();
        eventually(&format!("{delivered} deliveries by the SQL sender"), || {
            one::<i64>(&mut client, "SELECT count(*) FROM chain", &[]) == delivered
        });
    }
    client
        .batch_execute("SELECT queue_resume('chain_hook')")
        .unwrap();
    eventually("30 requests", || receiver.seen("/chain").len() >= 30);
    // each group's jobs in enqueue order (one at a time: the next is
    // claimed only once the one before it has ended)
    let pushed: Vec<(String, i64)> = client
        .query("SELECT grp, job FROM chain ORDER BY n", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let posted: Vec<(String, i64)> = receiver
        .seen("/chain")
        .iter()
        .map(|s| {
            let body: serde_json::Value = serde_json::from_str(&s.body).unwrap();
            (
                body["payload"]["g"].as_str().unwrap().to_string(),
                body["id"].as_i64().unwrap(),
            )
        })
        .collect();
    each_group_in_id_order("the SQL sender", pushed);
    each_group_in_id_order("the webhook", posted);
}

/// An ordered queue where one group's head stays in flight (a job that runs
/// for an hour) while 39 other groups are served: past their third turn the
/// front of the claim order is the held group's waiting jobs, which the
/// claim passes by (ordered_front.sql). Pull claims of 7 and a SQL sender
/// in batches of 7 take every other job in fair turns (each group's k-th
/// job before any group's (k + 1)-th) and none of the held group's.
#[test]
fn a_group_whose_head_runs_for_an_hour_holds_back_only_its_own_jobs() {
    // (one worker: a helper's batches would interleave with its own)
    let cluster = Cluster::start_with(&["queue.max_workers_per_database = 1"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE delivered (n bigserial, grp text, k int);
             CREATE FUNCTION take(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO delivered (grp, k)
                 VALUES (job->'payload'->>'g', (job->'payload'->>'k')::int)
             $$;
             SELECT queue_create(q, ordered => true) FROM unnest(ARRAY['held', 'held_push']) q;",
        )
        .unwrap();
    for queue in ["held", "held_push"] {
        groups_in_turns(&mut client, queue, 40);
        let held: String = one(
            &mut client,
            "SELECT payload->>'g' FROM queue_claim($1, 'slow', 1, '1 hour')",
            &[&queue],
        );
        assert_eq!(held, "g0", "the first in claim order");
    }
    let claimed = claim_until_none(&mut client, "held", 7);
    fair_turns("pull claims", &claimed, 39 * 6, &["g0"]);
    let waiting: (i64, i64) = client
        .query_one(
            "SELECT pending, processing FROM queue_groups('held') WHERE group_key = 'g0'",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(
        waiting,
        (5, 1),
        "the held group's jobs wait behind its head"
    );

    client
        .batch_execute("SELECT queue_register_sender('held_push', 'take(jsonb)', 7)")
        .unwrap();
    eventually("234 deliveries", || {
        one::<i64>(&mut client, "SELECT count(*) FROM delivered", &[]) >= 39 * 6
    });
    client
        .batch_execute("SELECT queue_pause('held_push')")
        .unwrap();
    let delivered: Vec<(String, i32)> = client
        .query("SELECT grp, k FROM delivered ORDER BY n", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    fair_turns("the SQL sender", &delivered, 39 * 6, &["g0"]);
}

/// `groups` groups `g0`, `g1`, ... of 6 jobs each in `queue`, each group's
/// k-th job (payload `{"g": group, "k": k}`) in the k-th turn.
fn groups_in_turns(client: &mut Client, queue: &str, groups: i32) {
    client
        .execute(
            "SELECT count(*) FROM queue_enqueue_batch($1,
                 ARRAY(SELECT jsonb_build_object('g', 'g' || g, 'k', k)
                         FROM generate_series(0, 5) k, generate_series(0, $2 - 1) g
                        ORDER BY k, g),
                 group_keys => ARRAY(SELECT 'g' || g
                                       FROM generate_series(0, 5) k, generate_series(0, $2 - 1) g
                                      ORDER BY k, g))",
            &[&queue, &groups],
        )
        .unwrap();
}

/// Claims `max_jobs` at a time from `queue` and completes each batch, until
/// a claim comes back empty: the (group, k) of each job, in claim order.
fn claim_until_none(client: &mut Client, queue: &str, max_jobs: i32) -> Vec<(String, i32)> {
    let mut claimed = Vec::new();
    loop {
        let rows = client
            .query(
                "SELECT id, lease::text, payload->>'g', (payload->>'k')::int
                   FROM queue_claim($1, 'fast', $2, '1 hour')",
                &[&queue, &max_jobs],
            )
            .unwrap();
        if rows.is_empty() {
            return claimed;
        }
        let jobs: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        claimed.extend(rows.iter().map(|r| (r.get(2), r.get(3))));
        assert_eq!(complete_all(client, &jobs).len(), jobs.len());
    }
}

/// Asserts that `order` (the (group, k) of each job, in the order `path`
/// took them) has `jobs` jobs, none of the groups `held`, in fair turns:
/// each group's k-th job before any group's (k + 1)-th.
fn fair_turns(path: &str, order: &[(String, i32)], jobs: usize, held: &[&str]) {
    assert_eq!(order.len(), jobs, "{path}: every job of the other groups");
    assert!(
        order.iter().all(|(g, _)| !held.contains(&g.as_str())),
        "{path}: a job of a held group went out"
    );
    assert!(
        order.windows(2).all(|w| w[0].1 <= w[1].1),
        "{path}: out of turn: {order:?}"
    );
}

/// What the ordered test above shows, for `group_max_in_flight` 1: 40 of
/// 60 groups at their limit for an hour, and claims of one job at a time.
/// Past the first turn the front of the claim order is the held groups'
/// waiting jobs, more than a claim's first look reads (limits.rs, `choose`).
#[test]
fn groups_at_their_limit_for_an_hour_hold_back_only_their_own_jobs() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute("SELECT queue_create('at_limit', group_max_in_flight => 1)")
        .unwrap();
    groups_in_turns(&mut client, "at_limit", 60);
    let held: Vec<String> = client
        .query(
            "SELECT payload->>'g' FROM queue_claim('at_limit', 'slow', 40, '1 hour')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let first_forty: Vec<String> = (0..40).map(|g| format!("g{g}")).collect();
    assert_eq!(held, first_forty, "the first 40 in claim order");
    let claimed = claim_until_none(&mut client, "at_limit", 1);
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    fair_turns("claims of one", &claimed, 20 * 6, &held);
    let waiting: i64 = one(
        &mut client,
        "SELECT sum(pending)::bigint FROM queue_groups('at_limit')",
        &[],
    );
    assert_eq!(
        waiting,
        40 * 5,
        "the held groups' jobs wait behind their limit"
    );
}

/// Asserts that `order`'s (group, job id) pairs, in the order `path`
/// delivered them, have each group's ids ascending.
fn each_group_in_id_order(path: &str, order: Vec<(String, i64)>) {
    let mut last: HashMap<String, i64> = HashMap::new();
    for (group, id) in order {
        let before = last.insert(group.clone(), id).unwrap_or(0);
        assert!(
            before < id,
            "{path}: group {group}: job {id} delivered after {before}"
        );
    }
}

/// The worker (and its helper, if one starts) delivers an ordered queue of
/// 200 groups, one transaction per batch, while its sender fails a fifth of
/// the calls at random (a job dies after 3) and a consumer puts the dead
/// letters back. From the sender's log (a call that failed wrote nothing):
/// no job delivered twice, every job ends, each group's jobs are delivered
/// one at a time (a call starts after the commit of the group's one before)
/// and in id order, but for the dead letters put back.
#[test]
fn the_worker_keeps_each_group_in_order_one_job_at_a_time_through_failures_and_retries() {
    let cluster = Cluster::start_with(&["track_commit_timestamp = on"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE went (job bigint, grp text, batch xid8, called_at timestamptz);
             CREATE FUNCTION go(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.went VALUES ((job->>'id')::bigint, job->'payload'->>'g',
                                                 pg_current_xact_id(), clock_timestamp());
                 IF random() < 0.2 THEN
                     RAISE EXCEPTION 'at random';
                 END IF;
             END $$;
             SELECT queue_create('pord', ordered => true, max_attempts => 3,
                                 backoff => 'fixed', retry_delay => '10 milliseconds');
             SELECT queue_pause('pord');
             SELECT queue_register_sender('pord', 'go(jsonb)', 50);",
        )
        .unwrap();
    two_hundred_groups(&mut client, "pord");
    let stop = Arc::new(AtomicBool::new(false));
    let retrier = {
        let stop = stop.clone();
        let mut client = cluster.connect();
        std::thread::spawn(move || {
            let mut retried = HashSet::new();
            while !stop.load(Ordering::Relaxed) {
                let dead: Vec<i64> = client
                    .query(
                        "SELECT id FROM queue_jobs WHERE queue = 'pord' AND status = 'failed' LIMIT 5",
                        &[],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                for id in dead {
                    if one::<bool>(&mut client, "SELECT queue_retry($1)", &[&id]) {
                        retried.insert(id);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            retried
        })
    };
    client.batch_execute("SELECT queue_resume('pord')").unwrap();
    eventually("the worker to deliver every job", || {
        unfinished(&mut client, "pord") == 0
    });
    stop.store(true, Ordering::Relaxed);
    let retried = retrier.join().unwrap();
    eventually("the jobs put back last to end", || {
        unfinished(&mut client, "pord") == 0
    });
    let (succeeded, failed): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'succeeded'),
                        count(*) FILTER (WHERE status = 'failed')
                   FROM queue_jobs WHERE queue = 'pord'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let (logged, twice, batches): (i64, i64, i64) = {
        let row = client
            .query_one(
                "SELECT count(*), count(*) - count(DISTINCT job), count(DISTINCT batch) FROM went",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    println!(
        "{succeeded} succeeded and {failed} failed in {batches} batches; {} dead letters put back",
        retried.len()
    );
    assert_eq!(succeeded + failed, 2000, "every job ends");
    assert_eq!((logged, twice), (succeeded, 0), "each delivered once");
    // a call of a group's job while the one before it had not committed
    let overlaps: Vec<(String, i64, i64)> = client
        .query(
            "SELECT grp, before, job FROM (
                 SELECT grp, job, called_at,
                        lag(job) OVER w AS before,
                        lag(pg_xact_commit_timestamp(xmin)) OVER w AS before_done
                   FROM went WINDOW w AS (PARTITION BY grp ORDER BY called_at)) c
              WHERE called_at < before_done",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert!(
        overlaps.is_empty(),
        "two jobs of a group in flight at once: {overlaps:?}"
    );
    let order: Vec<(String, i64)> = client
        .query("SELECT grp, job FROM went ORDER BY called_at", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let kept: Vec<(String, i64)> = order
        .into_iter()
        .filter(|(_, id)| !retried.contains(id))
        .collect();
    each_group_in_id_order("the worker", kept);
}

/// The worker delivers an ordered queue's heads in one transaction, where
/// they stay 'ready' until it commits: a dead letter of a group put back by
/// `queue_retry` while a later job of its group is in such a batch would be
/// the group's head beside it. The retry waits for the batch instead.
#[test]
fn a_dead_letter_retried_while_the_worker_delivers_a_later_job_of_its_group_waits_for_it() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE flags (fail boolean);
             INSERT INTO flags VALUES (true);
             CREATE TABLE went (job bigint, at timestamptz);
             CREATE FUNCTION go(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload'->>'kind' = 'first' AND (SELECT fail FROM public.flags) THEN
                     RAISE EXCEPTION 'the first fails';
                 END IF;
                 IF job->'payload'->>'kind' = 'slow' THEN
                     PERFORM pg_sleep(4);
                 END IF;
                 INSERT INTO public.went VALUES ((job->>'id')::bigint, clock_timestamp());
             END $$;
             SELECT queue_create('heads', ordered => true, max_attempts => 1);
             SELECT queue_pause('heads');
             SELECT queue_register_sender('heads', 'go(jsonb)');",
        )
        .unwrap();
    let first: i64 = one(
        &mut client,
        "SELECT queue_enqueue('heads', '{\"kind\": \"first\"}', group_key => 'g')",
        &[],
    );
    let slow: i64 = one(
        &mut client,
        "SELECT queue_enqueue('heads', '{\"kind\": \"slow\"}', group_key => 'g')",
        &[],
    );
    client
        .batch_execute("SELECT queue_resume('heads')")
        .unwrap();
    eventually("the first job to be a dead letter", || {
        one::<String>(&mut client, "SELECT status FROM queue_job($1)", &[&first]) == "failed"
    });
    client
        .batch_execute("UPDATE flags SET fail = false")
        .unwrap();
    eventually("the worker to call the sender for the slow job", || {
        one::<bool>(
            &mut client,
            "SELECT EXISTS (SELECT FROM pg_stat_activity
                             WHERE backend_type <> 'client backend' AND wait_event = 'PgSleep')",
            &[],
        )
    });
    let mut retrier = cluster.connect();
    let pid: i32 = one(&mut retrier, "SELECT pg_backend_pid()", &[]);
    let retry =
        std::thread::spawn(move || one::<bool>(&mut retrier, "SELECT queue_retry($1)", &[&first]));
    waits_for_a_lock(&cluster, pid, "the retry");
    assert!(retry.join().unwrap(), "the dead letter is put back");
    eventually("both jobs delivered", || {
        one::<i64>(&mut client, "SELECT count(*) FROM went", &[]) == 2
    });
    let order: Vec<i64> = client
        .query("SELECT job FROM went ORDER BY at", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        order,
        [slow, first],
        "the retried job went after the later one"
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
    let ended: Vec<(String, Option<String>)> = client
        .query(
            "SELECT status, last_error FROM queue_jobs WHERE queue = 'paced' ORDER BY id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
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
