//! What the latency histograms (metrics) hold, for the view queue_latency
//! and queue-web's /metrics.

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::metrics::{buckets, memory, Kind};

type HistogramRow = (i32, String, Option<String>, Vec<f64>, Vec<i64>, f64, i64);

/// Every histogram of this database's queues that have had a job claimed or
/// an attempt end since the server started: bucket upper bounds in seconds
/// (the last +Inf), cumulative counts, the sum in seconds and the count.
/// Empty without the preload.
// The column names live in the signature, where pgrx reads them.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn queue_latency_histograms() -> TableIterator<
    'static,
    (
        name!(queue_id, i32),
        name!(kind, String),
        name!(outcome, Option<String>),
        name!(le, Vec<f64>),
        name!(counts, Vec<i64>),
        name!(sum_seconds, f64),
        name!(count, i64),
    ),
> {
    // SAFETY: MyDatabaseId is set when the backend connects and never
    // changes after.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let bounds = buckets::bounds_seconds();
    let rows: Vec<HistogramRow> = memory::read(database)
        .into_iter()
        .map(|h| {
            let (kind, outcome) = match Kind::of_index(h.kind) {
                Kind::Wait => ("wait", None),
                Kind::Run(outcome) => ("run", Some(outcome.word().to_string())),
            };
            let counts: Vec<i64> = h
                .buckets
                .iter()
                .scan(0u64, |total, n| {
                    *total += n;
                    Some(*total as i64)
                })
                .collect();
            let count = *counts.last().unwrap_or(&0);
            (
                h.queue,
                kind.to_string(),
                outcome,
                bounds.clone(),
                counts,
                h.sum_us as f64 / 1e6,
                count,
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// The histograms' table: its slots, those taken, and the observations of
/// queues that found none; the spans the workers sent to the collector,
/// and dropped (zeros without the preload).
#[pg_extern(volatile, parallel_safe)]
fn queue_metrics_status() -> TableIterator<
    'static,
    (
        name!(queue_slots, i32),
        name!(queue_slots_used, i32),
        name!(observations_dropped, i64),
        name!(spans_exported, i64),
        name!(spans_dropped, i64),
    ),
> {
    let status = memory::status();
    TableIterator::once((
        status.slots as i32,
        status.used as i32,
        status.dropped as i64,
        status.spans_exported as i64,
        status.spans_dropped as i64,
    ))
}
