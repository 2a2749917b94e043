//! Schedules (docs/schedules.md) over real connections and real servers:
//! a minute of ticks into a SQL sender queue (one job per tick, and how
//! late each one was), no_overlap, catch_up after an immediate stop, a
//! dozen tenant databases on four worker slots, and exactly one job per
//! tick across crashes while ticks fire.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queue_client_tests::{eventually, one, Client, Cluster};

/// The ticks (whole Unix seconds) that schedule `name` has enqueued jobs
/// for, each with how many jobs it got.
fn ticks_of(client: &mut Client, name: &str) -> BTreeMap<i64, i64> {
    client
        .query(
            "SELECT extract(epoch FROM (headers->>'scheduled_for')::timestamptz)::bigint,
                    count(*)
               FROM queue_jobs WHERE headers->>'schedule' = $1 GROUP BY 1",
            &[&name],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Seconds `from..=to` missing from `ticks`.
fn missing(ticks: &BTreeMap<i64, i64>, from: i64, to: i64) -> Vec<i64> {
    (from..=to).filter(|s| !ticks.contains_key(s)).collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_minute_of_ticks_gets_one_job_each_and_no_overlap_skips() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE ticks (job bigint, scheduled_for timestamptz,
                                 delivered_at timestamptz);
             CREATE FUNCTION record_tick(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO ticks SELECT (job->>'id')::bigint,
                        (job->'headers'->>'scheduled_for')::timestamptz, clock_timestamp()
             $$;
             SELECT queue_create('ticks');
             SELECT queue_register_sender('ticks', 'record_tick(jsonb)');
             SELECT queue_create('slow', lease => '1 minute');
             SELECT queue_schedule('every-second', 'ticks', '* * * * * *');
             SELECT queue_schedule('no-overlap', 'slow', '* * * * * *', no_overlap => true);",
        )
        .unwrap();
    // a consumer of 'slow' that takes 3.5 s over each job
    let mut consumer = cluster.connect();
    let started = Instant::now();
    let mut handled = 0;
    while started.elapsed() < Duration::from_secs(61) {
        let rows = consumer
            .query("SELECT id, lease::text FROM queue_claim('slow', 'c')", &[])
            .unwrap();
        for row in rows {
            let (id, lease): (i64, String) = (row.get(0), row.get(1));
            std::thread::sleep(Duration::from_millis(3500));
            let done: bool = one(
                &mut consumer,
                "SELECT queue_complete($1, $2::text::uuid)",
                &[&id, &lease],
            );
            assert!(done);
            handled += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (runs, skipped): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT runs_total, skipped_total FROM queue_schedules WHERE name = 'no-overlap'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    client
        .batch_execute("SELECT queue_unschedule('every-second'), queue_unschedule('no-overlap')")
        .unwrap();
    eventually("every job of 'ticks' delivered", || {
        let left: i64 = one(
            &mut client,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'ticks' AND status <> 'succeeded'",
            &[],
        );
        left == 0
    });

    // one job per tick, every second from the first to the last
    let ticks = ticks_of(&mut client, "every-second");
    let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
    assert!(last - first >= 58, "{first}..{last}");
    assert_eq!(missing(&ticks, first, last), Vec::<i64>::new());
    assert!(ticks.values().all(|n| *n == 1), "{ticks:?}");
    // each delivered once (the sender's own record)
    let (rows, distinct): (i64, i64) = {
        let row = client
            .query_one("SELECT count(*), count(DISTINCT scheduled_for) FROM ticks", &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((rows, distinct), (ticks.len() as i64, ticks.len() as i64));
    // how late: from the tick to the job's enqueue, and to its delivery
    let mut lags: Vec<(f64, f64)> = client
        .query(
            "SELECT extract(epoch FROM j.enqueued_at - t.scheduled_for)::float8,
                    extract(epoch FROM t.delivered_at - t.scheduled_for)::float8
               FROM ticks t JOIN queue_jobs j ON j.id = t.job",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    lags.sort_by(|a, b| a.0.total_cmp(&b.0));
    let enqueue: Vec<f64> = lags.iter().map(|l| l.0).collect();
    let mut delivery: Vec<f64> = lags.iter().map(|l| l.1).collect();
    delivery.sort_by(f64::total_cmp);
    println!(
        "lag from tick to enqueue over {} ticks: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
         to delivery: p50 {:.1} ms, max {:.1} ms",
        enqueue.len(),
        percentile(&enqueue, 0.5) * 1e3,
        percentile(&enqueue, 0.99) * 1e3,
        enqueue[enqueue.len() - 1] * 1e3,
        percentile(&delivery, 0.5) * 1e3,
        delivery[delivery.len() - 1] * 1e3,
    );
    assert!(enqueue[0] >= 0.0, "never before its tick");

    // no_overlap: a job only once the one before it ended, and every tick
    // in between counted as skipped
    let overlaps: i64 = one(
        &mut client,
        "SELECT count(*) FROM (
             SELECT enqueued_at, lag(finished_at) OVER (ORDER BY id) AS previous_end
               FROM queue_jobs WHERE headers->>'schedule' = 'no-overlap') j
          WHERE previous_end IS NULL AND enqueued_at > (SELECT min(enqueued_at) FROM queue_jobs
                                                        WHERE headers->>'schedule' = 'no-overlap')
             OR enqueued_at < previous_end",
        &[],
    );
    assert_eq!(overlaps, 0);
    let jobs = ticks_of(&mut client, "no-overlap");
    assert_eq!(jobs.len() as i64, runs);
    assert!(handled >= 10 && runs <= handled + 1, "runs {runs}, handled {handled}");
    let (first, last) = (*jobs.keys().next().unwrap(), *jobs.keys().last().unwrap());
    assert!(skipped >= last - first + 1 - runs, "runs {runs} skipped {skipped} over {first}..{last}");
    println!("no_overlap over a minute: {runs} runs, {skipped} ticks skipped");
}
