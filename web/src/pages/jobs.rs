//! A queue's jobs, a page at a time (keyset on id, bounded), filtered.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::databases::Client;
use crate::failure::Failure;
use crate::filters::Filter;
use crate::pages::STATUSES;
use crate::render::{page, segment};
use crate::state::App;
use crate::urls::shown_in;

const JOBS: &str = include_str!("../../queries/jobs.sql");
const FAILED_JOBS: &str = include_str!("../../queries/failed_jobs.sql");
const JOB_ID_BOUND: &str = include_str!("../../queries/job_id_bound.sql");
const JOB_ID_ABOVE: &str = include_str!("../../queries/job_id_above.sql");

/// Jobs per page.
const PAGE: i64 = 50;
/// Ids each statement of a page looks at: a range of the view's id indexes
/// (ORDER BY id with a LIMIT alone sorts every job the view holds).
const WINDOW: i64 = 5_000;
/// Statements a page makes at most; a page of a queue whose jobs are few
/// among many others' may end before it is full, and its "older" link goes
/// on from where it stopped.
const WINDOWS: usize = 40;

#[derive(Deserialize)]
pub struct Page {
    before: Option<i64>,
}

#[derive(Serialize)]
struct Row {
    id: i64,
    status: String,
    priority: Option<i32>,
    attempts: i32,
    max_attempts: Option<i32>,
    run_at: Option<String>,
    enqueued_at: Option<String>,
    finished_at: Option<String>,
    payload: Option<String>,
    last_error: Option<String>,
    group_key: Option<String>,
    worker: Option<String>,
}

impl From<&tokio_postgres::Row> for Row {
    fn from(row: &tokio_postgres::Row) -> Row {
        Row {
            id: row.get("id"),
            status: row.get("status"),
            priority: row.get("priority"),
            attempts: row.get("attempts"),
            max_attempts: row.get("max_attempts"),
            run_at: row.get("run_at"),
            enqueued_at: row.get("enqueued_at"),
            finished_at: row.get("finished_at"),
            payload: row.get("payload"),
            last_error: row
                .get::<_, Option<String>>("last_error")
                .map(|e| shown_in(&e)),
            group_key: row.get("group_key"),
            worker: row.get("worker"),
        }
    }
}

async fn id_above(client: &Client, id: i64) -> Result<bool, Failure> {
    Ok(client.query_one(JOB_ID_ABOVE, &[&id]).await?.get(0))
}

/// An id above every job's, near the newest: the id sequence's value where
/// the role may read it, else found by doubling and halving probes (each
/// one a look into the id indexes), to within a window.
async fn id_ceiling(client: &Client) -> Result<i64, Failure> {
    let mut low = 0;
    let last: Option<i64> = client.query_one(JOB_ID_BOUND, &[]).await?.get(0);
    if let Some(last) = last {
        if !id_above(client, last + 1).await? {
            return Ok(last + 1);
        }
        low = last + 1;
    }
    // now some job's id is at least `low` (or low is 0), none at `high` or above
    let mut high = low.max(WINDOW) * 2;
    while high < i64::MAX / 4 && id_above(client, high).await? {
        low = high;
        high *= 2;
    }
    while high - low > WINDOW {
        let mid = low + (high - low) / 2;
        if id_above(client, mid).await? {
            low = mid;
        } else {
            high = mid;
        }
    }
    Ok(high)
}

pub async fn list(
    State(app): State<Arc<App>>,
    Path((db, queue)): Path<(String, String)>,
    Query(filter): Query<Filter>,
    Query(at): Query<Page>,
) -> Result<Response, Failure> {
    let filter = filter.cleaned()?;
    let f = &filter;
    let client = app.databases.served_client(&db).await?;
    if f.dead_letters_only() {
        // (one more than a page, to know whether there is a next one)
        let rows = client
            .query(
                FAILED_JOBS,
                &[
                    &queue,
                    &at.before,
                    &(PAGE + 1),
                    &f.error,
                    &f.key,
                    &f.value,
                    &f.from,
                    &f.to,
                ],
            )
            .await?;
        let jobs: Vec<Row> = rows.iter().map(Row::from).collect();
        return Ok(jobs_page(&app, db, queue, filter, jobs, None));
    }
    // newest first, a window of ids at a time, until one more than a page
    let mut before = match at.before {
        Some(before) => before,
        None => id_ceiling(&client).await?,
    };
    let mut jobs: Vec<Row> = Vec::new();
    let mut windows = 0;
    while jobs.len() as i64 <= PAGE && before > 1 && windows < WINDOWS {
        let from = (before - WINDOW).max(1);
        let wanted = PAGE + 1 - jobs.len() as i64;
        let rows = client
            .query(
                JOBS,
                &[
                    &queue, &f.status, &before, &from, &wanted, &f.error, &f.key, &f.value,
                    &f.group, &f.worker, &f.from, &f.to, &f.time,
                ],
            )
            .await?;
        jobs.extend(rows.iter().map(Row::from));
        before = from;
        windows += 1;
    }
    // (the page may stop at its statements' bound, with older ids left)
    let partial = before > 1 && (jobs.len() as i64) <= PAGE;
    Ok(jobs_page(
        &app,
        db,
        queue,
        filter,
        jobs,
        partial.then_some(before),
    ))
}

/// The page of `jobs` (one more than a page when there is a next one), or,
/// with `stopped_at`, a page that stopped its search there.
fn jobs_page(
    app: &App,
    db: String,
    queue: String,
    filter: Filter,
    mut jobs: Vec<Row>,
    stopped_at: Option<i64>,
) -> Response {
    let next = if jobs.len() as i64 > PAGE {
        jobs.truncate(PAGE as usize);
        jobs.last().map(|job| job.id)
    } else {
        stopped_at
    };
    let db_link = format!("/db/{}", segment(&db));
    let query = filter.query();
    let statuses: Vec<(Option<&str>, String)> = std::iter::once(None)
        .chain(STATUSES.iter().map(|s| Some(*s)))
        .map(|status| (status, filter.with_status(status).query()))
        .collect();
    page(
        "jobs.html",
        context! {
            title => format!("{queue}: jobs"),
            db_link,
            queue_link => format!("{db_link}/queue/{}", segment(&queue)),
            db,
            queue,
            status => filter.status.clone(),
            narrows => filter.narrows(),
            next_query => format!("{query}{}", if query.is_empty() { "" } else { "&" }),
            filter,
            jobs,
            next,
            partial => stopped_at.is_some(),
            statuses,
            shown_url => app.shown_url,
        },
    )
}

#[derive(Deserialize)]
pub struct Lookup {
    id: String,
}

/// The look-up form's answer: the job's page.
pub async fn lookup(Path(db): Path<String>, Query(lookup): Query<Lookup>) -> Response {
    match lookup.id.trim().parse::<i64>() {
        Ok(id) => Redirect::to(&format!("/db/{}/job/{id}", segment(&db))).into_response(),
        Err(_) => Failure::BadRequest(format!("a job id is a whole number, not {:?}", lookup.id))
            .into_response(),
    }
}
