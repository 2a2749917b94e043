//! Retrying or purging dead letters of one cause (dead.rs): all of them or
//! those chosen, after a page that says how many (a GET of `.../dead/retry`
//! or `.../dead/purge`, whose button makes the POST). Each is the SQL API's
//! own call, as the connecting role: a retry is queue_retry for each job, a
//! purge queue_purge(queue, 'failed', ids) (0.4) for each queue; a refusal
//! is the database's. What it acts on is what was confirmed: the jobs
//! chosen, or the cause's dead letters up to the newest id the confirmation
//! counted in each database, read again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use minijinja::context;
use serde::Serialize;

use crate::dead_letters::{self, group, of_cause, Letter, Scope};
use crate::failure::Failure;
use crate::pages::confirm::refuse_read_only;
use crate::pages::dead::{heading, Allowed};
use crate::render::page;
use crate::security::Session;
use crate::state::App;

const RETRY_MANY: &str = include_str!("../../queries/retry_many.sql");
const PURGE_IDS: &str = include_str!("../../queries/purge_ids.sql");

/// Ids per statement: a retry moves each job (and wakes its queue), a purge
/// deletes them in one go; each chunk stays well within a statement_timeout.
const RETRY_CHUNK: usize = 500;
const PURGE_CHUNK: usize = 10_000;

/// Retry or purge.
#[derive(Clone, Copy, PartialEq)]
enum Act {
    Retry,
    Purge,
}

impl Act {
    fn from_path(word: &str) -> Result<Act, Failure> {
        match word {
            "retry" => Ok(Act::Retry),
            "purge" => Ok(Act::Purge),
            other => Err(Failure::NotFound(format!("no action {other:?}"))),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Act::Retry => "retry",
            Act::Purge => "purge",
        }
    }
}

/// What a confirmation or its POST names: the cause, the jobs chosen
/// (`db:id`), and for a whole cause the newest id counted in each database.
#[derive(Default)]
struct Asked {
    csrf: String,
    cause: Option<String>,
    counted: Option<i64>,
    jobs: BTreeSet<(String, i64)>,
    upto: HashMap<String, i64>,
}

/// "db:id" (a database's name may hold a colon; an id does not).
fn db_and_id(value: &str) -> Option<(String, i64)> {
    let (db, id) = value.rsplit_once(':')?;
    Some((db.to_string(), id.parse().ok()?))
}

impl Asked {
    /// From a query string or a form body (both application/x-www-form-
    /// urlencoded, with `job` and `upto` repeated).
    fn parse(bytes: &[u8]) -> Result<Asked, Failure> {
        let mut asked = Asked::default();
        for (key, value) in url::form_urlencoded::parse(bytes) {
            let bad =
                || Failure::BadRequest(format!("{key}={value:?} is not a database and a job id"));
            match key.as_ref() {
                "csrf" => asked.csrf = value.into_owned(),
                "cause" => asked.cause = Some(value.into_owned()),
                "counted" => asked.counted = value.parse().ok(),
                "job" => {
                    asked.jobs.insert(db_and_id(&value).ok_or_else(bad)?);
                }
                "upto" => {
                    let (db, id) = db_and_id(&value).ok_or_else(bad)?;
                    asked.upto.insert(db, id);
                }
                _ => {}
            }
        }
        Ok(asked)
    }

    /// The letters of `letters` this names: of its cause, among the jobs
    /// chosen if any, else up to the ids counted (when it has them).
    fn pick<'a>(&self, letters: &'a [Letter]) -> Result<Vec<&'a Letter>, Failure> {
        let Some(cause) = &self.cause else {
            return Err(Failure::BadRequest(
                "choose a cause of dead letters first".into(),
            ));
        };
        Ok(of_cause(letters, cause)
            .into_iter()
            .filter(|l| {
                if !self.jobs.is_empty() {
                    self.jobs.contains(&(l.db.clone(), l.id))
                } else if self.counted.is_some() {
                    self.upto.get(&l.db).is_some_and(|upto| l.id <= *upto)
                } else {
                    true
                }
            })
            .collect())
    }
}

/// The form of a confirmation (confirm.html).
#[derive(Serialize)]
struct Confirmation {
    action: String,
    fields: Vec<(&'static str, String)>,
    button: String,
}

fn letters_word(n: usize) -> String {
    format!("{n} dead letter{}", if n == 1 { "" } else { "s" })
}

/// "in db › queue (n), ...".
fn places(picked: &[&Letter]) -> String {
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for letter in picked {
        *counts.entry((&letter.db, &letter.queue)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|((db, queue), n)| format!("{db} › {queue} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn ask(
    app: Arc<App>,
    session: Session,
    scope: Scope,
    act: Act,
    query: Option<String>,
) -> Result<Response, Failure> {
    refuse_read_only(&app)?;
    let asked = Asked::parse(query.unwrap_or_default().as_bytes())?;
    let read = dead_letters::read(&app, &scope).await?;
    let picked = asked.pick(&read.letters)?;
    let cause_id = asked.cause.clone().unwrap_or_default();
    let text = group(&read.letters)
        .into_iter()
        .find(|c| c.id == cause_id)
        .map(|c| c.text);
    let base = scope.link();
    let n = picked.len();
    let chosen = !asked.jobs.is_empty();
    let (place, db, _) = heading(&scope);
    let mut refusal = None;
    let mut allowed = Allowed::default();
    let queues: BTreeSet<(&str, &str)> = picked
        .iter()
        .map(|l| (l.db.as_str(), l.queue.as_str()))
        .collect();
    for (db, queue) in queues {
        let may = match act {
            Act::Retry => {
                if allowed.retry(&app, db).await {
                    Ok(())
                } else {
                    Err(format!(
                        "this role may not execute queue_retry in database {db}"
                    ))
                }
            }
            Act::Purge => allowed.purge(&app, db, queue).await,
        };
        if let Err(why) = may {
            refusal = Some(format!("Not offered: {why}."));
            break;
        }
    }
    let which = if chosen {
        format!("the {} you chose", letters_word(n))
    } else {
        format!("the {}", letters_word(n))
    };
    let cause_text = text.as_deref().unwrap_or("(none now)");
    let what = if n == 0 {
        "No dead letter has this cause now (or those chosen were retried or purged since): \
         nothing to do."
            .to_string()
    } else {
        match act {
            Act::Retry => format!(
                "This retries {which}, whose cause is “{cause_text}”, in {}: each goes back to \
                 pending, due now, with its attempts reset (queue_retry, for each job). Counted \
                 now: only these are retried, no dead letter that fails after this, and the \
                 note says how many were.",
                places(&picked)
            ),
            Act::Purge => format!(
                "This deletes {which}, whose cause is “{cause_text}”, in {}, for good: no retry \
                 brings them back and no page shows them again (queue_purge with their ids, \
                 for each queue). Counted now: only these are purged, no dead letter that \
                 fails after this, and the note says how many were.",
                places(&picked)
            ),
        }
    };
    let confirmation = (n > 0 && refusal.is_none()).then(|| {
        let mut fields = vec![
            ("csrf", app.security.csrf_token(&session)),
            ("cause", cause_id.clone()),
            ("counted", n.to_string()),
        ];
        if chosen {
            fields.extend(picked.iter().map(|l| ("job", format!("{}:{}", l.db, l.id))));
        } else {
            let mut upto: BTreeMap<&str, i64> = BTreeMap::new();
            for letter in &picked {
                let newest = upto.entry(&letter.db).or_insert(letter.id);
                *newest = (*newest).max(letter.id);
            }
            fields.extend(
                upto.into_iter()
                    .map(|(db, id)| ("upto", format!("{db}:{id}"))),
            );
        }
        Confirmation {
            action: format!("{base}/{}", act.word()),
            fields,
            button: match act {
                Act::Retry => format!("Retry {}", letters_word(n)),
                Act::Purge => format!("Purge {}", letters_word(n)),
            },
        }
    });
    Ok(page(
        "confirm.html",
        context! {
            title => format!("dead letters of {place}: {}", act.word()),
            heading => match (act, chosen) {
                (Act::Retry, true) => format!("Retry the {} chosen", letters_word(n)),
                (Act::Retry, false) => format!("Retry the {} of one cause", letters_word(n)),
                (Act::Purge, true) => format!("Purge the {} chosen", letters_word(n)),
                (Act::Purge, false) => format!("Purge the {} of one cause", letters_word(n)),
            },
            db => db.unwrap_or_else(|| "every database".into()),
            back => format!("{base}?cause={cause_id}"),
            back_label => "the cause",
            what,
            refusal,
            confirmation,
            keep => "Keep them",
            shown_url => app.shown_url,
        },
    ))
}

pub async fn ask_cluster(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(act): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, Failure> {
    let act = Act::from_path(&act)?;
    ask(app, session, Scope::Cluster, act, query).await
}

pub async fn ask_queue(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue, act)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response, Failure> {
    let act = Act::from_path(&act)?;
    app.databases.require_served(&db).await?;
    ask(app, session, Scope::Queue { db, queue }, act, query).await
}

/// Retries `ids` of `db`, a chunk per statement; how many went back.
async fn retry(app: &App, db: &str, ids: &[i64], done: &mut i64) -> Result<(), Failure> {
    let client = app.databases.served_client(db).await?;
    for chunk in ids.chunks(RETRY_CHUNK) {
        let chunk = chunk.to_vec();
        let n: i64 = client.query_one(RETRY_MANY, &[&chunk]).await?.get(0);
        *done += n;
    }
    Ok(())
}

async fn purge(
    app: &App,
    db: &str,
    queue: &str,
    ids: &[i64],
    done: &mut i64,
) -> Result<(), Failure> {
    let client = app.databases.served_client(db).await?;
    for chunk in ids.chunks(PURGE_CHUNK) {
        let chunk = chunk.to_vec();
        let n: i64 = client.query_one(PURGE_IDS, &[&queue, &chunk]).await?.get(0);
        *done += n;
    }
    Ok(())
}

async fn act(
    app: Arc<App>,
    session: Session,
    scope: Scope,
    act: Act,
    body: Bytes,
) -> Result<Response, Failure> {
    let asked = Asked::parse(&body)?;
    app.security.check_csrf(&session, &asked.csrf)?;
    let Some(counted) = asked.counted else {
        return Err(Failure::BadRequest(format!(
            "a {} of dead letters is confirmed on its own page first, which says how many",
            act.word()
        )));
    };
    let read = dead_letters::read(&app, &scope).await?;
    let picked = asked.pick(&read.letters)?;
    let mut by_queue: BTreeMap<(&str, &str), Vec<i64>> = BTreeMap::new();
    for letter in &picked {
        by_queue
            .entry((&letter.db, &letter.queue))
            .or_default()
            .push(letter.id);
    }
    let mut done = 0;
    let mut result = Ok(());
    match act {
        Act::Retry => {
            let mut by_db: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
            for ((db, _), ids) in by_queue {
                by_db.entry(db).or_default().extend(ids);
            }
            for (db, ids) in by_db {
                result = retry(&app, db, &ids, &mut done).await;
                if result.is_err() {
                    break;
                }
            }
        }
        Act::Purge => {
            for ((db, queue), ids) in by_queue {
                result = purge(&app, db, queue, &ids, &mut done).await;
                if result.is_err() {
                    break;
                }
            }
        }
    }
    if let Err(failure) = result {
        if done == 0 {
            return Err(failure);
        }
        let verb = if act == Act::Retry {
            "retried"
        } else {
            "purged"
        };
        return Err(Failure::Partial {
            done: format!("{verb} {}", letters_word(done as usize)),
            failure: Box::new(failure),
        });
    }
    let word = match act {
        Act::Retry => "retried-many",
        Act::Purge => "purged-many",
    };
    Ok(Redirect::to(&format!(
        "{}?done={word}&n={done}&counted={counted}",
        scope.link()
    ))
    .into_response())
}

pub async fn act_cluster(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path(word): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let word = Act::from_path(&word)?;
    act(app, session, Scope::Cluster, word, body).await
}

pub async fn act_queue(
    State(app): State<Arc<App>>,
    Extension(session): Extension<Session>,
    Path((db, queue, word)): Path<(String, String, String)>,
    body: Bytes,
) -> Result<Response, Failure> {
    let word = Act::from_path(&word)?;
    app.databases.require_served(&db).await?;
    act(app, session, Scope::Queue { db, queue }, word, body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_names_jobs_and_bounds() {
        let asked = Asked::parse(
            b"csrf=ab&cause=c1&counted=3&job=a%3Ab%3A7&job=tenant:9&upto=tenant:12&x=1",
        )
        .unwrap();
        assert_eq!(asked.csrf, "ab");
        assert_eq!(asked.cause.as_deref(), Some("c1"));
        assert_eq!(asked.counted, Some(3));
        let jobs: Vec<(&str, i64)> = asked.jobs.iter().map(|(d, i)| (d.as_str(), *i)).collect();
        assert_eq!(jobs, [("a:b", 7), ("tenant", 9)]);
        assert_eq!(asked.upto["tenant"], 12);
        assert!(Asked::parse(b"job=tenant:x").is_err());
    }
}
