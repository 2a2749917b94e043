//! Ordered queues (docs/groups.md) over real connections: 8 racing
//! consumers with failures, retries, expired leases, cancels and dead letters
//! put back while a later job of their group is in flight, checked from a
//! log the consumers write, also with limits across immediate stops of the
//! server; and the worker delivering each group job after job, through a SQL
//! sender and a webhook, without a poll and through failures and retries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_client_tests::receiver::Receiver;
use queue_client_tests::{
    all_rows, column, enqueue_group, eventually, one, one_row, unfinished, waits_for_a_lock,
    Client, Cluster, DURABLE, EVENT_LOG,
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
    client.batch_execute(EVENT_LOG).unwrap();
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
    let statuses: Vec<(String, i64)> = all_rows(
        &mut client,
        "SELECT status, count(*) FROM queue_jobs WHERE queue = 'ord' GROUP BY 1 ORDER BY 1",
        &[],
    );
    let total: i64 = statuses.iter().map(|s| s.1).sum();
    assert_eq!(total, 2000, "no job lost: {statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|(s, _)| ["succeeded", "failed", "cancelled"].contains(&s.as_str())),
        "every job ended: {statuses:?}"
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
    let pushed: Vec<(String, i64)> =
        all_rows(&mut client, "SELECT grp, job FROM chain ORDER BY n", &[]);
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
                let dead: Vec<i64> = column(
                    &mut client,
                    "SELECT id FROM queue_jobs WHERE queue = 'pord' AND status = 'failed' LIMIT 5",
                    &[],
                );
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
    let (succeeded, failed): (i64, i64) = one_row(
        &mut client,
        "SELECT count(*) FILTER (WHERE status = 'succeeded'),
                count(*) FILTER (WHERE status = 'failed')
           FROM queue_jobs WHERE queue = 'pord'",
        &[],
    );
    let (logged, twice, batches): (i64, i64, i64) = one_row(
        &mut client,
        "SELECT count(*), count(*) - count(DISTINCT job), count(DISTINCT batch) FROM went",
        &[],
    );
    println!(
        "{succeeded} succeeded and {failed} failed in {batches} batches; {} dead letters put back",
        retried.len()
    );
    assert_eq!(succeeded + failed, 2000, "every job ends");
    assert_eq!((logged, twice), (succeeded, 0), "each delivered once");
    // a call of a group's job while the one before it had not committed
    let overlaps: Vec<(String, i64, i64)> = all_rows(
        &mut client,
        "SELECT grp, before, job FROM (
             SELECT grp, job, called_at,
                    lag(job) OVER w AS before,
                    lag(pg_xact_commit_timestamp(xmin)) OVER w AS before_done
               FROM went WINDOW w AS (PARTITION BY grp ORDER BY called_at)) c
          WHERE called_at < before_done",
        &[],
    );
    assert!(
        overlaps.is_empty(),
        "two jobs of a group in flight at once: {overlaps:?}"
    );
    let order: Vec<(String, i64)> = all_rows(
        &mut client,
        "SELECT grp, job FROM went ORDER BY called_at",
        &[],
    );
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
    let order: Vec<i64> = column(&mut client, "SELECT job FROM went ORDER BY at", &[]);
    assert_eq!(
        order,
        [slow, first],
        "the retried job went after the later one"
    );
}
