//! `make bench-tenants`: push delivery across many tenant databases that
//! share a few worker slots (queue.max_workers, 4 by default).
//!
//!   queue-bench-tenants SOCKET_DIR PORT N
//!
//! Run by bench/tenants.sh on a throwaway cluster of its own. Makes a
//! template database with one queue and a plpgsql sender, N tenant databases
//! copied from it, and then measures, per phase, the latency from a job's
//! commit to its sender call (`called_at - enqueued_at`, read back from the
//! sender's `deliveries` table; in the bursts, whose transactions stay open
//! until all are ready, from the moment the client sent the COMMIT):
//!
//!   baseline    one job in one database at a time, with a worker slot free;
//!               each cold worker's CPU from its start until its job is
//!               recorded, against a fresh connection running one statement
//!               (the bare start), whose CPU gives each burst its limit:
//!               2 × databases × bare start ÷ cores
//!   burst       one job in every database, committed at (nearly) the same time
//!   steady      every database gets a job every BENCH_STEADY_PERIOD s
//!   after idle  the burst again, once every worker has exited idle
//!   idle cost   the launcher's CPU while N databases sit idle
//!   schedules   every database with a schedule (every BENCH_SCHEDULE_PERIOD
//!               s): the lag from each tick to its job's enqueue, jobs per
//!               tick, and the launcher's CPU meanwhile
//!
//! Prints a markdown section on stdout and its progress on stderr. It only
//! reports: nothing here asserts a timing.
//!
//! Environment: BENCH_QUALIFY=1 (the sender names public.deliveries and
//! pg_catalog.clock_timestamp(), for a build that runs senders with
//! search_path = pg_catalog, pg_temp), BENCH_STRATEGY (WAL_LOG, PostgreSQL
//! 15's default: on 2 cores it made 40 copies of the 8 MB template in 3.4 to
//! 4.5 s, FILE_COPY, with its two checkpoints per copy, in 16 to 27 s),
//! BENCH_BASELINE_JOBS (5), BENCH_DEADLINE_SECS (300), BENCH_STEADY_SECS (60),
//! BENCH_STEADY_PERIOD (5), BENCH_STEADY_THREADS (4), BENCH_BURST_PER_THREAD
//! (50), BENCH_SETTLE_SECS (120 + 2 N), BENCH_IDLE_WAIT_SECS (180),
//! BENCH_IDLE_COST_SECS (30), BENCH_SCHEDULE_PERIOD (10 up to 100 databases,
//! else 60), BENCH_SCHEDULE_TICKS (6 up to 100 databases, else 3).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};

const TEMPLATE: &str = "tenant_template";
const ENQUEUE: &str = "SELECT queue_enqueue('events', '{}')";

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {v:?}")),
        _ => default,
    }
}

struct Settings {
    dir: String,
    port: u16,
    n: usize,
    qualify: bool,
    strategy: String,
    baseline_jobs: usize,
    deadline: Duration,
    steady_secs: u64,
    steady_period: u64,
    steady_threads: usize,
    burst_per_thread: usize,
    settle: Duration,
    idle_wait: Duration,
    idle_cost: Duration,
    schedule_period: u64,
    schedule_ticks: u64,
}

impl Settings {
    fn from_args() -> Settings {
        let args: Vec<String> = std::env::args().collect();
        if args.len() != 4 {
            eprintln!("usage: {} SOCKET_DIR PORT N", args[0]);
            std::process::exit(2);
        }
        let n: usize = args[3].parse().expect("N is a number of databases");
        assert!(n >= 1, "N must be at least 1");
        Settings {
            dir: args[1].clone(),
            port: args[2].parse().expect("PORT is a number"),
            n,
            qualify: std::env::var("BENCH_QUALIFY").is_ok_and(|v| v == "1"),
            strategy: std::env::var("BENCH_STRATEGY")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "WAL_LOG".into()),
            baseline_jobs: env_u64("BENCH_BASELINE_JOBS", 5) as usize,
            deadline: Duration::from_secs(env_u64("BENCH_DEADLINE_SECS", 300)),
            steady_secs: env_u64("BENCH_STEADY_SECS", 60),
            steady_period: env_u64("BENCH_STEADY_PERIOD", 5).max(1),
            steady_threads: (env_u64("BENCH_STEADY_THREADS", 4) as usize).max(1),
            burst_per_thread: (env_u64("BENCH_BURST_PER_THREAD", 50) as usize).max(1),
            settle: Duration::from_secs(env_u64("BENCH_SETTLE_SECS", 120 + 2 * n as u64)),
            idle_wait: Duration::from_secs(env_u64("BENCH_IDLE_WAIT_SECS", 180)),
            idle_cost: Duration::from_secs(env_u64("BENCH_IDLE_COST_SECS", 30).max(1)),
            schedule_period: env_u64("BENCH_SCHEDULE_PERIOD", if n <= 100 { 10 } else { 60 })
                .clamp(1, 60),
            schedule_ticks: env_u64("BENCH_SCHEDULE_TICKS", if n <= 100 { 6 } else { 3 }).max(1),
        }
    }

    fn connect(&self, db: &str) -> Client {
        let conn = format!(
            "host={} port={} user=postgres dbname={db} application_name=bench-tenants",
            self.dir, self.port
        );
        Client::connect(&conn, NoTls).unwrap_or_else(|e| panic!("connecting to {db}: {e}"))
    }

    fn tenant(&self, i: usize) -> String {
        let width = self.n.to_string().len().max(3);
        format!("tenant_{:0width$}", i + 1)
    }
}

/// Wall-clock microseconds since the epoch. The server runs on the same
/// machine, so this compares with its clock_timestamp().
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

macro_rules! progress {
    ($($arg:tt)*) => {
        eprintln!("[{:7.1} s] {}", START.get().unwrap().elapsed().as_secs_f64(), format!($($arg)*))
    };
}

// ------------------------------------------------------------------ set-up

/// The template (extension, table, sender, queue), then N copies of it.
/// Returns how long the copies took.
fn set_up(s: &Settings) -> Duration {
    let mut postgres = s.connect("postgres");
    postgres
        .batch_execute(&format!("CREATE DATABASE {TEMPLATE}"))
        .unwrap();
    {
        let mut t = s.connect(TEMPLATE);
        // The sender as users write it: unqualified names, found through the
        // session's search_path. BENCH_QUALIFY=1 qualifies them, for a build
        // that calls senders with search_path = pg_catalog, pg_temp.
        let (table, clock) = if s.qualify {
            ("public.deliveries", "pg_catalog.clock_timestamp()")
        } else {
            ("deliveries", "clock_timestamp()")
        };
        t.batch_execute(&format!(
            "CREATE EXTENSION queue;
             CREATE TABLE deliveries(job_id bigint, enqueued_at timestamptz, called_at timestamptz);
             CREATE FUNCTION record_delivery(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO {table} VALUES ((job->>'id')::bigint, (job->>'enqueued_at')::timestamptz, {clock});
             END $$;
             SELECT queue_create('events', retry_delay => '1 second');
             SELECT queue_register_sender('events', 'record_delivery(jsonb)');"
        ))
        .unwrap();
    }
    // No connection may stay in a template that is copied: the extension's
    // hook stops the template's worker, and the launcher serves no template.
    postgres
        .batch_execute(&format!("ALTER DATABASE {TEMPLATE} IS_TEMPLATE true"))
        .unwrap();
    progress!(
        "creating {} databases (STRATEGY {}, sender {})",
        s.n,
        s.strategy,
        if s.qualify {
            "qualified"
        } else {
            "unqualified"
        }
    );
    let started = Instant::now();
    for i in 0..s.n {
        postgres
            .batch_execute(&format!(
                "CREATE DATABASE {} TEMPLATE {TEMPLATE} STRATEGY {}",
                s.tenant(i),
                s.strategy
            ))
            .unwrap();
    }
    started.elapsed()
}

// --------------------------------------------------------- watching workers

/// What queue_workers showed at one moment.
struct Sample {
    running: i64,
    waiting: i64,
    pids: Vec<i32>,
    databases: Vec<String>,
}

/// queue_workers is the same in every database (it reads shared memory);
/// the monitor reads it in the template, which is never served, so that
/// watching adds no database to the launcher's line.
fn sample(monitor: &mut Client) -> Sample {
    let row = monitor
        .query_one(
            "SELECT count(*) FILTER (WHERE pid IS NOT NULL),
                    count(*) FILTER (WHERE state = 'waiting for slot'),
                    coalesce(array_agg(pid) FILTER (WHERE pid IS NOT NULL), '{}'),
                    coalesce(array_agg(database) FILTER (WHERE pid IS NOT NULL), '{}')
               FROM queue_workers",
            &[],
        )
        .unwrap();
    Sample {
        running: row.get(0),
        waiting: row.get(1),
        pids: row.get(2),
        databases: row.get(3),
    }
}

/// A thread that samples queue_workers once a second until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    fn start(s: &Settings) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let mut monitor = s.connect(TEMPLATE);
        let stopped = stop.clone();
        let handle = thread::spawn(move || {
            let mut samples = Vec::new();
            let mut next = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                samples.push(sample(&mut monitor));
                next += Duration::from_secs(1);
                while Instant::now() < next && !stopped.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(50));
                }
            }
            samples
        });
        Sampler { stop, handle }
    }

    fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// Waits until no worker has run for `quiet` on end (at most `limit`); how
/// long until that quiet stretch began, or None when workers still ran.
/// New databases are found only at the launcher's next read of
/// pg_database, so right after they are made no worker may run yet: a
/// stretch longer than queue.database_scan_interval tells that apart.
fn wait_quiet(monitor: &mut Client, quiet: Duration, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut quiet_since = None;
    loop {
        if sample(monitor).running == 0 {
            let since = *quiet_since.get_or_insert_with(|| started.elapsed());
            if started.elapsed() - since >= quiet {
                return Some(since);
            }
        } else {
            quiet_since = None;
        }
        if started.elapsed() >= limit + quiet {
            return None;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until no worker runs (at most `limit`); how long that took, or
/// None when workers still ran at the limit.
fn wait_no_workers(monitor: &mut Client, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    loop {
        if sample(monitor).running == 0 {
            return Some(started.elapsed());
        }
        if started.elapsed() >= limit {
            return None;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

fn workers_note(samples: &[Sample]) -> String {
    let running = samples.iter().map(|x| x.running).max().unwrap_or(0);
    let waiting = samples.iter().map(|x| x.waiting).max().unwrap_or(0);
    let served: HashSet<&String> = samples.iter().flat_map(|x| &x.databases).collect();
    format!(
        "queue_workers once a second ({} samples): at most {running} running, at most {waiting} `waiting for slot`, {} databases seen with a worker",
        samples.len(),
        served.len()
    )
}

// ------------------------------------------------------------- jobs, results

/// One enqueued job. `committed_us`: when the client sent its COMMIT, for a
/// job whose transaction stayed open before it (burst); otherwise its
/// latency counts from its enqueued_at, the start of its one-statement
/// transaction.
#[derive(Clone, Copy)]
struct Job {
    db: usize,
    id: i64,
    committed_us: Option<i64>,
}

fn enqueue(client: &mut Client) -> i64 {
    client.query_one(ENQUEUE, &[]).unwrap().get(0)
}

fn by_db(jobs: &[Job]) -> HashMap<usize, Vec<Job>> {
    let mut map: HashMap<usize, Vec<Job>> = HashMap::new();
    for job in jobs {
        map.entry(job.db).or_default().push(*job);
    }
    map
}

/// Polls until every job is in its database's deliveries, or `deadline`
/// passed; returns how many databases still missed a job then.
fn wait_delivered(
    clients: &mut [Client],
    jobs: &[Job],
    deadline: Duration,
    poll: Duration,
) -> usize {
    let started = Instant::now();
    let mut pending: HashMap<usize, Vec<i64>> = by_db(jobs)
        .into_iter()
        .map(|(db, js)| (db, js.iter().map(|j| j.id).collect()))
        .collect();
    loop {
        pending.retain(|&db, ids| {
            let got: i64 = clients[db]
                .query_one(
                    "SELECT count(DISTINCT job_id) FROM deliveries WHERE job_id = ANY($1)",
                    &[ids],
                )
                .unwrap()
                .get(0);
            got < ids.len() as i64
        });
        if pending.is_empty() || started.elapsed() >= deadline {
            return pending.len();
        }
        thread::sleep(poll);
    }
}

struct Phase {
    name: String,
    databases: usize,
    jobs: usize,
    delivered: usize,
    duplicates: usize,
    /// Of the delivered jobs, sorted.
    latencies_ms: Vec<f64>,
    /// The latest sender call, epoch microseconds.
    last_called_us: Option<i64>,
    notes: Vec<String>,
    job_list: Vec<Job>,
    /// Baseline only: each cold worker's CPU from its start until its job
    /// was delivered and recorded (ms, sorted).
    worker_cpu_ms: Vec<f64>,
    /// A burst: every database's job committed at once (it gets a limit).
    all_at_once: bool,
}

/// Reads the phase's jobs back from every database's deliveries.
fn collect(name: &str, clients: &mut [Client], jobs: &[Job]) -> Phase {
    let mut phase = Phase {
        name: name.into(),
        databases: 0,
        jobs: jobs.len(),
        delivered: 0,
        duplicates: 0,
        latencies_ms: Vec::new(),
        last_called_us: None,
        notes: Vec::new(),
        job_list: jobs.to_vec(),
        worker_cpu_ms: Vec::new(),
        all_at_once: false,
    };
    for (db, js) in by_db(jobs) {
        phase.databases += 1;
        let ids: Vec<i64> = js.iter().map(|j| j.id).collect();
        let rows = clients[db]
            .query(
                "SELECT job_id, (extract(epoch FROM enqueued_at) * 1000000)::int8,
                        (extract(epoch FROM called_at) * 1000000)::int8
                   FROM deliveries WHERE job_id = ANY($1) ORDER BY called_at",
                &[&ids],
            )
            .unwrap();
        // the first call of each job (a duplicate would be a later one)
        let mut first: HashMap<i64, (i64, i64)> = HashMap::new();
        for row in &rows {
            first.entry(row.get(0)).or_insert((row.get(1), row.get(2)));
        }
        phase.duplicates += rows.len() - first.len();
        for job in &js {
            if let Some(&(enqueued, called)) = first.get(&job.id) {
                phase.delivered += 1;
                let from = job.committed_us.unwrap_or(enqueued);
                phase.latencies_ms.push((called - from) as f64 / 1000.0);
                phase.last_called_us = Some(phase.last_called_us.map_or(called, |l| l.max(called)));
            }
        }
    }
    phase.latencies_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    phase
}

/// The p-th percentile, nearest rank.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() as f64 * p / 100.0).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn ms(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x.abs() < 10.0 => format!("{x:.2}"),
        Some(x) if x.abs() < 1000.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.0}"),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a / b < 0.1 => format!("{:.3}", a / b),
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}

// ------------------------------------------------------------------ phases

/// One job at a time in different databases, each with a worker slot free,
/// so that every delivery is a cold start of its database's worker.
fn baseline(s: &Settings, clients: &mut [Client], monitor: &mut Client, settled: bool) -> Phase {
    let max_workers: i64 = monitor
        .query_one("SELECT current_setting('queue.max_workers')::int8", &[])
        .unwrap()
        .get(0);
    let reps = s.baseline_jobs.min(s.n).max(1);
    let mut jobs = Vec::new();
    let mut used = HashSet::new();
    let (mut no_slot, mut warm) = (0, 0);
    let mut life_cpu_ms = Vec::new();
    for r in 0..reps {
        // The first job finds no worker at all (after the settle wait);
        // later ones a free slot, the earlier databases' workers still idle.
        // Once a wait has failed the slots stay taken: no more long waits.
        let limit = if no_slot > 0 {
            Duration::from_secs(5)
        } else {
            s.idle_wait
        };
        let started = Instant::now();
        let mut now = sample(monitor);
        while now.running >= max_workers && started.elapsed() < limit {
            thread::sleep(Duration::from_millis(200));
            now = sample(monitor);
        }
        if now.running >= max_workers {
            no_slot += 1;
        }
        // databases spread over the range, skipping any that has a worker
        let has_worker = |i: usize| now.databases.contains(&s.tenant(i));
        let spread = (0..s.n).map(|k| (r * s.n / reps + k) % s.n);
        let db = spread
            .clone()
            .find(|&i| !used.contains(&i) && !has_worker(i))
            .unwrap_or_else(|| spread.clone().find(|i| !used.contains(i)).unwrap());
        let warm_now = has_worker(db);
        if warm_now {
            warm += 1;
        }
        used.insert(db);
        let job = Job {
            db,
            id: enqueue(&mut clients[db]),
            committed_us: None,
        };
        jobs.push(job);
        let missed = wait_delivered(clients, &[job], s.deadline, Duration::from_millis(20));
        if missed == 0 && !warm_now {
            if let Some(ms) = worker_cpu_ms(monitor, &s.tenant(db)) {
                life_cpu_ms.push(ms);
            }
        }
        progress!(
            "baseline {}/{reps}: {} {}",
            r + 1,
            s.tenant(db),
            if missed > 0 {
                "not delivered by the deadline"
            } else {
                "delivered"
            }
        );
    }
    let mut phase = collect(
        "baseline: one job in one database, a slot free",
        clients,
        &jobs,
    );
    life_cpu_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    phase.worker_cpu_ms = life_cpu_ms;
    phase.notes.push(format!(
        "baseline: {reps} jobs in {reps} databases one after the other, each committed while its database had no worker and a slot was free{}{}",
        if settled { "" } else { "; **no worker-free moment was reached before the first one** (see set-up)" },
        if no_slot + warm > 0 {
            format!(
                "; **{no_slot} of them found every slot taken (the first after waiting {} s) and {warm} a worker already in their database**, and were committed anyway",
                s.idle_wait.as_secs()
            )
        } else {
            String::new()
        }
    ));
    phase
}

/// `BEGIN; SELECT queue_enqueue(...)` in every database, then every COMMIT
/// at once: one thread per BENCH_BURST_PER_THREAD connections, released
/// together by a barrier.
fn burst(s: &Settings, name: &str, clients: &mut [Client]) -> Phase {
    let sampler = Sampler::start(s);
    let per = s.burst_per_thread;
    let threads = clients.len().div_ceil(per);
    let barrier = Barrier::new(threads);
    let results: Vec<(Vec<Job>, i64, i64)> = thread::scope(|scope| {
        let handles: Vec<_> = clients
            .chunks_mut(per)
            .enumerate()
            .map(|(t, chunk)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut ids = Vec::new();
                    for c in chunk.iter_mut() {
                        c.batch_execute("BEGIN").unwrap();
                        ids.push(enqueue(c));
                    }
                    barrier.wait();
                    let first = now_us();
                    let mut jobs = Vec::new();
                    for (k, c) in chunk.iter_mut().enumerate() {
                        let committed_us = Some(now_us());
                        c.batch_execute("COMMIT").unwrap();
                        jobs.push(Job {
                            db: t * per + k,
                            id: ids[k],
                            committed_us,
                        });
                    }
                    (jobs, first, now_us())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first_commit = results.iter().map(|r| r.1).min().unwrap();
    let last_commit = results.iter().map(|r| r.2).max().unwrap();
    let jobs: Vec<Job> = results.into_iter().flat_map(|r| r.0).collect();
    progress!(
        "{name}: {} commits in {:.0} ms; waiting for delivery",
        jobs.len(),
        (last_commit - first_commit) as f64 / 1000.0
    );
    let missed = wait_delivered(clients, &jobs, s.deadline, Duration::from_secs(1));
    let samples = sampler.finish();
    let mut phase = collect(name, clients, &jobs);
    phase.all_at_once = true;
    let last = phase.last_called_us.map_or("–".into(), |l| {
        format!("{:.1} s", (l - first_commit) as f64 / 1e6)
    });
    phase.notes.push(format!(
        "{name}: {} commits from {} thread(s) within {:.0} ms (latency counted from each COMMIT sent); last delivery {last} after the first commit; {}; {}",
        jobs.len(),
        threads,
        (last_commit - first_commit) as f64 / 1000.0,
        if missed > 0 {
            format!("**{missed} databases still undelivered at the {} s deadline**", s.deadline.as_secs())
        } else {
            "every database delivered".into()
        },
        workers_note(&samples)
    ));
    phase
}

/// Every database gets a job every BENCH_STEADY_PERIOD s for
/// BENCH_STEADY_SECS s, database i at offset i/N of the period, from
/// BENCH_STEADY_THREADS threads (thread t has the databases i ≡ t mod
/// threads, so each thread's jobs are spread over the whole period too).
fn steady(s: &Settings, clients: &mut [Client]) -> Phase {
    let period_us = s.steady_period as i64 * 1_000_000;
    let rounds = (s.steady_secs / s.steady_period).max(1) as i64;
    let n = s.n as i64;
    let sampler = Sampler::start(s);
    let threads = s.steady_threads.min(s.n);
    let mut lists: Vec<Vec<(usize, &mut Client)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        lists[i % threads].push((i, c));
    }
    let start = Instant::now() + Duration::from_millis(200);
    let results: Vec<(Vec<Job>, i64)> = thread::scope(|scope| {
        let handles: Vec<_> = lists
            .into_iter()
            .map(|list| {
                scope.spawn(move || {
                    let mut list = list;
                    let mut jobs = Vec::new();
                    let mut worst_lag_us = 0;
                    for round in 0..rounds {
                        for (i, c) in list.iter_mut() {
                            let due = start
                                + Duration::from_micros(
                                    (round * period_us + *i as i64 * period_us / n) as u64,
                                );
                            let now = Instant::now();
                            if due > now {
                                thread::sleep(due - now);
                            } else {
                                worst_lag_us = worst_lag_us.max((now - due).as_micros() as i64);
                            }
                            jobs.push(Job {
                                db: *i,
                                id: enqueue(c),
                                committed_us: None,
                            });
                        }
                    }
                    (jobs, worst_lag_us)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let lag_ms = results.iter().map(|r| r.1).max().unwrap_or(0) as f64 / 1000.0;
    let jobs: Vec<Job> = results.into_iter().flat_map(|r| r.0).collect();
    progress!(
        "steady: {} jobs enqueued in {:.1} s; waiting for delivery",
        jobs.len(),
        start.elapsed().as_secs_f64()
    );
    let missed = wait_delivered(clients, &jobs, s.deadline, Duration::from_secs(1));
    let samples = sampler.finish();
    let mut phase = collect(
        &format!(
            "steady: a job per database every {} s for {} s ({} jobs/s)",
            s.steady_period,
            rounds * s.steady_period as i64,
            s.n as f64 / s.steady_period as f64
        ),
        clients,
        &jobs,
    );
    phase.notes.push(format!(
        "steady: {} jobs from {threads} thread(s), at most {lag_ms:.0} ms behind schedule; {}; {}",
        jobs.len(),
        if missed > 0 {
            format!(
                "**{missed} databases still missed jobs {} s after the last enqueue**",
                s.deadline.as_secs()
            )
        } else {
            "every job delivered".into()
        },
        workers_note(&samples)
    ));
    phase
}

/// The CPU of `database`'s worker since it started (ms), read once it has
/// had time to record its delivery and go idle, before its first upkeep a
/// second in (None: no worker there).
fn worker_cpu_ms(monitor: &mut Client, database: &str) -> Option<f64> {
    thread::sleep(Duration::from_millis(300));
    let pid: i32 = monitor
        .query_opt(
            "SELECT pid FROM queue_workers WHERE database = $1 AND pid IS NOT NULL",
            &[&database],
        )
        .unwrap()?
        .get(0);
    cpu_ns(pid).map(|ns| ns as f64 / 1e6)
}

/// What any new backend costs: a fresh connection to each of `databases`
/// that runs one statement, its server process's CPU from its start until
/// that statement has answered (ms, sorted). Measured in the same run as
/// the workers, on the same cluster.
fn bare_start_cpu_ms(s: &Settings, databases: &[String]) -> Vec<f64> {
    let mut out: Vec<f64> = databases
        .iter()
        .filter_map(|db| {
            let mut c = s.connect(db);
            let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
            cpu_ns(pid).map(|ns| ns as f64 / 1e6)
        })
        .collect();
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the fields after "pid (comm) ": state is field 3, utime 14, stime 15
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// Time on CPU in nanoseconds (the scheduler's count, finer than ticks).
fn cpu_ns(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// The launcher's CPU over BENCH_IDLE_COST_SECS with every database idle.
fn idle_cost(s: &Settings, monitor: &mut Client, workers_gone: Option<Duration>) -> String {
    let pid: Option<i32> = monitor
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'",
            &[],
        )
        .unwrap()
        .map(|r| r.get(0));
    let Some(pid) = pid else {
        return "idle cost: no `queue launcher` in pg_stat_activity".into();
    };
    let tck = clock_ticks_per_second();
    let sampler = Sampler::start(s);
    let (before, before_ns) = (cpu_ticks(pid), cpu_ns(pid));
    let started = Instant::now();
    thread::sleep(s.idle_cost);
    let (after, after_ns) = (cpu_ticks(pid), cpu_ns(pid));
    let secs = started.elapsed().as_secs_f64();
    let samples = sampler.finish();
    let pids: HashSet<i32> = samples
        .iter()
        .flat_map(|x| x.pids.iter().copied())
        .collect();
    let most = samples.iter().map(|x| x.running).max().unwrap_or(0);
    // utime + stime counts whole clock ticks (10 ms at 100 Hz), too coarse
    // for a process that sleeps nearly all the time; schedstat is exact
    let per_minute = |cpu_ms: f64| {
        format!(
            "{:.1} ms of CPU per minute ({:.3} % of one core)",
            cpu_ms * 60.0 / secs,
            cpu_ms / 10.0 / secs
        )
    };
    let cpu = match (before, after) {
        (Some(b), Some(a)) => {
            let ticks = format!("utime + stime: {} ticks of 1/{tck} s in {secs:.0} s", a - b);
            match (before_ns, after_ns) {
                (Some(b), Some(a)) => format!(
                    "{} by /proc/PID/schedstat; {ticks}",
                    per_minute((a - b) as f64 / 1e6)
                ),
                _ => format!(
                    "{}; {ticks}",
                    per_minute((a - b) as f64 * 1000.0 / tck as f64)
                ),
            }
        }
        _ => format!("the launcher (pid {pid}) went away during the window"),
    };
    format!(
        "idle cost: launcher over {} s with {} idle databases{}: {cpu}; workers during the window: {} ran, at most {most} at once",
        s.idle_cost.as_secs(),
        s.n,
        match workers_gone {
            Some(_) => " and no worker at the start".to_string(),
            None => format!(", **workers still running after waiting {} s**", s.idle_wait.as_secs()),
        },
        pids.len()
    )
}

/// Every database: count(*) = count(DISTINCT job_id) in deliveries, and
/// every job enqueued in any phase there.
fn exactly_once(s: &Settings, clients: &mut [Client], jobs: &[Job]) -> String {
    let mut all = by_db(jobs);
    let (mut delivered, mut duplicates, mut bad_dbs) = (0i64, 0i64, 0);
    for (db, client) in clients.iter_mut().enumerate() {
        let ids: Vec<i64> = all
            .remove(&db)
            .unwrap_or_default()
            .iter()
            .map(|j| j.id)
            .collect();
        let row = client
            .query_one(
                "SELECT count(*), count(DISTINCT job_id), count(DISTINCT job_id) FILTER (WHERE job_id = ANY($1))
                   FROM deliveries",
                &[&ids],
            )
            .unwrap();
        let (rows, distinct, ours): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        delivered += ours;
        duplicates += rows - distinct;
        if rows != distinct || ours != ids.len() as i64 || distinct != ours {
            bad_dbs += 1;
        }
    }
    format!(
        "exactly once, every phase together: {} jobs, {delivered} delivered, {} missing, {duplicates} duplicates; {} of {} databases with every job exactly once",
        jobs.len(),
        jobs.len() as i64 - delivered,
        s.n - bad_dbs,
        s.n
    )
}

/// Every database gets a schedule firing every `schedule_period` seconds
/// into a pull queue of its own; after `schedule_ticks` ticks past the
/// first whole period, each tick's job is read back: its lag from the tick
/// to its enqueue, and how many jobs each tick got (one, or it is wrong).
fn schedules(s: &Settings, clients: &mut [Client], monitor: &mut Client) -> String {
    let period = s.schedule_period;
    let cron = if period == 60 {
        "0 * * * * *".to_string()
    } else {
        format!("*/{period} * * * * *")
    };
    for client in clients.iter_mut() {
        client
            .batch_execute(&format!(
                "SELECT queue_create('ticks');
                 SELECT queue_schedule('tick', 'ticks', '{cron}');"
            ))
            .unwrap();
    }
    let launcher: Option<i32> = monitor
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'queue launcher'",
            &[],
        )
        .unwrap()
        .map(|r| r.get(0));
    // the ticks counted: from the first whole period after the set-up
    let from = (now_us() / 1_000_000 / period as i64 + 1) * period as i64;
    let to = from + (s.schedule_ticks as i64 - 1) * period as i64;
    let wait_until = Duration::from_secs((to + 2 - now_us() / 1_000_000).max(0) as u64);
    progress!(
        "schedules: {} ticks of {period} s, {:.0} s",
        s.schedule_ticks,
        wait_until.as_secs_f64()
    );
    let cpu_before = launcher.and_then(cpu_ns);
    let started = Instant::now();
    thread::sleep(wait_until);
    // every database's last counted tick fired (a late one is late, not
    // missing), up to the deadline
    let deadline = Instant::now() + s.deadline;
    for client in clients.iter_mut() {
        while Instant::now() < deadline {
            let past: bool = client
                .query_one(
                    "SELECT coalesce(extract(epoch FROM next_run_at)::bigint > $1, true)
                       FROM queue_schedules WHERE name = 'tick'",
                    &[&to],
                )
                .unwrap()
                .get(0);
            if past {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
    let cpu = match (launcher.and_then(cpu_ns), cpu_before) {
        (Some(a), Some(b)) => format!(
            "{:.1} ms of CPU per minute",
            (a - b) as f64 / 1e6 * 60.0 / started.elapsed().as_secs_f64()
        ),
        _ => "not read".into(),
    };
    let (mut lags, mut missing, mut duplicates, mut jobs) = (Vec::new(), 0, 0, 0);
    for client in clients.iter_mut() {
        let rows = client
            .query(
                "SELECT extract(epoch FROM (headers->>'scheduled_for')::timestamptz)::bigint AS tick,
                        count(*),
                        max(extract(epoch FROM enqueued_at
                                    - (headers->>'scheduled_for')::timestamptz))::float8
                   FROM queue_jobs WHERE queue = 'ticks' GROUP BY 1",
                &[],
            )
            .unwrap();
        let got: HashMap<i64, (i64, f64)> = rows
            .iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2))))
            .collect();
        for tick in (from..=to).step_by(period as usize) {
            match got.get(&tick) {
                None => missing += 1,
                Some((n, lag)) => {
                    jobs += n;
                    duplicates += n - 1;
                    lags.push(lag * 1000.0);
                }
            }
        }
        client
            .batch_execute(
                "SELECT queue_unschedule('tick'); SELECT queue_drop('ticks', force => true);",
            )
            .unwrap();
    }
    lags.sort_by(f64::total_cmp);
    format!(
        "schedules: every database with a schedule every {period} s (`{cron}`), {} ticks each \
         counted, {} databases: {jobs} jobs, {missing} ticks without one, {duplicates} more \
         than one; lag from tick to enqueue p50 {} ms, p99 {} ms, max {} ms; the launcher \
         meanwhile: {cpu}",
        s.schedule_ticks,
        s.n,
        ms(percentile(&lags, 50.0)),
        ms(percentile(&lags, 99.0)),
        ms(lags.last().copied()),
    )
}

// ------------------------------------------------------------------ report

/// A cold worker's whole first round against a bare backend's start.
fn first_round_note(worker: &[f64], bare: &[f64]) -> String {
    let range = |v: &[f64]| match (v.first(), v.last()) {
        (Some(a), Some(b)) => format!("{a:.1} to {b:.1}"),
        _ => "–".into(),
    };
    let (w, b) = (percentile(worker, 50.0), percentile(bare, 50.0));
    format!(
        "first round: a cold worker's CPU (/proc/PID/schedstat) from its start until its one job was delivered and recorded: median {} ms ({} ms, {} workers of the baseline); a fresh connection running one statement: median {} ms ({} ms, {} connections); worker / bare start {}",
        ms(w),
        range(worker),
        worker.len(),
        ms(b),
        range(bare),
        bare.len(),
        ratio(w, b)
    )
}

/// `bare_ms`: a fresh backend's CPU (median, ms). A burst (every database
/// at once) gets a limit: twice what N fresh backends cost on this
/// machine's cores, the least any per-database worker can take.
fn table(phases: &[Phase], bare_ms: Option<f64>) -> String {
    let cores = thread::available_parallelism().map_or(1, |c| c.get()) as f64;
    let base = &phases[0];
    let (b50, b99) = (
        percentile(&base.latencies_ms, 50.0),
        percentile(&base.latencies_ms, 99.0),
    );
    let mut out = String::from(
        "| phase | databases | jobs | delivered | duplicates | p50 ms | p99 ms | max ms | p50 / baseline | p99 / baseline | limit ms: 2 × databases × bare start ÷ cores | p99 / limit |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for p in phases {
        let (p50, p99) = (
            percentile(&p.latencies_ms, 50.0),
            percentile(&p.latencies_ms, 99.0),
        );
        let limit = bare_ms
            .filter(|_| p.all_at_once)
            .map(|b| 2.0 * p.databases as f64 * b / cores);
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            p.name,
            p.databases,
            p.jobs,
            p.delivered,
            p.duplicates,
            ms(p50),
            ms(p99),
            ms(p.latencies_ms.last().copied()),
            ratio(p50, b50),
            ratio(p99, b99),
            ms(limit),
            ratio(p99, limit)
        );
    }
    out
}

fn main() {
    START.set(Instant::now()).unwrap();
    let s = Settings::from_args();
    let mut notes = Vec::new();

    let created = set_up(&s);
    progress!(
        "{} databases created in {:.1} s",
        s.n,
        created.as_secs_f64()
    );
    let mut monitor = s.connect(TEMPLATE);
    // The launcher probes every new database it finds (pg_database is read
    // every queue.database_scan_interval) with a worker, which then stays
    // until queue.idle_exit or its turn ends: wait until that is over.
    let scan_s: f64 = monitor
        .query_one(
            "SELECT extract(epoch FROM current_setting('queue.database_scan_interval')::interval)::float8",
            &[],
        )
        .unwrap()
        .get(0);
    let quiet = Duration::from_secs_f64(scan_s + 2.0);
    let settled = wait_quiet(&mut monitor, quiet, s.settle);
    notes.push(format!(
        "set-up: {} databases created from {TEMPLATE} (`CREATE DATABASE ... TEMPLATE {TEMPLATE} STRATEGY {}`) in {:.1} s ({:.0} ms each); then {}",
        s.n,
        s.strategy,
        created.as_secs_f64(),
        created.as_secs_f64() * 1000.0 / s.n as f64,
        match settled {
            Some(d) => format!(
                "no worker ran from {:.0} s later on (for {:.0} s, more than queue.database_scan_interval: the launcher probes each new database with a worker)",
                d.as_secs_f64(),
                quiet.as_secs_f64()
            ),
            None => format!("**workers still ran {} s later** (the launcher probing the new databases); the phases ran anyway", s.settle.as_secs()),
        }
    ));
    progress!(
        "settled: {:?}; connecting to {} databases",
        settled.map(|d| d.as_secs()),
        s.n
    );
    let mut clients: Vec<Client> = (0..s.n).map(|i| s.connect(&s.tenant(i))).collect();
    let mut phases = Vec::new();

    progress!("baseline");
    phases.push(baseline(&s, &mut clients, &mut monitor, settled.is_some()));

    // as many fresh connections as cold workers, to databases that had
    // none of the baseline's workers
    let cold = phases[0].worker_cpu_ms.len().max(1);
    let others: Vec<String> = (0..s.n)
        .rev()
        .filter(|&i| phases[0].job_list.iter().all(|j| j.db != i))
        .take(cold)
        .map(|i| s.tenant(i))
        .collect();
    let bare = bare_start_cpu_ms(&s, &others);
    let bare_ms = percentile(&bare, 50.0);
    notes.push(first_round_note(&phases[0].worker_cpu_ms, &bare));

    progress!("burst");
    phases.push(burst(
        &s,
        "burst: one job per database, committed at once",
        &mut clients,
    ));

    progress!("steady");
    phases.push(steady(&s, &mut clients));

    progress!("waiting for every worker to exit idle");
    let gone = wait_no_workers(&mut monitor, s.idle_wait);
    progress!("after idle: {:?}", gone.map(|d| d.as_secs()));
    let mut after = burst(
        &s,
        "after idle: the burst once every worker exited",
        &mut clients,
    );
    after.notes.insert(
        0,
        match gone {
            Some(d) => format!("after idle: every worker had exited {:.0} s after the steady phase", d.as_secs_f64()),
            None => format!("after idle: **workers still ran {} s after the steady phase**; burst started anyway", s.idle_wait.as_secs()),
        },
    );
    phases.push(after);

    progress!("idle cost: waiting for every worker to exit");
    let gone = wait_no_workers(&mut monitor, s.idle_wait);
    notes.extend(phases.iter().flat_map(|p| p.notes.clone()));
    notes.push(idle_cost(&s, &mut monitor, gone));

    // every job of every phase, read back once more at the end (a job late
    // for its phase's deadline may have arrived since)
    let all_jobs: Vec<Job> = phases
        .iter()
        .flat_map(|p| p.job_list.iter().copied())
        .collect();
    notes.push(exactly_once(&s, &mut clients, &all_jobs));
    progress!("schedules");
    notes.push(schedules(&s, &mut clients, &mut monitor));
    progress!("done");

    println!(
        "#### {} tenant databases, {} worker slots\n",
        s.n,
        monitor
            .query_one("SELECT current_setting('queue.max_workers')", &[])
            .unwrap()
            .get::<_, String>(0)
    );
    print!("{}", table(&phases, bare_ms));
    println!();
    for note in notes {
        println!("- {note}");
    }
    println!();
}
