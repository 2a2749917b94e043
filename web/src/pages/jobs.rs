//! A queue's jobs, a page at a time (keyset on id, bounded), and one job.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::failure::Failure;
use crate::pages::{Note, STATUSES};
use crate::render::{page, segment};
use crate::security::Session;
use crate::state::App;

const JOBS: &str = include_str!("../../queries/jobs.sql");
const JOB: &str = include_str!("../../queries/job.sql");

/// Jobs per page.
const PAGE: i64 = 50;

#[derive(Deserialize)]
pub struct Filter {
    status: Option<String>,
    before: Option<i64>,
}

#[derive(Serialize)]
struct Row {
    id: i64,
    status: String,
    priority: i32,
    attempts: i32,
    max_attempts: i32,
    run_at: Option<String>,
    enqueued_at: Option<String>,
    finished_at: Option<String>,
    payload: Option<String>,
    last_error: Option<String>,
    group_key: Option<String>,
}

pub async fn list(
    State(app): State<Arc<App>>,
    Path((db, queue)): Path<(String, String)>,
    Query(filter): Query<Filter>,
) -> Result<Response, Failure> {
    let status = filter.status.filter(|s| !s.is_empty());
    if let Some(s) = &status {
        if !STATUSES.contains(&s.as_str()) {
            return Err(Failure::BadRequest(format!(
                "no status {s:?}: one of {}",
                STATUSES.join(", ")
            )));
        }
    }
    let client = app.databases.served_client(&db).await?;
    // one more than a page, to know whether there is a next one
    let rows = client
        .query(JOBS, &[&queue, &status, &filter.before, &(PAGE + 1)])
        .await?;
    let mut jobs: Vec<Row> = rows
        .iter()
        .map(|row| Row {
            id: row.get("id"),
            status: row.get("status"),
            priority: row.get("priority"),
            attempts: row.get("attempts"),
            max_attempts: row.get("max_attempts"),
            run_at: row.get("run_at"),
            enqueued_at: row.get("enqueued_at"),
            finished_at: row.get("finished_at"),
            payload: row.get("payload"),
            last_error: row.get("last_error"),
            group_key: row.get("group_key"),
        })
        .collect();
    let next = if jobs.len() as i64 > PAGE {
        jobs.truncate(PAGE as usize);
        jobs.last().map(|job| job.id)
    } else {
        None
    };
    let db_link = format!("/db/{}", segment(&db));
    Ok(page(
        "jobs.html",
        context! {
            title => format!("{queue}: jobs"),
            db_link,
            queue_link => format!("{db_link}/queue/{}", segment(&queue)),
            db,
            queue,
            status,
            jobs,
            next,
            statuses => STATUSES,
            shown_url => app.shown_url,
        },
    ))
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

pub async fn show(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Query(note): Query<Note>,
) -> Result<Response, Failure> {
    let client = app.databases.served_client(&db).await?;
    let Some(row) = client.query_opt(JOB, &[&id]).await? else {
        return Err(Failure::NotFound(format!(
            "no job {id} in database {db:?} (it may have been cleaned up)"
        )));
    };
    let queue: String = row.get("queue");
    let status: String = row.get("status");
    let db_link = format!("/db/{}", segment(&db));
    let field = |name: &str| row.get::<_, Option<String>>(name);
    Ok(page(
        "job.html",
        context! {
            title => format!("job {id}"),
            queue_link => format!("{db_link}/queue/{}", segment(&queue)),
            link => format!("{db_link}/job/{id}"),
            db_link,
            db,
            id,
            queue,
            can_retry => status == "failed" || status == "cancelled",
            can_cancel => status == "pending" || status == "processing",
            status,
            payload => field("payload"),
            headers => field("headers"),
            last_error => field("last_error"),
            priority => row.get::<_, i32>("priority"),
            attempts => row.get::<_, i32>("attempts"),
            max_attempts => row.get::<_, i32>("max_attempts"),
            run_at => field("run_at"),
            enqueued_at => field("enqueued_at"),
            finished_at => field("finished_at"),
            lease_expires_at => field("lease_expires_at"),
            worker => field("worker"),
            dedup_key => field("dedup_key"),
            group_key => field("group_key"),
            note => note.text(),
            csrf => app.security.csrf_token(&session),
            read_only => app.read_only,
            shown_url => app.shown_url,
        },
    ))
}
