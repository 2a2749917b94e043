//! GET /metrics: every served database's queues in the Prometheus text
//! format (version 0.0.4, written by prometheus-client): jobs by status,
//! the oldest due age, the enqueued and ended counters, the wait and run
//! histograms (queue_latency), and the cluster's workers, the databases
//! waiting for a slot and the span counters (docs/operations.md, "Metrics
//! and traces"). Read afresh at each scrape from every database at once (at
//! most CONCURRENT at a time), each on a connection of its own pool; a
//! database that does not answer shows `queue_database_up 0`.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use tokio_postgres::error::SqlState;

use crate::databases::Client;
use crate::failure::Failure;
use crate::state::App;
use crate::stats::{self, QueueRow};

const LATENCY: &str = include_str!("../queries/latency.sql");
const WORKER_STATES: &str = include_str!("../queries/worker_states.sql");
const METRICS_STATUS: &str = include_str!("../queries/metrics_status.sql");

/// Databases read at once: enough to overlap their round trips, few enough
/// that a scrape of hundreds of databases does not ask for a connection to
/// each of them at the same moment.
const CONCURRENT: usize = 16;

type Written = Result<(), fmt::Error>;

/// One histogram of queue_latency.
#[derive(Debug)]
struct Histogram {
    queue: String,
    kind: String,
    outcome: Option<String>,
    le: Vec<f64>,
    /// Cumulative, as the view gives them.
    counts: Vec<i64>,
    sum: f64,
    count: i64,
}

impl Histogram {
    fn of(row: &tokio_postgres::Row) -> Histogram {
        Histogram {
            queue: row.get("queue"),
            kind: row.get("kind"),
            outcome: row.get("outcome"),
            le: row.get("le"),
            counts: row.get("counts"),
            sum: row.get("sum_seconds"),
            count: row.get("count"),
        }
    }

    /// (upper bound, observations within it and above the bound before),
    /// as prometheus-client takes them (it writes them cumulative again).
    fn buckets(&self) -> Vec<(f64, u64)> {
        let mut below = 0;
        self.le
            .iter()
            .zip(&self.counts)
            .map(|(&bound, &cumulative)| {
                let within = cumulative.saturating_sub(below).max(0) as u64;
                below = below.max(cumulative);
                (bound, within)
            })
            .collect()
    }
}

/// What one database showed.
#[derive(Debug)]
struct DatabaseReading {
    name: String,
    queues: Vec<QueueRow>,
    histograms: Vec<Histogram>,
    up: bool,
    seconds: f64,
}

/// queue_metrics_status(): the histograms' slots, and what was dropped.
#[derive(Debug)]
struct MetricsStatus {
    queue_slots: i32,
    queue_slots_used: i32,
    observations_dropped: i64,
    spans_exported: i64,
    spans_dropped: i64,
}

/// What any database shows of the cluster (shared memory).
#[derive(Debug, Default)]
struct ClusterReading {
    /// (database, state, how many) of the running workers.
    workers: Vec<(String, String, i64)>,
    /// The databases waiting for a worker slot.
    waiting: Vec<String>,
    status: Option<MetricsStatus>,
}

#[derive(Debug)]
struct Scrape {
    databases: Vec<DatabaseReading>,
    cluster: ClusterReading,
}

/// GET /metrics: every served database read now, and the cluster's figures
/// from the first; the text in the format's own content type.
pub async fn serve(State(app): State<Arc<App>>) -> Result<Response, Failure> {
    let names = app.databases.served().await?;
    let databases = futures_util::stream::iter(names.iter().cloned())
        .map(|name| read_database(&app, name))
        .buffered(CONCURRENT)
        .collect::<Vec<_>>();
    let (databases, cluster) = tokio::join!(databases, read_cluster(&app, names.first()));
    let text = Scrape { databases, cluster }.text();
    Ok((
        [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
        text,
    )
        .into_response())
}

/// queue_stats and queue_latency of `name`, one pipelined after the other
/// on one connection.
async fn read_database(app: &App, name: String) -> DatabaseReading {
    let started = Instant::now();
    let read = async {
        let client = app.databases.client(&name).await?;
        let (queues, histograms) = tokio::join!(stats::fetch(&client), read_histograms(&client));
        Ok::<_, Failure>((queues?, histograms?))
    };
    let (queues, histograms, up) = match read.await {
        Ok((queues, histograms)) => (queues, histograms, true),
        Err(_) => (Vec::new(), Vec::new(), false),
    };
    DatabaseReading {
        name,
        queues,
        histograms,
        up,
        seconds: started.elapsed().as_secs_f64(),
    }
}

async fn read_histograms(client: &Client) -> Result<Vec<Histogram>, Failure> {
    match client.query(LATENCY, &[]).await {
        Ok(rows) => Ok(rows.iter().map(Histogram::of).collect()),
        // (an extension older than 0.4 keeps no histograms)
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// The workers and the metrics' status, from `database` (the first
/// served); what it refuses is left out.
async fn read_cluster(app: &App, database: Option<&String>) -> ClusterReading {
    let Some(database) = database else {
        return ClusterReading::default();
    };
    let Ok(client) = app.databases.client(database).await else {
        return ClusterReading::default();
    };
    let (workers, status) = tokio::join!(
        client.query(WORKER_STATES, &[]),
        client.query_opt(METRICS_STATUS, &[])
    );
    let mut cluster = ClusterReading::default();
    for row in workers.unwrap_or_default() {
        let database: String = row.get("database");
        if row.get("waiting") {
            cluster.waiting.push(database);
        } else {
            cluster
                .workers
                .push((database, row.get("state"), row.get("workers")));
        }
    }
    cluster.status = status.ok().flatten().map(|row| MetricsStatus {
        queue_slots: row.get("queue_slots"),
        queue_slots_used: row.get("queue_slots_used"),
        observations_dropped: row.get("observations_dropped"),
        spans_exported: row.get("spans_exported"),
        spans_dropped: row.get("spans_dropped"),
    });
    cluster
}

impl Scrape {
    fn text(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut text = String::new();
        prometheus_text::encode(&mut text, &registry).expect("a String takes any text");
        text
    }

    /// (database, queue row) of every queue read.
    fn queues(&self) -> impl Iterator<Item = (&str, &QueueRow)> {
        self.databases
            .iter()
            .flat_map(|db| db.queues.iter().map(move |q| (db.name.as_str(), q)))
    }

    fn histograms(&self, kind: &'static str) -> impl Iterator<Item = (&str, &Histogram)> {
        self.databases.iter().flat_map(move |db| {
            db.histograms
                .iter()
                .filter(move |h| h.kind == kind)
                .map(move |h| (db.name.as_str(), h))
        })
    }

    fn encode_queues(&self, encoder: &mut DescriptorEncoder) -> Written {
        gauges(
            encoder,
            "queue_jobs",
            "Jobs of the queue by status now (queue_stats): pending (due), scheduled \
             (for later), processing, blocked (waiting for parents), and the finished jobs \
             retained: succeeded, failed (dead letters), cancelled.",
            None,
            self.queues().flat_map(|(db, q)| {
                [
                    ("pending", q.pending),
                    ("scheduled", q.scheduled),
                    ("processing", q.processing),
                    ("blocked", q.blocked),
                    ("succeeded", q.succeeded),
                    ("failed", q.failed),
                    ("cancelled", q.cancelled),
                ]
                .map(|(status, n)| {
                    (
                        [("database", db), ("queue", &q.queue), ("status", status)],
                        n,
                    )
                })
            }),
        )?;
        gauges(
            encoder,
            "queue_oldest_due_age",
            "How long the queue's oldest due job has waited to be claimed; 0 when none is due.",
            Some(&Unit::Seconds),
            self.queues().map(|(db, q)| {
                (
                    [("database", db), ("queue", &q.queue)],
                    q.oldest_due_secs.unwrap_or(0.0).max(0.0),
                )
            }),
        )?;
        gauges(
            encoder,
            "queue_paused",
            "1 when the queue is paused (nothing is claimed from it), else 0.",
            None,
            self.queues()
                .map(|(db, q)| ([("database", db), ("queue", &q.queue)], i64::from(q.paused))),
        )?;
        counters(
            encoder,
            "queue_jobs_enqueued",
            "Jobs ever enqueued into the queue (a retry is not an enqueue).",
            self.queues()
                .map(|(db, q)| ([("database", db), ("queue", &q.queue)], q.enqueued_total)),
        )?;
        counters(
            encoder,
            "queue_jobs_ended",
            "Jobs that ended, by outcome: succeeded, or failed for good (became a dead \
             letter); a dead letter retried and then completed counts in both.",
            self.queues().flat_map(|(db, q)| {
                [("succeeded", q.succeeded_total), ("failed", q.failed_total)].map(
                    |(outcome, n)| {
                        (
                            [("database", db), ("queue", &q.queue), ("outcome", outcome)],
                            n,
                        )
                    },
                )
            }),
        )
    }

    fn encode_latency(&self, encoder: &mut DescriptorEncoder) -> Written {
        histograms(
            encoder,
            "queue_job_wait",
            "How long jobs waited from due to claimed (queue_latency), since the server started.",
            self.histograms("wait")
                .map(|(db, h)| ([("database", db), ("queue", h.queue.as_str())], h)),
        )?;
        histograms(
            encoder,
            "queue_job_run",
            "How long attempts ran from claim to end, by outcome (succeeded, failed: \
             retried or not, cancelled while in flight), since the server started.",
            self.histograms("run").map(|(db, h)| {
                let outcome = h.outcome.as_deref().unwrap_or("");
                (
                    [
                        ("database", db),
                        ("queue", h.queue.as_str()),
                        ("outcome", outcome),
                    ],
                    h,
                )
            }),
        )
    }

    fn encode_cluster(&self, encoder: &mut DescriptorEncoder) -> Written {
        let cluster = &self.cluster;
        gauges(
            encoder,
            "queue_workers",
            "Background workers running, by the database they serve and their state \
             (starting, idle, delivering, stopping).",
            None,
            cluster
                .workers
                .iter()
                .map(|(db, state, n)| ([("database", db.as_str()), ("state", state.as_str())], *n)),
        )?;
        // every database read, and any other the launcher holds waiting
        let mut waiting: Vec<(&str, i64)> = self
            .databases
            .iter()
            .map(|db| {
                (
                    db.name.as_str(),
                    i64::from(cluster.waiting.contains(&db.name)),
                )
            })
            .collect();
        waiting.extend(
            cluster
                .waiting
                .iter()
                .filter(|w| !self.databases.iter().any(|db| &db.name == *w))
                .map(|w| (w.as_str(), 1)),
        );
        gauges(
            encoder,
            "queue_database_waiting_for_worker",
            "1 when the database wants a worker and every slot (queue.max_workers) is taken.",
            None,
            waiting.into_iter().map(|(db, n)| ([("database", db)], n)),
        )?;
        let Some(status) = &cluster.status else {
            return Ok(());
        };
        gauges(
            encoder,
            "queue_metrics_queue_slots",
            "Queues the latency histograms have room for (queue.metrics_queues).",
            None,
            [(NoLabels, i64::from(status.queue_slots))],
        )?;
        gauges(
            encoder,
            "queue_metrics_queue_slots_used",
            "Queues that have taken a histogram slot since the server started.",
            None,
            [(NoLabels, i64::from(status.queue_slots_used))],
        )?;
        counters(
            encoder,
            "queue_metrics_observations_dropped",
            "Waits and runs not kept: their queue found no free histogram slot.",
            [(NoLabels, status.observations_dropped)],
        )?;
        counters(
            encoder,
            "queue_spans_exported",
            "Delivery spans the workers sent to queue.otlp_endpoint.",
            [(NoLabels, status.spans_exported)],
        )?;
        counters(
            encoder,
            "queue_spans_dropped",
            "Delivery spans dropped: the collector was slow, down or refused them.",
            [(NoLabels, status.spans_dropped)],
        )
    }

    fn encode_databases(&self, encoder: &mut DescriptorEncoder) -> Written {
        gauges(
            encoder,
            "queue_database_up",
            "1 when the database's queue_stats and queue_latency were read in this scrape, \
             0 when it refused or did not answer (its other series are missing then).",
            None,
            self.databases
                .iter()
                .map(|db| ([("database", db.name.as_str())], i64::from(db.up))),
        )?;
        gauges(
            encoder,
            "queue_database_scrape_duration",
            "How long reading the database took in this scrape.",
            Some(&Unit::Seconds),
            self.databases
                .iter()
                .map(|db| ([("database", db.name.as_str())], db.seconds)),
        )
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Written {
        self.encode_queues(&mut encoder)?;
        self.encode_latency(&mut encoder)?;
        self.encode_cluster(&mut encoder)?;
        self.encode_databases(&mut encoder)
    }
}

/// No labels, for the cluster's own figures.
struct NoLabels;

impl EncodeLabelSet for NoLabels {
    fn encode(&self, _: &mut prometheus_client::encoding::LabelSetEncoder) -> Written {
        Ok(())
    }
}

/// A gauge family: its HELP and TYPE, then a sample for each row (nothing
/// at all without rows).
fn gauges<S: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: impl IntoIterator<Item = (S, V)>,
) -> Written {
    let rows: Vec<(S, V)> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in &rows {
        family.encode_family(labels)?.encode_gauge(value)?;
    }
    Ok(())
}

/// A counter family (`_total` is added to `name`); a negative value, which
/// no counter of the extension has, is written as 0.
fn counters<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (S, i64)>,
) -> Written {
    let rows: Vec<(S, i64)> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in &rows {
        let value = (*value).max(0) as u64;
        family
            .encode_family(labels)?
            .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
    }
    Ok(())
}

/// A histogram family in seconds (`_seconds` is added to `name`).
fn histograms<'h, S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (S, &'h Histogram)>,
) -> Written {
    let rows: Vec<(S, &Histogram)> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut family =
        encoder.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    for (labels, h) in &rows {
        family
            .encode_family(labels)?
            .encode_histogram::<NoLabelSet>(h.sum, h.count.max(0) as u64, &h.buckets(), None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(le: Vec<f64>, counts: Vec<i64>) -> Histogram {
        let count = *counts.last().unwrap();
        Histogram {
            queue: "q".into(),
            kind: "wait".into(),
            outcome: None,
            le,
            counts,
            sum: 1.5,
            count,
        }
    }

    #[test]
    fn cumulative_counts_become_the_buckets_own() {
        let h = histogram(vec![0.1, 1.0, f64::INFINITY], vec![2, 5, 6]);
        assert_eq!(h.buckets(), [(0.1, 2), (1.0, 3), (f64::INFINITY, 1)]);
        // (read from atomics without a lock: a count behind the one below
        // it is not a negative bucket)
        let h = histogram(vec![0.1, 1.0, f64::INFINITY], vec![2, 1, 3]);
        assert_eq!(h.buckets(), [(0.1, 2), (1.0, 0), (f64::INFINITY, 1)]);
    }

    #[test]
    fn a_scrape_is_written_in_the_text_format() {
        let scrape = Scrape {
            databases: vec![DatabaseReading {
                name: "app\"1".into(),
                queues: Vec::new(),
                histograms: vec![histogram(vec![0.5, f64::INFINITY], vec![1, 3])],
                up: true,
                seconds: 0.25,
            }],
            cluster: ClusterReading::default(),
        };
        let text = scrape.text();
        assert!(
            text.contains("# TYPE queue_job_wait_seconds histogram\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "queue_job_wait_seconds_bucket{database=\"app\\\"1\",queue=\"q\",le=\"+Inf\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("queue_job_wait_seconds_count{database=\"app\\\"1\",queue=\"q\"} 3\n")
        );
        assert!(text.contains("queue_database_up{database=\"app\\\"1\"} 1\n"));
        assert!(
            !text.contains("queue_jobs"),
            "no family without samples: {text}"
        );
    }
}
