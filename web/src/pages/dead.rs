//! Dead letters by cause, for one queue (`/db/<db>/queue/<queue>/dead`)
//! or the whole cluster (`/dead`): each cause with its count, when it was
//! first and last seen, where, and a sample; and one cause's jobs
//! (`?cause=<id>`), to choose some. Retrying or purging them is
//! dead_actions.rs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Extension;
use minijinja::context;
use serde::{Deserialize, Serialize};

use crate::dead_letters::{self, group, of_cause, Letter, Scope, READ};
use crate::failure::Failure;
use crate::pages::Note;
use crate::refresh;
use crate::render::{page, segment};
use crate::rights::Rights;
use crate::security::Session;
use crate::state::App;
use crate::stats;
use crate::urls::shown_in;

const ROWS: &str = include_str!("../../queries/dead_letter_rows.sql");

/// Jobs of a cause listed, to choose from.
const LISTED: usize = 100;

#[derive(Deserialize)]
pub struct Choice {
    cause: Option<String>,
}

/// What the role may do in each database and queue a page touches, asked
/// once each.
#[derive(Default)]
pub struct Allowed {
    jobs: HashMap<String, Rights>,
    queues: HashMap<(String, String), Rights>,
}

impl Allowed {
    pub async fn retry(&mut self, app: &App, db: &str) -> bool {
        if !self.jobs.contains_key(db) {
            let rights = match app.databases.client(db).await {
                Ok(client) => Rights::of_jobs(&client).await.unwrap_or_default(),
                Err(_) => Rights::default(),
            };
            self.jobs.insert(db.to_string(), rights);
        }
        self.jobs[db].retry
    }

    /// Whether the role may purge chosen dead letters of `queue`; else why.
    pub async fn purge(&mut self, app: &App, db: &str, queue: &str) -> Result<(), String> {
        let key = (db.to_string(), queue.to_string());
        if !self.queues.contains_key(&key) {
            let rights = match app.databases.client(db).await {
                Ok(client) => Rights::of_queue(&client, queue).await.unwrap_or_default(),
                Err(_) => Rights::default(),
            };
            self.queues.insert(key.clone(), rights);
        }
        let rights = &self.queues[&key];
        if rights.purge_ids {
            Ok(())
        } else if !rights.has_purge_ids && rights.reads_queues {
            Err(format!(
                "the extension in database {db} has no queue_purge(queue, status, ids), which \
                 purging chosen jobs needs (0.4)"
            ))
        } else {
            Err(rights
                .why_not
                .clone()
                .map(|why| format!("queue {queue} of {db}: {why}"))
                .unwrap_or_else(|| {
                    format!("this role may not execute queue_purge in database {db}")
                }))
        }
    }
}

/// A cause as a page lists it, with the actions offered.
#[derive(Serialize)]
struct Listed {
    #[serde(flatten)]
    cause: dead_letters::Cause,
    retry: bool,
    purge: bool,
}

#[derive(Serialize)]
struct Job {
    db: String,
    id: i64,
    queue: String,
    attempts: i32,
    finished_at: Option<String>,
    payload: Option<String>,
    last_error: Option<String>,
    link: String,
}

/// The newest LISTED of `letters` as a page lists them.
async fn jobs(app: &App, letters: &[&Letter]) -> Result<Vec<Job>, Failure> {
    let mut newest = letters.to_vec();
    newest.sort_by(|a, b| a.ago.total_cmp(&b.ago));
    let mut by_db: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for letter in newest.iter().take(LISTED) {
        by_db.entry(&letter.db).or_default().push(letter.id);
    }
    let mut jobs = Vec::new();
    for (db, ids) in by_db {
        let client = app.databases.served_client(db).await?;
        for row in client.query(ROWS, &[&ids]).await? {
            let id: i64 = row.get("id");
            jobs.push(Job {
                db: db.to_string(),
                id,
                queue: row.get("queue"),
                attempts: row.get("attempts"),
                finished_at: row.get("finished_at"),
                payload: row.get("payload"),
                last_error: row
                    .get::<_, Option<String>>("last_error")
                    .map(|e| shown_in(&e)),
                link: format!("/db/{}/job/{id}", segment(db)),
            });
        }
    }
    jobs.sort_by(|a, b| (&a.db, b.id).cmp(&(&b.db, a.id)));
    Ok(jobs)
}

/// A queue's page is 404 when there is no such queue (its dead letters
/// would only be none).
async fn require_queue(app: &App, scope: &Scope) -> Result<(), Failure> {
    let Scope::Queue { db, queue } = scope else {
        return Ok(());
    };
    let rows = match app.samples.latest(db) {
        Some((_, rows)) if rows.iter().any(|q| q.queue == *queue) => rows,
        _ => {
            let client = app.databases.served_client(db).await?;
            stats::fetch(&client).await?
        }
    };
    if rows.iter().any(|q| q.queue == *queue) {
        Ok(())
    } else {
        Err(Failure::NotFound(format!(
            "no queue {queue:?} in database {db:?}"
        )))
    }
}

pub fn heading(scope: &Scope) -> (String, Option<String>, Option<String>) {
    match scope {
        Scope::Cluster => ("the cluster".into(), None, None),
        Scope::Queue { db, queue } => (
            format!("{db} › {queue}"),
            Some(db.clone()),
            Some(queue.clone()),
        ),
    }
}

async fn show(
    app: Arc<App>,
    session: Session,
    scope: Scope,
    choice: Choice,
    note: Note,
    reload: refresh::Choice,
) -> Result<Response, Failure> {
    require_queue(&app, &scope).await?;
    let read = dead_letters::read(&app, &scope).await?;
    let causes = group(&read.letters);
    let mut allowed = Allowed::default();
    let mut why_not: BTreeSet<String> = BTreeSet::new();
    let mut listed = Vec::new();
    for cause in causes {
        let mut retry = !app.security.read_only;
        let mut purge = !app.security.read_only;
        for place in &cause.places {
            retry &= allowed.retry(&app, &place.db).await;
            if let Err(why) = allowed.purge(&app, &place.db, &place.queue).await {
                purge = false;
                why_not.insert(why);
            }
        }
        listed.push(Listed {
            cause,
            retry,
            purge,
        });
    }
    if listed.iter().any(|c| !c.retry) && !app.security.read_only {
        why_not.insert("Retry is not offered where this role may not execute queue_retry.".into());
    }
    let base = scope.link();
    let chosen = match &choice.cause {
        Some(id) => listed.iter().position(|c| c.cause.id == *id),
        None => None,
    };
    let jobs = match chosen {
        Some(i) => jobs(&app, &of_cause(&read.letters, &listed[i].cause.id)).await?,
        None => Vec::new(),
    };
    let (place, db, queue) = heading(&scope);
    let total = read.letters.len();
    let unknown_cause = choice.cause.is_some() && chosen.is_none();
    let chosen = chosen.map(|i| listed.swap_remove(i));
    let path = match &chosen {
        Some(c) => format!("{base}?cause={}", c.cause.id),
        None => base.clone(),
    };
    Ok(page(
        "dead.html",
        context! {
            title => format!("dead letters of {place}"),
            place,
            db_link => db.as_deref().map(|db| format!("/db/{}", segment(db))),
            queue_link => match (&db, &queue) {
                (Some(db), Some(queue)) => Some(format!("/db/{}/queue/{}", segment(db), segment(queue))),
                _ => None,
            },
            db,
            queue,
            base,
            total,
            causes => listed,
            chosen,
            unknown_cause,
            jobs,
            listed_at_most => LISTED,
            cut => read.cut,
            read_at_most => READ,
            refusals => read.refusals,
            why_not,
            note => note.text(),
            refresh => if choice.cause.is_none() { Some(refresh::every_sample(&app, &path, &reload)) } else { None },
            csrf => app.security.csrf_token(&session),
            read_only => app.security.read_only,
            shown_url => app.shown_url,
        },
    ))
}

pub async fn cluster(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Query(choice): Query<Choice>,
    Query(note): Query<Note>,
    Query(reload): Query<refresh::Choice>,
) -> Result<Response, Failure> {
    show(app, session, Scope::Cluster, choice, note, reload).await
}

pub async fn queue(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue)): Path<(String, String)>,
    Query(choice): Query<Choice>,
    Query(note): Query<Note>,
    Query(reload): Query<refresh::Choice>,
) -> Result<Response, Failure> {
    app.databases.require_served(&db).await?;
    show(
        app,
        session,
        Scope::Queue { db, queue },
        choice,
        note,
        reload,
    )
    .await
}
