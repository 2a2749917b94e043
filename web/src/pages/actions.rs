//! The actions: each one the SQL API's own call, as the connecting role, so
//! the database decides who may; its refusal is shown as it said it. Each
//! POST carries its session's CSRF token.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use serde::Deserialize;

use crate::failure::Failure;
use crate::pages::STATUSES;
use crate::render::segment;
use crate::security::Session;
use crate::state::App;

const RETRY: &str = include_str!("../../queries/retry.sql");
const CANCEL: &str = include_str!("../../queries/cancel.sql");
const PURGE: &str = include_str!("../../queries/purge.sql");
const PAUSE: &str = include_str!("../../queries/pause.sql");
const RESUME: &str = include_str!("../../queries/resume.sql");
const RUN_SCHEDULE: &str = include_str!("../../queries/run_schedule.sql");

#[derive(Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    /// purge: the status to purge, or "all"
    status: Option<String>,
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

fn back(to: String, done: &str, n: Option<&str>) -> Response {
    let n = n.map(|n| format!("&n={n}")).unwrap_or_default();
    Redirect::to(&format!("{to}?done={done}{n}")).into_response()
}

fn job_link(db: &str, id: i64) -> String {
    format!("/db/{}/job/{id}", segment(db))
}

fn queue_link(db: &str, queue: &str) -> String {
    format!("/db/{}/queue/{}", segment(db), segment(queue))
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
    Ok(back(job_link(&db, id), word, None))
}

pub async fn cancel(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    let done = call(&app, &session, &form, &db, CANCEL, &[&id]).await?;
    let word = if done == "true" {
        "cancelled"
    } else {
        "not-cancelled"
    };
    Ok(back(job_link(&db, id), word, None))
}

pub async fn purge(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    // "all" is queue_purge's NULL; anything else goes to the database as
    // given, which names an unknown status word itself (22023)
    let status = form.status.as_deref().filter(|s| *s != "all");
    if status.is_none() && form.status.is_none() {
        return Err(Failure::BadRequest(format!(
            "purge needs a status: all, or one of {}",
            STATUSES.join(", ")
        )));
    }
    let status = status.map(str::to_string);
    let purged = call(&app, &session, &form, &db, PURGE, &[&queue, &status]).await?;
    Ok(back(queue_link(&db, &queue), "purged", Some(&purged)))
}

pub async fn pause(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    call(&app, &session, &form, &db, PAUSE, &[&queue]).await?;
    Ok(back(queue_link(&db, &queue), "paused", None))
}

pub async fn resume(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Result<Response, Failure> {
    call(&app, &session, &form, &db, RESUME, &[&queue]).await?;
    Ok(back(queue_link(&db, &queue), "resumed", None))
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
    Ok(back(to, "ran", Some(&id)))
}
