//! `queue-bench-webhooks DIR PORT`: on the cluster whose socket is in DIR
//! (the extension preloaded, a database `bench` with the extension), starts
//! a local receiver (hyper) that answers 200 at once and measures, in rounds:
//! - the receiver's ceiling: the same POSTs from a plain load generator
//!   (reqwest, as many requests open as the webhook queue's max_in_flight);
//! - the drain of a backlog by a webhook queue, and by a no-op SQL sender;
//! - the drain of the same backlog by a hand-written dispatcher, as users
//!   write one today: the least work a durable delivery can do;
//! - the latency from a committed enqueue to the request's arrival, idle.
//!
//! Prints a markdown table of medians and ratios.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

/// The receiver: answers every POST with 200 at once; counts them, and
/// notes when a request whose body carries "lat":<n> arrived. hyper's
/// HTTP/1 server on a runtime of two threads of its own.
struct Receiver {
    port: u16,
    count: Arc<AtomicU64>,
    arrivals: Arc<Mutex<Vec<(u64, Instant)>>>,
}

fn receiver() -> Receiver {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicU64::new(0));
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let (served, noted) = (count.clone(), arrivals.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (served, noted) = (served.clone(), noted.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (served, noted) = (served.clone(), noted.clone());
                        async move { answer(request, &served, &noted).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    Receiver {
        port,
        count,
        arrivals,
    }
}

/// One request: read whole, noted, answered 200 with no body.
async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    served: &AtomicU64,
    noted: &Mutex<Vec<(u64, Instant)>>,
) -> Result<hyper::Response<http_body_util::Empty<bytes::Bytes>>, hyper::Error> {
    use http_body_util::BodyExt;
    let at = Instant::now();
    let body = request.into_body().collect().await?.to_bytes();
    let body = String::from_utf8_lossy(&body);
    if let Some(i) = body.find("\"lat\":") {
        let n: String = body[i + 6..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if let Ok(n) = n.parse() {
            noted.lock().unwrap().push((n, at));
        }
    }
    served.fetch_add(1, Ordering::Relaxed);
    Ok(hyper::Response::new(http_body_util::Empty::new()))
}

/// Requests per second from `open` concurrent POST loops for `secs`.
fn ceiling(url: &str, open: usize, secs: u64) -> f64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let body = r#"{"id": 1, "queue": "hooks", "payload": {}, "headers": null, "attempt": 1, "max_attempts": 5, "enqueued_at": "2026-12-01T00:00:00+00:00"}"#;
        let until = Instant::now() + Duration::from_secs(secs);
        let done = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..open)
            .map(|_| {
                let (client, done, url) = (client.clone(), done.clone(), url.to_string());
                tokio::spawn(async move {
                    while Instant::now() < until {
                        let r = client
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(body)
                            .send()
                            .await;
                        if r.is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
        done.load(Ordering::Relaxed) as f64 / secs as f64
    })
}

fn drained(client: &mut Client, queue: &str, jobs: u64) -> f64 {
    client.execute("SELECT queue_pause($1)", &[&queue]).unwrap();
    let mut left = jobs as i64;
    while left > 0 {
        let n = left.min(10_000) as i32;
        client
            .execute(
                "SELECT queue_enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[$2::int]))",
                &[&queue, &n],
            )
            .unwrap();
        left -= n as i64;
    }
    let started = Instant::now();
    client
        .execute("SELECT queue_resume($1)", &[&queue])
        .unwrap();
    loop {
        let open: i64 = client
            .query_one(
                "SELECT pending + processing FROM queue_stats WHERE queue = $1",
                &[&queue],
            )
            .unwrap()
            .get(0);
        if open == 0 {
            break;
        }
        // (queue_stats counts the backlog: looked at less often while it is
        // large, so that the looking takes little from the drain)
        std::thread::sleep(Duration::from_millis(if open > 1000 { 250 } else { 10 }));
    }
    jobs as f64 / started.elapsed().as_secs_f64()
}

/// A hand-written dispatcher draining `jobs` rows of a plain table, as users
/// write one today: `loops` threads, each with its own connection, claim
/// `batch` rows with FOR UPDATE SKIP LOCKED and commit (a crash then retries
/// them, as a lease does), POST them at once, and DELETE them in one commit.
/// No retries, signatures, history or counters: the least a durable
/// delivery can do, on the same receiver.
fn hand_written(
    connect: &dyn Fn() -> Client,
    url: &str,
    jobs: u64,
    loops: usize,
    batch: i64,
) -> f64 {
    let mut setup = connect();
    setup
        .batch_execute(&format!(
            "TRUNCATE dispatch_jobs;
             INSERT INTO dispatch_jobs (payload) SELECT '{{}}' FROM generate_series(1, {jobs});"
        ))
        .unwrap();
    setup.batch_execute("VACUUM ANALYZE dispatch_jobs").unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let clients: Vec<Client> = (0..loops).map(|_| connect()).collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for mut db in clients {
            let (client, runtime) = (client.clone(), &runtime);
            scope.spawn(move || loop {
                let rows = db
                    .query(
                        "UPDATE dispatch_jobs SET lease = gen_random_uuid(),
                                lease_expires_at = now() + interval '30 seconds'
                          WHERE id = ANY (ARRAY(
                                SELECT id FROM dispatch_jobs WHERE lease IS NULL
                                 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
                         RETURNING id, jsonb_build_object('id', id, 'payload', payload)::text",
                        &[&batch],
                    )
                    .unwrap();
                if rows.is_empty() {
                    break;
                }
                let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                let sent = runtime.block_on(async {
                    let requests: Vec<_> = rows
                        .iter()
                        .map(|r| {
                            let request = client
                                .post(url)
                                .header("content-type", "application/json")
                                .body(r.get::<_, String>(1));
                            runtime.spawn(async move { request.send().await })
                        })
                        .collect();
                    let mut sent = Vec::new();
                    for (id, request) in ids.iter().zip(requests) {
                        if matches!(request.await, Ok(Ok(r)) if r.status().is_success()) {
                            sent.push(*id);
                        }
                    }
                    sent
                });
                db.execute("DELETE FROM dispatch_jobs WHERE id = ANY ($1)", &[&sent])
                    .unwrap();
            });
        }
    });
    let rate = jobs as f64 / started.elapsed().as_secs_f64();
    let left: i64 = setup
        .query_one("SELECT count(*) FROM dispatch_jobs", &[])
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the hand-written dispatcher left jobs undelivered");
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, port) = (&args[1], &args[2]);
    let rounds = env("BENCH_ROUNDS", 5);
    let jobs = env("BENCH_WEBHOOK_JOBS", 20_000);
    let secs = env("BENCH_SECS", 5);
    let open = env("BENCH_IN_FLIGHT", 64);
    // a second webhook queue with four times the requests open: how far
    // max_in_flight takes one worker
    let wide = env("BENCH_WIDE_IN_FLIGHT", 256);
    let connect = |db: &str| {
        Client::connect(
            &format!("host={dir} port={port} user=postgres dbname={db}"),
            NoTls,
        )
        .unwrap()
    };
    let receiver = receiver();
    let base = format!("http://127.0.0.1:{}", receiver.port);
    let mut admin = connect("postgres");
    admin
        .batch_execute(&format!("ALTER SYSTEM SET queue.webhook_allow = '{base}'"))
        .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    let mut client = connect("bench");
    client
        .batch_execute(&format!(
            "SET queue.webhook_allow = '{base}';
             SELECT queue_create('hooks');
             SELECT queue_register_webhook('hooks', '{base}/hooks', max_in_flight => {open});
             SELECT queue_create('hooks_wide');
             SELECT queue_register_webhook('hooks_wide', '{base}/hooks', max_in_flight => {wide});
             CREATE FUNCTION nothing(job jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
             SELECT queue_create('hooks_none', retention => '0');
             SELECT queue_register_webhook('hooks_none', '{base}/hooks', max_in_flight => {open});
             CREATE TABLE dispatch_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
                                         lease uuid, lease_expires_at timestamptz);
             SELECT queue_create('sql');
             SELECT queue_register_sender('sql', 'nothing(jsonb)', batch_size => 100);"
        ))
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));

    // the hand-written dispatcher, from 4 connections: as many requests
    // open at most as each webhook queue
    let loops = env("BENCH_DISPATCH_LOOPS", 4) as usize;
    let (batch, wide_batch) = (
        (open as usize / loops).max(1),
        (wide as usize / loops).max(1),
    );
    let mut rates: [Vec<f64>; 7] = Default::default();
    let [ceilings, hooks, wides, nones, hands, wide_hands, sql] = &mut rates;
    for round in 1..=rounds {
        ceilings.push(ceiling(&format!("{base}/ceiling"), open as usize, secs));
        hooks.push(drained(&mut client, "hooks", jobs));
        wides.push(drained(&mut client, "hooks_wide", jobs));
        nones.push(drained(&mut client, "hooks_none", jobs));
        let url = format!("{base}/hand");
        hands.push(hand_written(
            &|| connect("bench"),
            &url,
            jobs,
            loops,
            batch as i64,
        ));
        wide_hands.push(hand_written(
            &|| connect("bench"),
            &url,
            jobs,
            loops,
            wide_batch as i64,
        ));
        sql.push(drained(&mut client, "sql", jobs));
        eprintln!(
            "round {round}: ceiling {:.0}/s, webhooks {:.0}/s, at {wide} open {:.0}/s, nothing kept {:.0}/s, hand-written {:.0}/s, at {wide} open {:.0}/s, SQL sender {:.0}/s",
            ceilings[round as usize - 1],
            hooks[round as usize - 1],
            wides[round as usize - 1],
            nones[round as usize - 1],
            hands[round as usize - 1],
            wide_hands[round as usize - 1],
            sql[round as usize - 1],
        );
    }

    // idle latency: one job at a time, the worker woken by each commit
    let mut latencies = Vec::new();
    for n in 0..env("BENCH_LATENCY_JOBS", 50) {
        let payload = format!("{{\"lat\":{n}}}");
        client
            .execute(
                "SELECT queue_enqueue('hooks', $1::text::jsonb)",
                &[&payload],
            )
            .unwrap();
        let committed = Instant::now();
        let deadline = committed + Duration::from_secs(10);
        loop {
            let found = receiver
                .arrivals
                .lock()
                .unwrap()
                .iter()
                .find(|(i, _)| *i == n)
                .map(|(_, at)| *at);
            if let Some(at) = found {
                latencies.push(at.saturating_duration_since(committed).as_secs_f64() * 1000.0);
                break;
            }
            assert!(Instant::now() < deadline, "job {n} never arrived");
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let [ceiling, hooks, wides, nones, hand, wide_hand, sql] = rates.map(median);
    println!("| line | per second | / receiver ceiling | / SQL-sender drain | / hand-written dispatcher, as many requests open |");
    println!("|---|---|---|---|---|");
    let line = |what: String, rate: f64, peer: Option<f64>| {
        let peer = peer.map_or("–".to_string(), |p| format!("{:.2}", rate / p));
        println!(
            "| {what} | {rate:.0} | {:.2} | {:.2} | {peer} |",
            rate / ceiling,
            rate / sql
        )
    };
    line(
        format!("receiver ceiling: {open} POST loops, no database"),
        ceiling,
        None,
    );
    line(
        format!("webhook queue drains {jobs} jobs (max_in_flight {open})"),
        hooks,
        Some(hand),
    );
    line(
        format!("the same, max_in_flight {wide}"),
        wides,
        Some(wide_hand),
    );
    line(
        format!("the same, max_in_flight {open}, retention 0 (nothing kept)"),
        nones,
        Some(hand),
    );
    line(
        format!("hand-written dispatcher, plain table, nothing kept: {loops} connections, {batch} jobs each at a time"),
        hand,
        Some(hand),
    );
    line(
        format!("the same, {wide_batch} jobs each at a time"),
        wide_hand,
        Some(wide_hand),
    );
    line(
        format!("SQL sender (no-op) drains {jobs} jobs (batch_size 100)"),
        sql,
        None,
    );
    println!();
    println!(
        "- idle latency, committed enqueue to the request's arrival ({} jobs, one at a time): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    println!(
        "- {rounds} rounds, medians; ceiling rounds of {secs} s; receiver requests in all: {}",
        receiver.count.load(Ordering::Relaxed)
    );
}
