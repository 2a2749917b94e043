//! The cluster page: what is stuck, every database with the extension and
//! its queues' counts, the cluster's charts, and the background workers.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use axum::Extension;
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::chart::{chart, level_per_minute, rate_per_minute, sum, Chart};
use crate::failure::Failure;
use crate::launcher;
use crate::pages::Note;
use crate::refresh;
use crate::render::{page, segment};
use crate::rights::Rights;
use crate::security::Session;
use crate::state::{self, App};
use crate::stats::{age, QueueRow};
use crate::stuck::{self, LateSchedule, Stuck, StuckHead, Unclaimed};
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
    heads: Vec<Head>,
    unclaimed: Vec<Unclaimed>,
    late: Vec<LateSchedule>,
    /// The database's refusal of what is stuck.
    stuck_error: Option<String>,
}

#[derive(Serialize)]
struct Queue {
    #[serde(flatten)]
    row: QueueRow,
    link: String,
    oldest_due: Option<String>,
}

/// A stuck group, with what the role may do about it.
#[derive(Serialize)]
struct Head {
    #[serde(flatten)]
    head: StuckHead,
    /// Jobs of the group behind its head.
    behind: i64,
    job_link: String,
    queue_link: String,
    run_now: bool,
    let_go: bool,
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

/// A database's queues and what is stuck there: the sampler's latest
/// reading (at most two sample intervals old), unless `fresh` or there is
/// none, then read now. Counting the unfinished jobs is queue_stats' cost,
/// which grows with the backlog, so the page does not pay it for every
/// database at every load.
async fn database(app: &App, name: String, fresh: bool) -> Database {
    let cached = if fresh {
        None
    } else {
        app.samples.latest(&name).zip(app.samples.stuck(&name))
    };
    let read_ago = cached.as_ref().map(|((age, _), _)| age_text(*age));
    let read = async {
        if let Some(((_, rows), found)) = cached {
            return Ok::<_, Failure>((rows, found));
        }
        let rows = state::read(app, &name).await?;
        let found = app.samples.stuck(&name).unwrap_or_default();
        Ok((rows, found))
    };
    let link = format!("/db/{}", segment(&name));
    let (rows, found) = match read.await {
        Ok(read) => read,
        Err(e) => {
            return Database {
                name,
                link,
                queues: Vec::new(),
                error: Some(e.summary()),
                read_ago: None,
                heads: Vec::new(),
                unclaimed: Vec::new(),
                late: Vec::new(),
                stuck_error: None,
            }
        }
    };
    let queue_link = |queue: &str| format!("{link}/queue/{}", segment(queue));
    let mut unclaimed = stuck::unclaimed(&rows, |queue| {
        app.samples
            .of(&name, queue)
            .iter()
            .map(|s| stuck::Reading {
                at: s.at,
                finished: s.succeeded + s.failed,
            })
            .collect()
    });
    // (a queue whose due jobs wait behind a stuck group's head has its
    // group's line, which says why)
    unclaimed.retain(|u| !found.heads.iter().any(|h| h.queue == u.queue));
    for u in &mut unclaimed {
        u.link = queue_link(&u.queue);
    }
    let heads = heads(app, &name, &link, found.heads).await;
    let queues = rows
        .into_iter()
        .map(|row| Queue {
            link: format!("{link}/queue/{}", segment(&row.queue)),
            oldest_due: row.oldest_due_secs.map(age),
            row,
        })
        .collect();
    let Stuck {
        mut late, error, ..
    } = found;
    for s in &mut late {
        s.link = queue_link(&s.queue);
    }
    Database {
        name,
        link,
        queues,
        error: None,
        read_ago,
        heads,
        unclaimed,
        late,
        stuck_error: error,
    }
}

/// The stuck groups of `database`, with the actions the role may take
/// (retry and cancel are for whom the database lets call them).
async fn heads(app: &App, database: &str, link: &str, found: Vec<StuckHead>) -> Vec<Head> {
    if found.is_empty() {
        return Vec::new();
    }
    let rights = match app.databases.client(database).await {
        Ok(client) => Rights::of_jobs(&client).await.unwrap_or_default(),
        Err(_) => Rights::default(),
    };
    let acts = !app.security.read_only;
    found
        .into_iter()
        .map(|head| Head {
            behind: if head.status == "pending" {
                head.pending - 1
            } else {
                head.pending
            },
            job_link: format!("{link}/job/{}", head.head_id),
            queue_link: format!("{link}/queue/{}", segment(&head.queue)),
            run_now: acts && head.status == "pending" && rights.retry && rights.cancel,
            let_go: acts && rights.cancel,
            head,
        })
        .collect()
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

/// The workers, and what else was seen of them: the launcher's state.
#[derive(Default)]
struct Workers {
    workers: Vec<Worker>,
    /// Why none runs, when none does.
    why_none: Option<String>,
    /// queue.enabled is off: no database is served, whatever queue_workers
    /// says of them.
    off: bool,
}

async fn workers(app: &App, database: &str) -> Result<Workers, Failure> {
    let client = app.databases.client(database).await?;
    let rows = client.query(WORKERS, &[]).await?;
    let workers: Vec<Worker> = rows
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
        .collect();
    let seen = launcher::seen(&client).await?;
    // (none running: say why, from what can be seen)
    let why_none = (!workers.iter().any(|w| w.pid.is_some())).then_some(seen.no_worker);
    Ok(Workers {
        workers,
        why_none,
        off: seen.off,
    })
}

/// The cluster's jobs per minute and backlog: every queue's samples added.
fn cluster_charts(app: &App) -> Vec<Chart> {
    let all = app.samples.all();
    let rates = |counter: fn(&crate::samples::Sample) -> i64| {
        sum(all.iter().map(|samples| rate_per_minute(samples, counter)))
    };
    vec![
        chart(
            "Jobs per minute, every queue",
            "jobs per minute",
            vec![
                ("enqueued", "#2563eb", rates(|s| s.enqueued)),
                ("succeeded", "#16a34a", rates(|s| s.succeeded)),
                ("failed", "#dc2626", rates(|s| s.failed)),
            ],
        ),
        chart(
            "Backlog, every queue (pending and scheduled)",
            "jobs",
            vec![(
                "backlog",
                "#9333ea",
                sum(all
                    .iter()
                    .map(|samples| level_per_minute(samples, |s| s.backlog))),
            )],
        ),
    ]
}

pub async fn show(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Query(fresh): Query<Fresh>,
    Query(note): Query<Note>,
    Query(reload): Query<refresh::Choice>,
) -> Result<Response, Failure> {
    let fresh = fresh.fresh.is_some();
    let names = app.databases.served().await?;
    // every database at once, each on a connection of its own pool
    let reads = names.iter().map(|name| database(&app, name.clone(), fresh));
    let databases = futures_util::future::join_all(reads).await;
    // (queue_workers reads shared memory: any database shows them all)
    let (
        Workers {
            workers,
            why_none,
            off,
        },
        workers_error,
    ) = match names.first() {
        Some(first) => match workers(&app, first).await {
            Ok(workers) => (workers, None),
            Err(e) => (Workers::default(), Some(e.summary())),
        },
        None => (Workers::default(), None),
    };
    // (the databases of this page that wait for a slot; with the workers
    // off, none is waiting for a slot: one line says they are off)
    let waiting: Vec<&str> = workers
        .iter()
        .filter(|w| w.pid.is_none() && !off)
        .filter_map(|w| w.database.as_deref())
        .filter(|db| names.iter().any(|name| name == db))
        .collect();
    let stuck_count = waiting.len()
        + usize::from(off)
        + databases
            .iter()
            .map(|db| db.heads.len() + db.unclaimed.len() + db.late.len())
            .sum::<usize>();
    let failed: i64 = databases
        .iter()
        .flat_map(|db| db.queues.iter())
        .map(|q| q.row.failed)
        .sum();
    Ok(page(
        "cluster.html",
        context! {
            title => "Cluster",
            charts => cluster_charts(&app),
            waiting,
            workers_off => off,
            stuck_count,
            databases,
            workers,
            why_none,
            workers_error,
            failed,
            fresh,
            sample_secs => app.samples.interval.as_secs(),
            note => note.text(),
            refresh => refresh::every_sample(&app, "/", &reload),
            csrf => app.security.csrf_token(&session),
            shown_url => app.shown_url,
            read_only => app.security.read_only,
        },
    ))
}
