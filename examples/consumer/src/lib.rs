//! A consumer loop for the `queue` extension, over one plain connection.
//!
//! Each round claims a batch (the claim commits at once, so the connection
//! is free while the jobs run), hands each job to your function, and reports
//! the outcome: `queue_complete`, or `queue_fail` with a retry or for good.
//! Long work keeps its lease with [`Lease::extend`]. A job whose worker dies
//! comes back when its lease expires, so the work must tolerate running
//! twice (or record its effect with the completion, in one transaction).
//!
//! ```no_run
//! use queue_consumer_example::{Consumer, Outcome};
//! let mut client = postgres::Client::connect("host=/tmp user=postgres", postgres::NoTls)?;
//! let consumer = Consumer::new("emails", "mailer-1");
//! consumer.run_once(&mut client, |job, _lease| {
//!     println!("sending {}", job.payload);
//!     Outcome::Done
//! })?;
//! # Ok::<(), postgres::Error>(())
//! ```

use std::time::Duration;

use postgres::Client;

/// A claimed job. `payload` is the job's JSON as text: parse it with the
/// JSON library of your choice.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub payload: String,
    pub attempt: i32,
    pub max_attempts: i32,
}

/// What became of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It worked: the job is `succeeded`.
    Done,
    /// It failed this time: the queue's backoff policy (or `retry_in`)
    /// schedules the next attempt, unless none is left.
    Retry {
        error: String,
        retry_in: Option<Duration>,
    },
    /// It can never work: the job goes straight to `failed`.
    Fail { error: String },
}

/// The lease of the job being worked on, to keep it while the work runs.
pub struct Lease<'a> {
    client: &'a mut Client,
    id: i64,
    token: String,
}

impl Lease<'_> {
    /// Pushes the lease's expiry to `by` from now. False: the lease is lost
    /// (it expired and someone else claimed the job, or it was cancelled);
    /// stop working on the job.
    pub fn extend(&mut self, by: Duration) -> Result<bool, postgres::Error> {
        let row = self.client.query_one(
            "SELECT queue_extend($1, $2::text::uuid, make_interval(secs => $3)) IS NOT NULL",
            &[&self.id, &self.token, &by.as_secs_f64()],
        )?;
        Ok(row.get(0))
    }
}

/// How a consumer claims: which queue, under which worker name, how many
/// jobs at a time, and for how long each.
#[derive(Debug, Clone)]
pub struct Consumer {
    pub queue: String,
    pub worker: String,
    pub batch: i32,
    /// The lease of each claim; `None` takes the queue's.
    pub lease: Option<Duration>,
    /// How long to wait for a job when a claim comes back empty
    /// (`queue_wait`: a commit that makes a job due ends the wait at once).
    pub idle: Duration,
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Round {
    pub claimed: usize,
    pub completed: usize,
    pub retried: usize,
    pub failed: usize,
    /// Outcomes that came too late: the lease was lost meanwhile.
    pub lost: usize,
}

impl Consumer {
    pub fn new(queue: &str, worker: &str) -> Consumer {
        Consumer {
            queue: queue.to_string(),
            worker: worker.to_string(),
            batch: 10,
            lease: None,
            idle: Duration::from_secs(5),
        }
    }

    /// Claims one batch and works through it.
    pub fn run_once(
        &self,
        client: &mut Client,
        mut work: impl FnMut(&Job, &mut Lease<'_>) -> Outcome,
    ) -> Result<Round, postgres::Error> {
        let lease_secs = self.lease.map(|l| l.as_secs_f64());
        let rows = client.query(
            "SELECT id, payload::text, attempt, max_attempts, lease::text
               FROM queue_claim($1, $2, $3,
                                CASE WHEN $4::float8 IS NOT NULL THEN make_interval(secs => $4) END)",
            &[&self.queue, &self.worker, &self.batch, &lease_secs],
        )?;
        let mut round = Round {
            claimed: rows.len(),
            ..Round::default()
        };
        for row in rows {
            let job = Job {
                id: row.get(0),
                payload: row.get(1),
                attempt: row.get(2),
                max_attempts: row.get(3),
            };
            let token: String = row.get(4);
            let mut lease = Lease {
                client: &mut *client,
                id: job.id,
                token: token.clone(),
            };
            let outcome = work(&job, &mut lease);
            let held = match &outcome {
                Outcome::Done => client
                    .query_one(
                        "SELECT queue_complete($1, $2::text::uuid)",
                        &[&job.id, &token],
                    )?
                    .get::<_, bool>(0),
                Outcome::Retry { error, retry_in } => {
                    let secs = retry_in.map(|d| d.as_secs_f64());
                    let status: Option<String> = client
                        .query_one(
                            "SELECT queue_fail($1, $2::text::uuid, $3,
                                    CASE WHEN $4::float8 IS NOT NULL THEN make_interval(secs => $4) END)",
                            &[&job.id, &token, error, &secs],
                        )?
                        .get(0);
                    match status.as_deref() {
                        Some("pending") => round.retried += 1,
                        Some(_) => round.failed += 1,
                        None => {}
                    }
                    status.is_some()
                }
                Outcome::Fail { error } => {
                    let status: Option<String> = client
                        .query_one(
                            "SELECT queue_fail($1, $2::text::uuid, $3, permanent => true)",
                            &[&job.id, &token, error],
                        )?
                        .get(0);
                    if status.is_some() {
                        round.failed += 1;
                    }
                    status.is_some()
                }
            };
            if !held {
                round.lost += 1;
            } else if outcome == Outcome::Done {
                round.completed += 1;
            }
        }
        Ok(round)
    }

    /// Runs rounds until `keep_going` says stop; after a round that found no
    /// job, waits up to `idle` for one (`CALL queue_wait`, which holds no
    /// snapshot while it waits). Returns the sum of the rounds.
    pub fn run(
        &self,
        client: &mut Client,
        mut work: impl FnMut(&Job, &mut Lease<'_>) -> Outcome,
        mut keep_going: impl FnMut(&Round) -> bool,
    ) -> Result<Round, postgres::Error> {
        let mut total = Round::default();
        loop {
            let round = self.run_once(client, &mut work)?;
            total.claimed += round.claimed;
            total.completed += round.completed;
            total.retried += round.retried;
            total.failed += round.failed;
            total.lost += round.lost;
            if !keep_going(&round) {
                return Ok(total);
            }
            if round.claimed == 0 {
                let idle = format!("{} milliseconds", self.idle.as_millis());
                client.execute(
                    "CALL queue_wait($1, $2::text::interval, NULL)",
                    &[&self.queue, &idle],
                )?;
            }
        }
    }
}
