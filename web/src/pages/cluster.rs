//! The cluster page: every database with the extension, its queues' counts,
//! and the background workers.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::failure::Failure;
use crate::render::{page, segment};
use crate::state::App;
use crate::stats::{self, age, QueueRow};
use crate::urls::shown_in;

const WORKERS: &str = include_str!("../../queries/workers.sql");

#[derive(Serialize)]
struct Database {
    name: String,
    link: String,
    queues: Vec<Queue>,
    /// The database's refusal, when it would not show its queues.
    error: Option<String>,
    /// How old the counts are, when they are the sampler's reading.
    read_ago: Option<String>,
}

#[derive(Serialize)]
struct Queue {
    #[serde(flatten)]
    row: QueueRow,
    link: String,
    oldest_due: Option<String>,
}

#[derive(Serialize)]
struct Worker {
    pid: Option<i32>,
    database: Option<String>,
    state: Option<String>,
    started_at: Option<String>,
    last_active_at: Option<String>,
    jobs_delivered: Option<i64>,
    jobs_failed: Option<i64>,
    last_error: Option<String>,
}

/// A database's queues: the sampler's latest reading (at most two sample
/// intervals old), unless `fresh` or there is none, then read now. Counting
/// the unfinished jobs is queue_stats' cost, which grows with the backlog,
/// so the page does not pay it for every database at every load.
async fn database(app: &App, name: String, fresh: bool) -> Database {
    let cached = if fresh {
        None
    } else {
        app.samples.latest(&name)
    };
    let read_ago = cached.as_ref().map(|(age, _)| age_text(*age));
    let read = async {
        if let Some((_, rows)) = cached {
            return Ok::<_, Failure>(rows);
        }
        let client = app.databases.client(&name).await?;
        let rows = stats::fetch(&client).await?;
        app.samples.record(&name, &rows);
        Ok(rows)
    };
    let link = format!("/db/{}", segment(&name));
    match read.await {
        Ok(rows) => {
            let queues = rows
                .into_iter()
                .map(|row| Queue {
                    link: format!("{link}/queue/{}", segment(&row.queue)),
                    oldest_due: row.oldest_due_secs.map(age),
                    row,
                })
                .collect();
            Database {
                name,
                link,
                queues,
                error: None,
                read_ago,
            }
        }
        Err(e) => Database {
            name,
            link,
            queues: Vec::new(),
            error: Some(e.summary()),
            read_ago: None,
        },
    }
}

fn age_text(secs: f64) -> String {
    if secs < 1.0 {
        "just now".into()
    } else {
        format!("{} ago", age(secs))
    }
}

#[derive(Deserialize)]
pub struct Fresh {
    fresh: Option<String>,
}

async fn workers(app: &App, database: &str) -> Result<Vec<Worker>, Failure> {
    let client = app.databases.client(database).await?;
    let rows = client.query(WORKERS, &[]).await?;
    Ok(rows
        .iter()
        .map(|row| Worker {
            pid: row.get("pid"),
            database: row.get("database"),
            state: row.get("state"),
            started_at: row.get("started_at"),
            last_active_at: row.get("last_active_at"),
            jobs_delivered: row.get("jobs_delivered"),
            jobs_failed: row.get("jobs_failed"),
            last_error: row
                .get::<_, Option<String>>("last_error")
                .map(|e| shown_in(&e)),
        })
        .collect())
}

pub async fn show(
    State(app): State<Arc<App>>,
    Query(fresh): Query<Fresh>,
) -> Result<Response, Failure> {
    let fresh = fresh.fresh.is_some();
    let names = app.databases.served().await?;
    // every database at once, each on a connection of its own pool
    let reads = names.iter().map(|name| database(&app, name.clone(), fresh));
    let databases = futures_util::future::join_all(reads).await;
    // (queue_workers reads shared memory: any database shows them all)
    let (workers, workers_error) = match names.first() {
        Some(first) => match workers(&app, first).await {
            Ok(workers) => (workers, None),
            Err(e) => (Vec::new(), Some(e.summary())),
        },
        None => (Vec::new(), None),
    };
    let waiting = workers.iter().filter(|w| w.pid.is_none()).count();
    Ok(page(
        "cluster.html",
        context! {
            title => "Cluster",
            databases,
            workers,
            workers_error,
            waiting,
            fresh,
            sample_secs => app.samples.interval.as_secs(),
            shown_url => app.shown_url,
            read_only => app.security.read_only,
        },
    ))
}
