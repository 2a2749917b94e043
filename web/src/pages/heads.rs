//! What to do about a stuck group of an ordered queue (docs/groups.md, "A
//! stuck group"), from the cluster page's line: run its head now (cancel
//! and retry in one statement: its attempts start over, its id keeps it at
//! the head), or let it go (cancel it: the group goes on without it), the
//! latter after a page that says what it ends. Each POST carries the status
//! the head had when it was offered: a head that moved on since is left
//! alone.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::databases::Client;
use crate::failure::Failure;
use crate::pages::actions::job_link;
use crate::pages::confirm::refuse_read_only;
use crate::render::page;
use crate::rights::Rights;
use crate::security::Session;
use crate::state::{self, App};
use crate::urls::shown_in;

const HEAD: &str = include_str!("../../queries/head.sql");
const RUN_HEAD: &str = include_str!("../../queries/run_head.sql");
const CANCEL: &str = include_str!("../../queries/cancel.sql");

#[derive(Deserialize)]
pub struct HeadForm {
    #[serde(default)]
    csrf: String,
    /// The head's status when the action was offered.
    status: Option<String>,
}

/// The head job as it is now: its status, queue, group and last error,
/// and how many jobs of its group wait.
struct Now {
    status: String,
    queue: String,
    group_key: Option<String>,
    last_error: Option<String>,
    attempts: i32,
    waiting: i64,
}

async fn now(client: &Client, db: &str, id: i64) -> Result<Now, Failure> {
    let Some(row) = client.query_opt(HEAD, &[&id]).await? else {
        return Err(Failure::NotFound(format!(
            "no job {id} in database {db:?} (it may have been cleaned up)"
        )));
    };
    Ok(Now {
        status: row.get("status"),
        queue: row.get("queue"),
        group_key: row.get("group_key"),
        last_error: row
            .get::<_, Option<String>>("last_error")
            .map(|e| shown_in(&e)),
        attempts: row.get("attempts"),
        waiting: row.get("waiting"),
    })
}

/// Back to the cluster page, whose reading of `db` is taken again so that
/// its line of what is stuck is current, with the note `done`.
async fn back(app: &App, db: &str, done: &str, id: i64) -> Response {
    let _ = state::read(app, db).await;
    Redirect::to(&format!("/?done={done}&n={id}")).into_response()
}

/// The head must still be as it was offered; else nothing is done.
fn unchanged(form: &HeadForm, now: &Now) -> Result<(), ()> {
    match &form.status {
        Some(status) if *status == now.status => Ok(()),
        _ => Err(()),
    }
}

pub async fn run_now(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Form(form): Form<HeadForm>,
) -> Result<Response, Failure> {
    app.security.check_csrf(&session, &form.csrf)?;
    let client = app.databases.served_client(&db).await?;
    let head = now(&client, &db, id).await?;
    if form.status.as_deref() != Some("pending") || unchanged(&form, &head).is_err() {
        drop(client);
        return Ok(back(&app, &db, "head-moved", id).await);
    }
    let done: Option<String> = client.query_one(RUN_HEAD, &[&id]).await?.get(0);
    drop(client);
    let word = if done.as_deref() == Some("true") {
        "ran-head"
    } else {
        "head-moved"
    };
    Ok(back(&app, &db, word, id).await)
}

/// The form of a confirmation (confirm.html).
#[derive(Serialize)]
struct Confirmation {
    action: String,
    fields: Vec<(&'static str, String)>,
    button: String,
}

/// `.../job/<id>/let-go`: which job it ends, and what the group does then.
pub async fn ask_let_go(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
) -> Result<Response, Failure> {
    refuse_read_only(&app)?;
    let client = app.databases.served_client(&db).await?;
    let head = now(&client, &db, id).await?;
    let rights = Rights::of_jobs(&client).await?;
    drop(client);
    let link = job_link(&db, id);
    let endable = head.status == "pending" || head.status == "processing";
    let group = head.group_key.clone().unwrap_or_default();
    let behind = head.waiting - i64::from(head.status == "pending");
    let what = if endable {
        format!(
            "Job {id} is {status}, the head of group {group} of queue {queue}, after {attempts} \
             attempt{s}{error}. Letting it go cancels it: it ends as cancelled, and the group goes \
             on with its next job ({behind} wait). Jobs that depend on it are cancelled too. \
             Retry can bring it back, at the head of its group again.",
            status = head.status,
            queue = head.queue,
            attempts = head.attempts,
            s = if head.attempts == 1 { "" } else { "s" },
            error = head
                .last_error
                .as_deref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default(),
        )
    } else {
        format!(
            "Job {id} is {}: it holds nothing back any more.",
            head.status
        )
    };
    let refusal = (endable && !rights.cancel)
        .then_some("Not offered: this role may not execute queue_cancel.");
    let confirmation = (endable && rights.cancel).then(|| Confirmation {
        action: format!("{link}/let-go"),
        fields: vec![
            ("csrf", app.security.csrf_token(&session)),
            ("status", head.status.clone()),
        ],
        button: format!("Let job {id} go"),
    });
    Ok(page(
        "confirm.html",
        context! {
            title => format!("job {id}: let it go"),
            heading => format!("Let job {id} go: cancel the head of group {group}"),
            db,
            back => "/",
            back_label => "what is stuck",
            what,
            refusal,
            confirmation,
            keep => "Keep it",
            shown_url => app.shown_url,
        },
    ))
}

pub async fn let_go(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Form(form): Form<HeadForm>,
) -> Result<Response, Failure> {
    app.security.check_csrf(&session, &form.csrf)?;
    let client = app.databases.served_client(&db).await?;
    let head = now(&client, &db, id).await?;
    if form.status.is_none() {
        return Err(Failure::BadRequest(
            "letting a head go is confirmed on its own page first, which says what it ends".into(),
        ));
    }
    if unchanged(&form, &head).is_err() {
        drop(client);
        return Ok(back(&app, &db, "head-moved", id).await);
    }
    let done: Option<String> = client.query_one(CANCEL, &[&id]).await?.get(0);
    drop(client);
    let word = if done.as_deref() == Some("true") {
        "let-go"
    } else {
        "head-moved"
    };
    Ok(back(&app, &db, word, id).await)
}
