//! A queue's page: its counts, options, sender or webhook, groups,
//! schedules, and charts of the sampled counters.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Extension;
use minijinja::context;
use serde::Serialize;

use crate::chart::{chart, level_per_minute, rate_per_minute};
use crate::databases::Client;
use crate::failure::Failure;
use crate::pages::{Note, STATUSES};
use crate::refresh;
use crate::render::{page, segment};
use crate::rights::Rights;
use crate::security::Session;
use crate::state::App;
use crate::stats::{self, age};
use crate::urls::shown;

const OPTIONS: &str = include_str!("../../queries/options.sql");
const WEBHOOK: &str = include_str!("../../queries/webhook.sql");
const GROUPS: &str = include_str!("../../queries/groups.sql");
const SCHEDULES: &str = include_str!("../../queries/schedules.sql");

#[derive(Serialize)]
struct Webhook {
    url: String,
    header_names: Vec<String>,
    timeout: String,
    signed: bool,
    max_in_flight: i32,
}

#[derive(Serialize)]
struct Group {
    group_key: String,
    pending: i64,
    processing: i64,
    oldest_due: Option<String>,
    head_id: Option<i64>,
}

#[derive(Serialize)]
struct Schedule {
    name: String,
    link: String,
    cron: String,
    time_zone: String,
    paused: bool,
    catch_up: String,
    no_overlap: bool,
    next_run_at: Option<String>,
    last_run_at: Option<String>,
    last_job_id: Option<i64>,
    runs_total: i64,
    skipped_total: i64,
    owner: String,
}

/// The options as (name, value) pairs, in the order queue_create takes them.
async fn options(client: &Client, queue: &str) -> Result<Vec<(String, String)>, Failure> {
    let Some(row) = client.query_opt(OPTIONS, &[&queue]).await? else {
        return Ok(Vec::new());
    };
    let text = |name: &str| row.get::<_, Option<String>>(name).unwrap_or("none".into());
    let int = |name: &str| {
        row.get::<_, Option<i32>>(name)
            .map_or("none".into(), |n| n.to_string())
    };
    Ok(vec![
        ("owner".into(), text("owner")),
        ("max_attempts".into(), int("max_attempts")),
        ("backoff".into(), text("backoff")),
        ("retry_delay".into(), text("retry_delay")),
        ("max_retry_delay".into(), text("max_retry_delay")),
        ("lease".into(), text("lease")),
        ("retention".into(), text("retention")),
        ("ordered".into(), row.get::<_, bool>("ordered").to_string()),
        ("max_in_flight".into(), int("max_in_flight")),
        ("group_max_in_flight".into(), int("group_max_in_flight")),
        ("rate_limit".into(), text("rate_limit")),
        ("group_rate_limit".into(), text("group_rate_limit")),
        ("created_at".into(), text("created_at")),
    ])
}

async fn webhook(client: &Client, queue: &str) -> Result<Option<Webhook>, Failure> {
    Ok(client
        .query_opt(WEBHOOK, &[&queue])
        .await?
        .map(|row| Webhook {
            url: shown(&row.get::<_, String>("url")),
            header_names: row.get("header_names"),
            timeout: row.get("timeout"),
            signed: row.get("signed"),
            max_in_flight: row.get("max_in_flight"),
        }))
}

async fn groups(client: &Client, queue: &str) -> Result<Vec<Group>, Failure> {
    let rows = client.query(GROUPS, &[&queue]).await?;
    Ok(rows
        .iter()
        .map(|row| Group {
            group_key: row.get("group_key"),
            pending: row.get("pending"),
            processing: row.get("processing"),
            oldest_due: row.get::<_, Option<f64>>("oldest_due_secs").map(age),
            head_id: row.get("head_id"),
        })
        .collect())
}

async fn schedules(client: &Client, db_link: &str, queue: &str) -> Result<Vec<Schedule>, Failure> {
    let rows = client.query(SCHEDULES, &[&queue]).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let name: String = row.get("name");
            Schedule {
                link: format!("{db_link}/schedule/{}", segment(&name)),
                name,
                cron: row.get("cron"),
                time_zone: row.get("time_zone"),
                paused: row.get("paused"),
                catch_up: row.get("catch_up"),
                no_overlap: row.get("no_overlap"),
                next_run_at: row.get("next_run_at"),
                last_run_at: row.get("last_run_at"),
                last_job_id: row.get("last_job_id"),
                runs_total: row.get("runs_total"),
                skipped_total: row.get("skipped_total"),
                owner: row.get("owner"),
            }
        })
        .collect())
}

/// A part of the page that the role may not read shows the refusal instead.
fn split<T: Default>(result: Result<T, Failure>) -> (T, Option<String>) {
    match result {
        Ok(value) => (value, None),
        Err(e) => (T::default(), Some(e.summary())),
    }
}

pub async fn show(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Query(note): Query<Note>,
    Query(reload): Query<refresh::Choice>,
) -> Result<Response, Failure> {
    let client = app.databases.served_client(&db).await?;
    let rows = stats::fetch(&client).await?;
    app.samples.record(&db, &rows);
    let Some(stats) = rows.into_iter().find(|row| row.queue == queue) else {
        return Err(Failure::NotFound(format!(
            "no queue {queue:?} in database {db:?}"
        )));
    };
    let db_link = format!("/db/{}", segment(&db));
    let link = format!("{db_link}/queue/{}", segment(&queue));
    let rights = Rights::of_queue(&client, &queue).await?;
    // (the options and the webhook are in the extension owner's tables: a
    // role that may not read them is told so, not shown the refusal)
    let (options, options_error, webhook) = if rights.reads_queues {
        let (options, options_error) = split(options(&client, &queue).await);
        let (webhook, _) = split(webhook(&client, &queue).await);
        (options, options_error, webhook)
    } else {
        (Vec::new(), None, None)
    };
    let (groups, groups_error) = split(groups(&client, &queue).await);
    let (schedules, schedules_error) = split(schedules(&client, &db_link, &queue).await);
    drop(client);

    let samples = app.samples.of(&db, &queue);
    let throughput = chart(
        "Jobs per minute",
        "jobs per minute",
        vec![
            (
                "enqueued",
                "#2563eb",
                rate_per_minute(&samples, |s| s.enqueued),
            ),
            (
                "succeeded",
                "#16a34a",
                rate_per_minute(&samples, |s| s.succeeded),
            ),
            ("failed", "#dc2626", rate_per_minute(&samples, |s| s.failed)),
        ],
    );
    let backlog = chart(
        "Backlog (pending and scheduled)",
        "jobs",
        vec![(
            "backlog",
            "#9333ea",
            level_per_minute(&samples, |s| s.backlog),
        )],
    );
    let reload = refresh::every_sample(&app, &link, &reload);
    Ok(page(
        "queue.html",
        context! {
            title => queue.clone(),
            db,
            db_link,
            queue,
            link,
            oldest_due => stats.oldest_due_secs.map(age),
            stats,
            options,
            options_error,
            webhook,
            groups,
            groups_error,
            schedules,
            schedules_error,
            charts => vec![throughput, backlog],
            sample_secs => app.samples.interval.as_secs(),
            statuses => STATUSES,
            rights,
            note => note.text(),
            refresh => reload,
            csrf => app.security.csrf_token(&session),
            read_only => app.security.read_only,
            shown_url => app.shown_url,
        },
    ))
}
