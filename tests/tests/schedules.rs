//! Schedules (docs/schedules.md) over real connections and real servers:
//! a minute of ticks into a SQL sender queue (one job per tick, and how
//! late each one was), no_overlap, catch_up after an immediate stop, a
//! dozen tenant databases on four worker slots, and exactly one job per
//! tick across crashes while ticks fire.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queue_client_tests::{
    all_rows, column, complete, eventually, one, one_row, Client, Cluster, DURABLE,
};

/// The ticks (whole Unix seconds) that schedule `name` has enqueued jobs
/// for, each with how many jobs it got.
fn ticks_of(client: &mut Client, name: &str) -> BTreeMap<i64, i64> {
    all_rows(
        client,
        "SELECT extract(epoch FROM (headers->>'scheduled_for')::timestamptz)::bigint,
                count(*)
           FROM queue_jobs WHERE headers->>'schedule' = $1 GROUP BY 1",
        &[&name],
    )
    .into_iter()
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
            let done: bool = complete(&mut consumer, id, &lease);
            assert!(done);
            handled += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (runs, skipped): (i64, i64) = one_row(
        &mut client,
        "SELECT runs_total, skipped_total FROM queue_schedules WHERE name = 'no-overlap'",
        &[],
    );
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
    let (rows, distinct): (i64, i64) = one_row(
        &mut client,
        "SELECT count(*), count(DISTINCT scheduled_for) FROM ticks",
        &[],
    );
    assert_eq!((rows, distinct), (ticks.len() as i64, ticks.len() as i64));
    // how late: from the tick to the job's enqueue, and to its delivery
    let mut lags: Vec<(f64, f64)> = all_rows(
        &mut client,
        "SELECT extract(epoch FROM j.enqueued_at - t.scheduled_for)::float8,
                extract(epoch FROM t.delivered_at - t.scheduled_for)::float8
           FROM ticks t JOIN queue_jobs j ON j.id = t.job",
        &[],
    );
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
    assert!(
        handled >= 10 && runs <= handled + 1,
        "runs {runs}, handled {handled}"
    );
    let (first, last) = (*jobs.keys().next().unwrap(), *jobs.keys().last().unwrap());
    assert!(
        skipped >= last - first + 1 - runs,
        "runs {runs} skipped {skipped} over {first}..{last}"
    );
    println!("no_overlap over a minute: {runs} runs, {skipped} ticks skipped");
}

/// The server's start, in whole Unix seconds rounded up: ticks before it
/// are missed ones.
fn server_start(client: &mut Client) -> f64 {
    one(
        client,
        "SELECT extract(epoch FROM pg_postmaster_start_time())::float8",
        &[],
    )
}

#[test]
fn catch_up_after_an_immediate_stop_does_what_it_says() {
    let cluster = Cluster::start_with(&[DURABLE]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('missed');
             SELECT queue_schedule('c-' || mode, 'missed', '* * * * * *', catch_up => mode)
               FROM unnest(ARRAY['none', 'one', 'all']) mode;",
        )
        .unwrap();
    eventually("ticks firing", || ticks_of(&mut client, "c-all").len() >= 3);
    drop(client);
    cluster.crash();
    std::thread::sleep(Duration::from_secs(5));
    cluster.start_server();
    let mut client = cluster.connect();
    let start = server_start(&mut client);
    // (the first tick at or after the start is a late one, not missed)
    let first_late = start.ceil() as i64;
    eventually("ticks since the restart", || {
        ticks_of(&mut client, "c-none")
            .keys()
            .any(|t| *t >= first_late + 2)
    });
    let stats: BTreeMap<String, (i64, i64)> = client
        .query(
            "SELECT name, runs_total, skipped_total FROM queue_schedules",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    // the last tick before the stop: the three fire in one transaction, and
    // 'none' fills in nothing after it
    let last_before_stop = {
        let none = ticks_of(&mut client, "c-none");
        let first = *none.keys().next().unwrap();
        (first..)
            .take_while(|t| none.contains_key(t))
            .last()
            .unwrap()
    };
    for mode in ["none", "one", "all"] {
        let name = format!("c-{mode}");
        let ticks = ticks_of(&mut client, &name);
        assert!(ticks.values().all(|n| *n == 1), "{name}: {ticks:?}");
        let first = *ticks.keys().next().unwrap();
        let last = *ticks.keys().last().unwrap();
        // every tick before the stop, and every one since the start
        assert_eq!(
            missing(&ticks, first, last_before_stop),
            Vec::<i64>::new(),
            "{name}"
        );
        assert_eq!(
            missing(&ticks, first_late, last),
            Vec::<i64>::new(),
            "{name}"
        );
        // the missed ones: between the last before the stop and the start
        let missed: Vec<i64> = (last_before_stop + 1..first_late).collect();
        assert!(
            missed.len() >= 4,
            "{name}: the server was down 5 s: {missed:?}"
        );
        let caught: Vec<i64> = missed
            .iter()
            .copied()
            .filter(|t| ticks.contains_key(t))
            .collect();
        let expected = match mode {
            "none" => vec![],
            "one" => vec![*missed.last().unwrap()],
            _ => missed.clone(),
        };
        assert_eq!(caught, expected, "{name}: missed {missed:?}");
        let (runs, skipped) = stats[&name];
        assert_eq!(runs, ticks.len() as i64, "{name}");
        assert_eq!(skipped, (missed.len() - expected.len()) as i64, "{name}");
        println!(
            "catch_up '{mode}': {} missed, {} caught up",
            missed.len(),
            caught.len()
        );
    }
}

#[test]
fn a_dozen_tenants_on_four_slots_fire_every_tick_once() {
    // the default queue.max_workers (4) and queue.idle_exit
    let cluster = Cluster::start_with(&["max_connections = 100"]);
    let names: Vec<String> = (1..=12).map(|i| format!("tenant_{i:02}")).collect();
    for name in &names {
        cluster.create_database(
            name,
            "CREATE EXTENSION queue;
             SELECT queue_create('digest');
             SELECT queue_schedule('every-2s', 'digest', '*/2 * * * * *');",
        );
    }
    std::thread::sleep(Duration::from_secs(30));
    let mut lags = Vec::new();
    for name in &names {
        let mut client = cluster.connect_to(name);
        client
            .batch_execute(
                "SELECT queue_schedule('every-2s', 'digest', '*/2 * * * * *', paused => true)",
            )
            .unwrap();
        let ticks = ticks_of(&mut client, "every-2s");
        let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
        assert!(last - first >= 20, "{name}: {first}..{last}");
        let gaps: Vec<i64> = (first..=last)
            .step_by(2)
            .filter(|t| !ticks.contains_key(t))
            .collect();
        assert_eq!(gaps, Vec::<i64>::new(), "{name}: a tick without its job");
        assert!(ticks.values().all(|n| *n == 1), "{name}: {ticks:?}");
        let mut lag: Vec<f64> = column(
            &mut client,
            "SELECT extract(epoch FROM enqueued_at
                            - (headers->>'scheduled_for')::timestamptz)::float8
               FROM queue_jobs WHERE queue = 'digest'",
            &[],
        );
        lags.append(&mut lag);
    }
    lags.sort_by(f64::total_cmp);
    println!(
        "12 databases on 4 slots, {} ticks: lag p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        lags.len(),
        percentile(&lags, 0.5) * 1e3,
        percentile(&lags, 0.99) * 1e3,
        lags[lags.len() - 1] * 1e3
    );
}

#[test]
fn exactly_one_job_per_tick_across_crashes_while_ticks_fire() {
    let cluster = Cluster::start_with(&[DURABLE]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE TABLE seen (job bigint PRIMARY KEY, scheduled_for timestamptz);
             CREATE FUNCTION see(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO seen VALUES ((job->>'id')::bigint,
                                          (job->'headers'->>'scheduled_for')::timestamptz)
             $$;
             SELECT queue_create('pushed');
             SELECT queue_register_sender('pushed', 'see(jsonb)');
             SELECT queue_create('pulled');
             SELECT queue_schedule('to-sender', 'pushed', '* * * * * *', catch_up => 'all');
             SELECT queue_schedule('to-pull', 'pulled', '* * * * * *', catch_up => 'all');",
        )
        .unwrap();
    drop(client);
    // crashes at every point of a second, while ticks fire and deliver
    for round in 0..8u64 {
        std::thread::sleep(Duration::from_millis(1_300 + round * 170));
        cluster.crash();
        cluster.start_server();
    }
    std::thread::sleep(Duration::from_secs(3));
    let mut client = cluster.connect();
    for name in ["to-sender", "to-pull"] {
        let ticks = ticks_of(&mut client, name);
        let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
        assert!(last - first >= 12, "{name}: {first}..{last}");
        assert!(
            ticks.values().all(|n| *n == 1),
            "{name}: a tick with two jobs: {ticks:?}"
        );
        assert_eq!(missing(&ticks, first, last), Vec::<i64>::new(), "{name}");
        let (runs, skipped): (i64, i64) = one_row(
            &mut client,
            "SELECT runs_total, skipped_total FROM queue_schedules WHERE name = $1",
            &[&name],
        );
        assert_eq!((runs, skipped), (ticks.len() as i64, 0), "{name}");
    }
    // every job of the sender queue delivered once: the crashes lost none
    eventually("every tick delivered", || {
        let left: i64 = one(
            &mut client,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'pushed' AND status <> 'succeeded'",
            &[],
        );
        left == 0
    });
    let (delivered, jobs): (i64, i64) = one_row(
        &mut client,
        "SELECT (SELECT count(*) FROM seen),
                (SELECT count(*) FROM queue_jobs WHERE queue = 'pushed')",
        &[],
    );
    assert_eq!(delivered, jobs);
}

#[test]
fn a_failover_to_a_synchronous_standby_keeps_one_job_per_tick() {
    let primary = Cluster::start_with(&[DURABLE]);
    let standby = primary.synchronous_standby(&[]);
    let mut client = primary.connect();
    client
        .batch_execute(
            "SELECT queue_create('ha');
             SELECT queue_schedule('ha-tick', 'ha', '* * * * * *', catch_up => 'all');
             SELECT queue_schedule('ha-none', 'ha', '* * * * * *', catch_up => 'none');
             SELECT queue_schedule('ha-one', 'ha', '* * * * * *', catch_up => 'one');",
        )
        .unwrap();
    eventually("ticks on the primary", || {
        ticks_of(&mut client, "ha-tick").len() >= 4
    });
    let crashed_at: f64 = one(&mut client, "SELECT extract(epoch FROM now())::float8", &[]);
    drop(client);
    primary.crash();
    // (the failover's downtime: ticks fall due that nothing can fire)
    std::thread::sleep(Duration::from_secs(4));
    standby.promote();
    let mut client = standby.connect();
    let promoted_at: f64 = one(&mut client, "SELECT extract(epoch FROM now())::float8", &[]);
    eventually("ticks on the new primary", || {
        ticks_of(&mut client, "ha-tick")
            .keys()
            .any(|t| *t as f64 >= promoted_at + 2.0)
    });
    let ticks = ticks_of(&mut client, "ha-tick");
    let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
    assert!(
        ticks.values().all(|n| *n == 1),
        "a tick with two jobs: {ticks:?}"
    );
    assert_eq!(missing(&ticks, first, last), Vec::<i64>::new());
    // catch_up 'none' and 'one' across the promotion, as across a restart:
    // the ticks that fell due while no primary served are missed, not late
    // (before 0.4 every one of them fired); the launcher starts serving at
    // about the promotion, a second before which is certainly missed
    for name in ["ha-none", "ha-one"] {
        eventually(&format!("{name} ticks on the new primary"), || {
            ticks_of(&mut client, name)
                .keys()
                .any(|t| *t as f64 >= promoted_at + 2.0)
        });
        let ticks = ticks_of(&mut client, name);
        let fired_in_downtime: Vec<i64> = ticks
            .keys()
            .copied()
            .filter(|t| *t as f64 > crashed_at && (*t as f64) < promoted_at - 1.5)
            .collect();
        assert_eq!(fired_in_downtime, Vec::<i64>::new(), "{name}: {ticks:?}");
        assert!(ticks.values().all(|n| *n == 1), "{name}: {ticks:?}");
    }
}

#[test]
fn replacing_and_pausing_a_schedule_while_ticks_fire_keeps_one_job_per_tick() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('busy');
             SELECT queue_schedule('replaced', 'busy', '* * * * * *', catch_up => 'one');",
        )
        .unwrap();
    // two connections replace it (same ticks, new payloads) as fast as they
    // can for 6 s, while its ticks fire
    let replacers: Vec<_> = (0..2)
        .map(|n| {
            let mut client = cluster.connect();
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut replaced = 0;
                while started.elapsed() < Duration::from_secs(6) {
                    client
                        .execute(
                            "SELECT queue_schedule('replaced', 'busy', '* * * * * *',
                                                   payload => jsonb_build_object('by', $1::int),
                                                   catch_up => 'one')",
                            &[&n],
                        )
                        .unwrap();
                    replaced += 1;
                }
                replaced
            })
        })
        .collect();
    let replaced: i32 = replacers.into_iter().map(|t| t.join().unwrap()).sum();
    let ticks = ticks_of(&mut client, "replaced");
    let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
    assert!(
        ticks.values().all(|n| *n == 1),
        "a tick with two jobs: {ticks:?}"
    );
    assert_eq!(missing(&ticks, first, last), Vec::<i64>::new());
    assert!(last - first >= 4, "{first}..{last}");
    println!("{replaced} replacements while {} ticks fired", ticks.len());

    // paused for 4 s, then resumed: the ticks of the pause are missed ones,
    // and catch_up 'one' runs the latest of them
    client
        .batch_execute("SELECT queue_schedule('replaced', 'busy', '* * * * * *', paused => true)")
        .unwrap();
    let paused_at = *ticks_of(&mut client, "replaced").keys().last().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let resumed_at: f64 = one(
        &mut client,
        "SELECT extract(epoch FROM clock_timestamp())::float8",
        &[],
    );
    client
        .batch_execute(
            "SELECT queue_schedule('replaced', 'busy', '* * * * * *', catch_up => 'one')",
        )
        .unwrap();
    let resumed = resumed_at.floor() as i64;
    eventually("ticks after the resume", || {
        ticks_of(&mut client, "replaced")
            .keys()
            .any(|t| *t > resumed + 2)
    });
    let ticks = ticks_of(&mut client, "replaced");
    // the missed ones before the latest: none ran (the latest is the
    // second the resume came in, or the one after)
    let older: Vec<i64> = ticks
        .keys()
        .copied()
        .filter(|t| *t > paused_at && *t < resumed)
        .collect();
    assert_eq!(
        older,
        Vec::<i64>::new(),
        "paused at {paused_at}, resumed at {resumed_at}"
    );
    assert!(ticks.values().all(|n| *n == 1), "{ticks:?}");
    assert_eq!(
        missing(&ticks, resumed + 1, *ticks.keys().last().unwrap()),
        Vec::<i64>::new()
    );
    let skipped: i64 = one(
        &mut client,
        "SELECT skipped_total FROM queue_schedules WHERE name = 'replaced'",
        &[],
    );
    assert!(
        skipped >= 2,
        "the older ticks of the pause are counted as skipped: {skipped}"
    );
}

#[test]
fn between_ticks_a_database_keeps_no_worker() {
    let cluster = Cluster::start_with(&["queue.idle_exit = '1s'"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('sparse');
             SELECT queue_schedule('every-10s', 'sparse', '*/10 * * * * *');",
        )
        .unwrap();
    let workers = |client: &mut Client| -> i64 {
        one(
            client,
            "SELECT count(*) FROM queue_workers WHERE pid IS NOT NULL",
            &[],
        )
    };
    // over 40 s: ticks fire, and most of the time no worker runs
    let (mut samples, mut with_worker) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(40) {
        samples += 1;
        with_worker += i32::from(workers(&mut client) > 0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let ticks = ticks_of(&mut client, "every-10s");
    let (first, last) = (*ticks.keys().next().unwrap(), *ticks.keys().last().unwrap());
    assert!(ticks.len() >= 4, "{ticks:?}");
    // 10 divides a minute, so the ticks are 10 s apart across minutes too
    let gaps: Vec<i64> = (first..=last)
        .step_by(10)
        .filter(|t| !ticks.contains_key(t))
        .collect();
    assert_eq!(gaps, Vec::<i64>::new());
    println!("a worker ran in {with_worker} of {samples} samples");
    assert!(
        with_worker * 2 < samples,
        "a worker ran in {with_worker} of {samples} samples"
    );
}
