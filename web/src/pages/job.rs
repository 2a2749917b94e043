//! One job: its status, times, payload, headers and last error, its result
//! and the jobs it depends on and that depend on it (0.4), with Retry or
//! Cancel as its status allows.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Extension;
use minijinja::context;
use serde::Serialize;

use crate::databases::Client;
use crate::failure::Failure;
use crate::pages::Note;
use crate::render::{page, segment};
use crate::rights::Rights;
use crate::security::Session;
use crate::state::App;
use crate::urls::shown_in;

const JOB: &str = include_str!("../../queries/job.sql");
const RELATIVES: &str = include_str!("../../queries/relatives.sql");
const PARENTS: &str = include_str!("../../queries/parents.sql");
const CHILDREN: &str = include_str!("../../queries/children.sql");

/// A parent or a child of a job.
#[derive(Serialize)]
struct Relative {
    id: i64,
    link: String,
    queue: Option<String>,
    status: Option<String>,
    result: Option<String>,
}

/// The jobs `sql` lists for job `id` (its parents or its children), or
/// None when this database's extension has no such function.
async fn relatives(
    client: &Client,
    db_link: &str,
    sql: &str,
    id: i64,
    exists: bool,
) -> Result<Option<Vec<Relative>>, Failure> {
    if !exists {
        return Ok(None);
    }
    let rows = client.query(sql, &[&id]).await?;
    Ok(Some(
        rows.iter()
            .map(|row| {
                let id: i64 = row.get("id");
                Relative {
                    id,
                    link: format!("{db_link}/job/{id}"),
                    queue: row.get("queue"),
                    status: row.get("status"),
                    result: row.get("result"),
                }
            })
            .collect(),
    ))
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
    let rights = Rights::of_jobs(&client).await?;
    let queue: String = row.get("queue");
    let status: String = row.get("status");
    let db_link = format!("/db/{}", segment(&db));
    let can = client.query_one(RELATIVES, &[]).await?;
    let parents = relatives(&client, &db_link, PARENTS, id, can.get("parents")).await?;
    let children = relatives(&client, &db_link, CHILDREN, id, can.get("children")).await?;
    let field = |name: &str| row.get::<_, Option<String>>(name);
    let retryable = status == "failed" || status == "cancelled";
    let cancellable = status == "pending" || status == "processing";
    // (said when the status would allow an action that the role may not call)
    let not_offered = if retryable && !rights.retry {
        Some("queue_retry")
    } else if cancellable && !rights.cancel {
        Some("queue_cancel")
    } else {
        None
    };
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
            can_retry => retryable && rights.retry,
            can_cancel => cancellable && rights.cancel,
            not_offered,
            status,
            payload => field("payload"),
            headers => field("headers"),
            last_error => field("last_error").map(|e| shown_in(&e)),
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
            result => field("result"),
            waiting_for => row.get::<_, Option<i32>>("waiting_for"),
            parents,
            children,
            note => note.text(),
            csrf => app.security.csrf_token(&session),
            read_only => app.security.read_only,
            shown_url => app.shown_url,
        },
    ))
}
