//! The question a destructive action asks first, on a page of its own (a
//! GET of the action's URL, so no script is needed): what it will do and to
//! how many jobs, read now, and a button whose POST carries the CSRF token
//! and what was confirmed, so that the action does what was asked.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Extension;
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::failure::Failure;
use crate::pages::actions::{job_link, queue_link};
use crate::pages::STATUSES;
use crate::render::page;
use crate::rights::Rights;
use crate::security::Session;
use crate::state::App;

const PURGE_COUNT: &str = include_str!("../../queries/purge_count.sql");
const JOB_STATUS: &str = include_str!("../../queries/job_status.sql");

/// The form of a confirmation: where it posts, its hidden fields, its
/// button.
#[derive(Serialize)]
struct Confirmation {
    action: String,
    fields: Vec<(&'static str, String)>,
    button: String,
}

pub fn refuse_read_only(app: &App) -> Result<(), Failure> {
    if app.security.read_only {
        return Err(Failure::Forbidden(
            "queue-web runs --read-only: no actions".into(),
        ));
    }
    Ok(())
}

fn jobs(n: i64) -> String {
    format!("{n} job{}", if n == 1 { "" } else { "s" })
}

#[derive(Deserialize)]
pub struct PurgeChoice {
    status: Option<String>,
}

/// `.../purge?status=failed`: how many failed jobs it deletes.
pub async fn purge(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Query(choice): Query<PurgeChoice>,
) -> Result<Response, Failure> {
    refuse_read_only(&app)?;
    let choices = format!("all, or one of {}", STATUSES.join(", "));
    let Some(status) = choice.status.filter(|s| !s.is_empty()) else {
        return Err(Failure::BadRequest(format!(
            "choose the status of the jobs to purge: {choices}"
        )));
    };
    if status != "all" && !STATUSES.contains(&status.as_str()) {
        return Err(Failure::BadRequest(format!(
            "no status {status:?}: {choices}"
        )));
    }
    let client = app.databases.served_client(&db).await?;
    let of_status = Some(status.as_str()).filter(|s| *s != "all");
    let Some(row) = client.query_opt(PURGE_COUNT, &[&queue, &of_status]).await? else {
        return Err(Failure::NotFound(format!(
            "no queue {queue:?} in database {db:?}"
        )));
    };
    let count: i64 = row.get("jobs");
    let rights = Rights::of_queue(&client, &queue).await?;
    drop(client);

    let which = of_status.map(|s| format!("{s} ")).unwrap_or_default();
    let back = queue_link(&db, &queue);
    let these = match of_status {
        Some(status) => format!(
            "the {count} {status} job{}",
            if count == 1 { "" } else { "s" }
        ),
        None => format!("all {} of every status", jobs(count)),
    };
    let what = if count == 0 {
        format!("Queue {queue} has no {which}jobs now: nothing to purge.")
    } else {
        format!(
            "This deletes {these} of queue {queue} in database {db}, for good: no retry \
             brings them back and no page shows them again. (Counted now: the purge deletes \
             the {which}jobs there are when you confirm, and says how many.)"
        )
    };
    let refusal = (count > 0 && !rights.purge)
        .then_some(rights.why_not)
        .flatten();
    let confirmation = (count > 0 && rights.purge).then(|| Confirmation {
        action: format!("{back}/purge"),
        fields: vec![
            ("csrf", app.security.csrf_token(&session)),
            ("status", status.clone()),
            ("counted", count.to_string()),
        ],
        button: format!("Purge {}", jobs(count)),
    });
    Ok(page(
        "confirm.html",
        context! {
            title => format!("{queue}: purge"),
            heading => match of_status {
                Some(status) => format!("Purge the {status} jobs of {queue}"),
                None => format!("Purge all jobs of {queue}"),
            },
            db,
            back,
            back_label => queue,
            what,
            refusal,
            confirmation,
            keep => "Keep them",
            shown_url => app.shown_url,
        },
    ))
}

#[derive(Deserialize)]
pub struct Changed {
    /// The status a cancel was confirmed in, when the job has moved on.
    was: Option<String>,
}

/// `.../job/<id>/cancel`: which job it ends, and what becomes of it.
pub async fn cancel(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, id)): Path<(String, i64)>,
    Query(changed): Query<Changed>,
) -> Result<Response, Failure> {
    refuse_read_only(&app)?;
    let client = app.databases.served_client(&db).await?;
    let Some(row) = client.query_opt(JOB_STATUS, &[&id]).await? else {
        return Err(Failure::NotFound(format!(
            "no job {id} in database {db:?} (it may have been cleaned up)"
        )));
    };
    let status: String = row.get("status");
    let rights = Rights::of_jobs(&client).await?;
    drop(client);

    let back = job_link(&db, id);
    let what = match status.as_str() {
        "pending" => format!(
            "Job {id} is pending: cancelling ends it, as cancelled, and it is not run. \
             Retry can send it back while it is kept."
        ),
        "processing" => format!(
            "Job {id} is being processed: cancelling ends it now, as cancelled, and its \
             worker's outcome is discarded (a webhook request already sent may still arrive)."
        ),
        other => format!("Job {id} is {other}: only a pending or processing job can be cancelled."),
    };
    let cancellable = status == "pending" || status == "processing";
    // (a fixed word, so that a crafted link cannot put words on the page)
    let was = changed
        .was
        .filter(|was| STATUSES.contains(&was.as_str()) && *was != status);
    let refusal = (cancellable && !rights.cancel)
        .then_some("Cancel is not offered: this role may not execute queue_cancel.");
    let confirmation = (cancellable && rights.cancel).then(|| Confirmation {
        action: format!("{back}/cancel"),
        fields: vec![
            ("csrf", app.security.csrf_token(&session)),
            ("status", status.clone()),
        ],
        button: format!("Cancel job {id}"),
    });
    Ok(page(
        "confirm.html",
        context! {
            title => format!("job {id}: cancel"),
            heading => format!("Cancel job {id}"),
            changed => was.map(|was| format!(
                "It was {was} when you confirmed, and is {status} now: nothing was done."
            )),
            db,
            back,
            back_label => format!("job {id}"),
            what,
            refusal,
            confirmation,
            keep => "Keep it",
            shown_url => app.shown_url,
        },
    ))
}
