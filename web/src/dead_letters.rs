//! The dead letters of one queue or of the whole cluster, grouped by
//! cause (cause.rs): what the triage pages show and what their actions
//! act on. Each database gives its newest READ dead letters in one
//! statement; grouping is done here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::cause::{cause, cause_id};
use crate::failure::Failure;
use crate::render::segment;
use crate::state::App;
use crate::stats::age;
use crate::urls::shown_in;

const DEAD_LETTERS: &str = include_str!("../queries/dead_letters.sql");

/// Dead letters read from a database (of a queue) at most: the newest.
pub const READ: i64 = 100_000;

/// Where the dead letters are looked at: a queue, or every database.
#[derive(Clone)]
pub enum Scope {
    Cluster,
    Queue { db: String, queue: String },
}

impl Scope {
    /// The triage page's address.
    pub fn link(&self) -> String {
        match self {
            Scope::Cluster => "/dead".into(),
            Scope::Queue { db, queue } => {
                format!("/db/{}/queue/{}/dead", segment(db), segment(queue))
            }
        }
    }
}

/// One dead letter, as far as grouping needs it.
pub struct Letter {
    pub db: String,
    pub queue: String,
    pub id: i64,
    pub error: Option<String>,
    /// Seconds since it failed.
    pub ago: f64,
    /// Its cause's id and text (set by `with_causes`).
    pub cause: Arc<(String, String)>,
}

/// A database (or queue) of which only the newest READ were read.
#[derive(Serialize)]
pub struct Cut {
    pub db: String,
}

pub struct Read {
    pub letters: Vec<Letter>,
    pub cut: Vec<Cut>,
    /// The databases that refused, with what they said.
    pub refusals: Vec<(String, String)>,
}

async fn read_db(app: &App, db: &str, queue: Option<&str>) -> Result<Vec<Letter>, Failure> {
    let client = app.databases.served_client(db).await?;
    let rows = client.query(DEAD_LETTERS, &[&queue, &READ]).await?;
    Ok(rows
        .iter()
        .map(|row| Letter {
            db: db.to_string(),
            queue: row.get("queue"),
            id: row.get("id"),
            error: row.get("last_error"),
            ago: row.get::<_, Option<f64>>("ago_secs").unwrap_or(0.0),
            cause: Arc::default(),
        })
        .collect())
}

/// The newest dead letters of `scope`: of each database at once.
pub async fn read(app: &App, scope: &Scope) -> Result<Read, Failure> {
    let targets: Vec<(String, Option<&str>)> = match scope {
        Scope::Cluster => app
            .databases
            .served()
            .await?
            .into_iter()
            .map(|db| (db, None))
            .collect(),
        Scope::Queue { db, queue } => vec![(db.clone(), Some(queue.as_str()))],
    };
    let reads = targets.iter().map(|(db, queue)| read_db(app, db, *queue));
    let results = futures_util::future::join_all(reads).await;
    let mut read = Read {
        letters: Vec::new(),
        cut: Vec::new(),
        refusals: Vec::new(),
    };
    for ((db, _), result) in targets.into_iter().zip(results) {
        match result {
            Ok(letters) => {
                if letters.len() as i64 == READ {
                    read.cut.push(Cut { db: db.clone() });
                }
                read.letters.extend(letters);
            }
            // (a queue's own page shows its refusal as the page's)
            Err(e) if matches!(scope, Scope::Queue { .. }) => return Err(e),
            Err(e) => read.refusals.push((db, e.summary())),
        }
    }
    // (a tenth of a second of CPU at 100,000: off the threads that serve
    // requests)
    let mut letters = std::mem::take(&mut read.letters);
    read.letters = tokio::task::spawn_blocking(move || {
        with_causes(&mut letters);
        letters
    })
    .await
    .expect("grouping by cause does not panic");
    Ok(read)
}

/// Sets each letter's cause: each distinct error is put through the rules
/// once.
pub fn with_causes(letters: &mut [Letter]) {
    let causes: Vec<Arc<(String, String)>> = {
        let mut known: HashMap<Option<&str>, Arc<(String, String)>> = HashMap::new();
        letters
            .iter()
            .map(|letter| {
                known
                    .entry(letter.error.as_deref())
                    .or_insert_with(|| {
                        let text = match letter.error.as_deref() {
                            Some(error) => cause(error),
                            None => "(no error recorded)".to_string(),
                        };
                        Arc::new((cause_id(&text), text))
                    })
                    .clone()
            })
            .collect()
    };
    for (letter, cause) in letters.iter_mut().zip(causes) {
        letter.cause = cause;
    }
}

/// A queue where a cause's dead letters are, and how many.
#[derive(Serialize)]
pub struct Place {
    pub db: String,
    pub queue: String,
    pub count: i64,
    pub link: String,
}

/// The dead letters of one cause.
#[derive(Serialize)]
pub struct Cause {
    pub id: String,
    pub text: String,
    pub count: i64,
    pub first_seen: String,
    pub last_seen: String,
    pub sample_db: String,
    pub sample_id: i64,
    pub sample_link: String,
    pub sample_error: String,
    pub places: Vec<Place>,
}

/// `letters` grouped by cause, the most frequent first.
pub fn group(letters: &[Letter]) -> Vec<Cause> {
    struct Acc<'a> {
        text: String,
        count: i64,
        oldest: f64,
        newest: &'a Letter,
        places: BTreeMap<(&'a str, &'a str), i64>,
    }
    let mut by_id: HashMap<String, Acc> = HashMap::new();
    for letter in letters {
        let (id, text) = &*letter.cause;
        let acc = by_id.entry(id.clone()).or_insert_with(|| Acc {
            text: text.clone(),
            count: 0,
            oldest: letter.ago,
            newest: letter,
            places: BTreeMap::new(),
        });
        acc.count += 1;
        acc.oldest = acc.oldest.max(letter.ago);
        if letter.ago < acc.newest.ago {
            acc.newest = letter;
        }
        *acc.places
            .entry((letter.db.as_str(), letter.queue.as_str()))
            .or_default() += 1;
    }
    let mut causes: Vec<Cause> = by_id
        .into_iter()
        .map(|(id, acc)| Cause {
            id,
            text: shown_in(&acc.text),
            count: acc.count,
            first_seen: age(acc.oldest),
            last_seen: age(acc.newest.ago),
            sample_db: acc.newest.db.clone(),
            sample_id: acc.newest.id,
            sample_link: format!("/db/{}/job/{}", segment(&acc.newest.db), acc.newest.id),
            sample_error: acc
                .newest
                .error
                .as_deref()
                .map(shown_in)
                .unwrap_or_default(),
            places: acc
                .places
                .into_iter()
                .map(|((db, queue), count)| Place {
                    db: db.to_string(),
                    queue: queue.to_string(),
                    count,
                    link: format!("/db/{}/queue/{}/dead", segment(db), segment(queue)),
                })
                .collect(),
        })
        .collect();
    causes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.text.cmp(&b.text)));
    causes
}

/// The letters of cause `id`, newest first (as read).
pub fn of_cause<'a>(letters: &'a [Letter], id: &str) -> Vec<&'a Letter> {
    letters.iter().filter(|l| l.cause.0 == id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(db: &str, queue: &str, id: i64, error: &str, ago: f64) -> Letter {
        Letter {
            db: db.into(),
            queue: queue.into(),
            id,
            error: Some(error.into()),
            ago,
            cause: Arc::default(),
        }
    }

    #[test]
    fn letters_are_grouped_by_cause_with_counts_times_and_places() {
        let mut letters = [
            letter("a", "mail", 9, "SMTP 550: no mailbox bob@example.com", 5.0),
            letter("a", "mail", 8, "timeout after 30 s", 50.0),
            letter(
                "b",
                "hooks",
                7,
                "SMTP 550: no mailbox eve@example.org",
                70.0,
            ),
            letter(
                "a",
                "mail",
                6,
                "SMTP 550: no mailbox al@example.net",
                3600.0,
            ),
        ];
        with_causes(&mut letters);
        let causes = group(&letters);
        assert_eq!(causes.len(), 2);
        let smtp = &causes[0];
        assert_eq!(smtp.text, "SMTP <n>: no mailbox <email>");
        assert_eq!(smtp.count, 3);
        assert_eq!(
            (smtp.first_seen.as_str(), smtp.last_seen.as_str()),
            ("1 h 0 min", "5 s")
        );
        assert_eq!((smtp.sample_db.as_str(), smtp.sample_id), ("a", 9));
        let places: Vec<(&str, &str, i64)> = smtp
            .places
            .iter()
            .map(|p| (p.db.as_str(), p.queue.as_str(), p.count))
            .collect();
        assert_eq!(places, [("a", "mail", 2), ("b", "hooks", 1)]);
        let ids: Vec<i64> = of_cause(&letters, &smtp.id).iter().map(|l| l.id).collect();
        assert_eq!(ids, [9, 7, 6]);
        assert_eq!(causes[1].count, 1);
    }
}
