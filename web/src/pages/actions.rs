//! The actions: each one the SQL API's own call, as the connecting role, so
//! the database decides who may; its refusal is shown as it said it. Each
//! POST carries its session's CSRF token, and those that delete or end
//! jobs (purge, cancel) what their confirmation page showed (confirm.rs).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use serde::Deserialize;

use crate::failure::Failure;
use crate::render::segment;
use crate::security::Session;
use crate::state::App;

const RETRY: &str = include_str!("../../queries/retry.sql");
const CANCEL: &str = include_str!("../../queries/cancel.sql");
const PURGE: &str = include_str!("../../queries/purge.sql");
const PAUSE: &str = include_str!("../../queries/pause.sql");
const RESUME: &str = include_str!("../../queries/resume.sql");
const RUN_SCHEDULE: &str = include_str!("../../queries/run_schedule.sql");
const JOB_STATUS: &str = include_str!("../../queries/job_status.sql");

#[derive(Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    /// purge: the status to purge, or "all"; cancel: the job's status when
    /// it was confirmed
    status: Option<String>,
    /// purge: how many jobs its confirmation page counted
    counted: Option<i64>,
    /// run a schedule: the queue page to come back to
    queue: Option<String>,
}

/// Runs `sql` with `params` in `db` after the CSRF check; its one result
/// as text.
async fn call(
    app: &App,
    session: &Session,
    form: &ActionForm,
    db: &str,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<String, Failure> {
    app.security.check_csrf(session, &form.csrf)?;
    let client = app.databases.served_client(db).await?;
    let row = client.query_one(sql, params).await?;
    Ok(row.get::<_, Option<String>>(0).unwrap_or_default())
}

/// Back to the page `to`, whose note says what was `done` (pages::Note).
fn back(to: String, done: &str, numbers: &[(&str, &str)]) -> Response {
    let numbers: String = numbers.iter().map(|(k, v)| format!("&{k}={v}")).collect();
    Redirect::to(&format!("{to}?done={done}{numbers}")).into_response()
}

pub fn job_link(db: &str, id: i64) -> String {
    format!("/db/{}/job/{id}", segment(db))
}

pub fn queue_link(db: &str, queue: &str) -> String {
    format!("/db/{}/queue/{}", segment(db), segment(queue))
}

fn unconfirmed(action: &str) -> Failure {
    Failure::BadRequest(format!(
        "a {action} is confirmed on its own page first, which says what it will do"
    ))
}

pub async fn retry(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    let done = call(&app, &session, &form, &db, RETRY, &[&id]).await?;
    let word = if done == "true" {
        "retried"
    } else {
        "not-retried"
    };
    Ok(back(job_link(&db, id), word, &[]))
}

pub async fn cancel(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    let Some(confirmed) = form.status.as_deref() else {
        return Err(unconfirmed("cancel"));
    };
    app.security.check_csrf(&session, &form.csrf)?;
    // a job that moved on since is asked about again, not cancelled blindly
    let client = app.databases.served_client(&db).await?;
    let now = client.query_opt(JOB_STATUS, &[&id]).await?;
    drop(client);
    if now.is_some_and(|row| row.get::<_, String>(0) != confirmed) {
        let was = segment(confirmed);
        let to = format!("{}/cancel?was={was}", job_link(&db, id));
        return Ok(Redirect::to(&to).into_response());
    }
    let done = call(&app, &session, &form, &db, CANCEL, &[&id]).await?;
    let word = if done == "true" {
        "cancelled"
    } else {
        "not-cancelled"
    };
    Ok(back(job_link(&db, id), word, &[]))
}

pub async fn purge(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    // what the confirmation page showed: the status, never a default, and
    // the count, which the note compares with what was purged
    let (Some(status), Some(counted)) = (form.status.as_deref(), form.counted) else {
        return Err(unconfirmed("purge"));
    };
    // "all" is queue_purge's NULL; anything else goes to the database as
    // given, which names an unknown status word itself (22023)
    let status = Some(status.to_string()).filter(|s| s != "all");
    let purged = call(&app, &session, &form, &db, PURGE, &[&queue, &status]).await?;
    let counted = counted.to_string();
    Ok(back(
        queue_link(&db, &queue),
        "purged",
        &[("n", &purged), ("counted", &counted)],
    ))
}

pub async fn pause(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    call(&app, &session, &form, &db, PAUSE, &[&queue]).await?;
    Ok(back(queue_link(&db, &queue), "paused", &[]))
}

pub async fn resume(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    call(&app, &session, &form, &db, RESUME, &[&queue]).await?;
    Ok(back(queue_link(&db, &queue), "resumed", &[]))
}

pub async fn run_schedule(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, name)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    let id = call(&app, &session, &form, &db, RUN_SCHEDULE, &[&name]).await?;
    let to = match &form.queue {
        Some(queue) => queue_link(&db, queue),
        None => format!("/db/{}", segment(&db)),
    };
    Ok(back(to, "ran", &[("n", &id)]))
}
