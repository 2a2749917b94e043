//! The worker's side of webhooks: it claims a webhook queue's due jobs (the
//! attempt is counted at that commit), hands the requests to the
//! dispatcher, which runs them off the main thread, and records their
//! outcomes as they come back. Recording what came back and claiming what
//! the queue has room for share one transaction, so that a busy queue costs
//! one commit per refill. A queue never has more than its max_in_flight
//! requests open.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::time::Duration;

use pgrx::datum::{Interval, Uuid};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;
use pgrx::JsonB;
use url::Url;

use super::batches::{self, Tally};
use super::shared::SHARED;
use super::subxact;
use crate::announce;
use crate::catalog;
use crate::db::{self, args};
use crate::ends;
use crate::errors::QueueError;
use crate::gucs;
use crate::jobs;
use crate::jsonb::Jsonb;
use crate::queries;
use crate::rules;
use crate::spans;
use crate::webhooks::allow;
use crate::webhooks::dispatch::{Dispatcher, Done, Request};
use crate::webhooks::outcome::{Outcome, Reply};
use crate::webhooks::sign;

/// A webhook as registered (queue_webhooks).
pub struct Webhook {
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub key: Option<Vec<u8>>,
    pub max_in_flight: usize,
}

impl Webhook {
    /// The webhook of a sender_queues.sql row, if the queue has one.
    pub fn of_row(row: &db::Row<'_>) -> Option<Webhook> {
        let url: String = row.get("url")?;
        let headers: JsonB = row.value("headers");
        let timeout: Interval = row.value("timeout");
        let secret: Option<String> = row.get("secret");
        Some(Webhook {
            // Registration checked all of it; a row changed by hand that
            // breaks the rules is an error, not a webhook without headers.
            url: Url::parse(&url).unwrap_or_else(|_| {
                QueueError::WebhookUrl {
                    url: url.split(['?', '#']).next().unwrap_or("").to_string(),
                }
                .raise()
            }),
            headers: rules::check_webhook_headers(&headers.0).unwrap_or_else(|e| e.raise()),
            timeout: Duration::from_micros(catalog::micros(&timeout).max(0) as u64),
            // A secret that does not decode is an error, never an unsigned request.
            key: secret.map(|s| {
                sign::key_of(&s)
                    .unwrap_or_else(|problem| QueueError::WebhookSecret { problem }.raise())
            }),
            max_in_flight: row.value::<i32>("webhook_max_in_flight").max(1) as usize,
        })
    }
}

/// How long the allow list read from the catalogs is used before it is
/// read again.
const ALLOW_LIST_FOR_US: i64 = crate::time::SECOND_US;

/// How long the first outcome that came back waits for others to share
/// its transaction (unless half of the open requests have come back).
const GATHER: Duration = Duration::from_millis(2);

/// Jobs of one webhook queue claimed in a transaction: the requests to
/// start once it commits, and what it recorded (attempts refused by the
/// allow list fail in the claim's transaction, sending nothing).
pub struct Batch {
    pub claimed: usize,
    pub requests: Vec<Request>,
    pub tally: Tally,
}

impl Batch {
    fn empty() -> Batch {
        Batch {
            claimed: 0,
            requests: Vec::new(),
            tally: Tally::default(),
        }
    }
}

#[derive(Default)]
pub struct Http {
    /// Started at the first webhook queue (its threads cost nothing before).
    dispatcher: Option<Dispatcher>,
    /// queue.webhook_allow as last read, and when.
    allow: Option<(i64, Result<Vec<Url>, String>)>,
    /// The attempts of requests open, by job and lease, for their spans.
    attempts: HashMap<(i64, Uuid), spans::Attempt>,
}

impl Http {
    /// Whether requests are open: the worker stays until they end.
    pub fn sending(&self) -> bool {
        self.dispatcher
            .as_ref()
            .is_some_and(Dispatcher::any_in_flight)
    }

    /// The webhook queues with requests open, or whose outcomes are not
    /// recorded yet.
    pub fn queues_in_flight(&self) -> Vec<i32> {
        self.dispatcher
            .as_ref()
            .map_or_else(Vec::new, Dispatcher::queues_in_flight)
    }

    /// Whether outcomes have come back that are not recorded yet.
    pub fn any_answered(&mut self) -> bool {
        self.dispatcher
            .as_mut()
            .is_some_and(Dispatcher::any_answered)
    }

    /// When the outcomes that came back are worth a transaction (zero: at
    /// once); None: none came back.
    pub fn record_in(&mut self) -> Option<Duration> {
        self.dispatcher.as_mut()?.record_in(GATHER)
    }

    /// A descriptor that becomes readable when an outcome comes back.
    pub fn answered_fd(&self) -> Option<RawFd> {
        self.dispatcher.as_ref().map(Dispatcher::answered_fd)
    }

    /// Records, in the caller's transaction, the outcomes that have come
    /// back.
    pub fn record(&mut self, client: &mut SpiClient<'_>) -> Tally {
        match self.dispatcher.as_mut() {
            Some(dispatcher) => record(client, dispatcher.finished(), &mut self.attempts),
            None => Tally::default(),
        }
    }

    /// Claims, in the caller's transaction, up to `size` due jobs of
    /// webhook queue `queue_id` (`name`), within its max_in_flight. Their
    /// requests are for `start`, once the transaction has committed.
    pub fn claim(
        &mut self,
        client: &mut SpiClient<'_>,
        slot: usize,
        queue_id: i32,
        name: &str,
        hook: &Webhook,
        size: usize,
    ) -> Batch {
        let ca_file = gucs::text(&gucs::WEBHOOK_CA_FILE);
        let started = match &mut self.dispatcher {
            Some(d) => d.use_ca_file(&ca_file),
            None => Dispatcher::new(&ca_file).map(|d| {
                self.dispatcher = Some(d);
            }),
        };
        if let Err(problem) = started {
            // nothing is claimed: the jobs wait, and the worker says why
            SHARED.exclusive().workers[slot].set_last_error(&problem);
            return Batch::empty();
        }
        let dispatcher = self.dispatcher.as_mut().expect("started above");
        let size = size.min(
            hook.max_in_flight
                .saturating_sub(dispatcher.in_flight(queue_id)),
        );
        if size == 0 {
            return Batch::empty();
        }
        let now = crate::time::now_us();
        if self
            .allow
            .as_ref()
            .is_none_or(|(at, _)| now - at >= ALLOW_LIST_FOR_US)
        {
            self.allow = Some((now, allow::parse(&allow_list(client))));
        }
        let refusal = match &self.allow.as_ref().expect("read above").1 {
            Ok(entries) if allow::allows(entries, &hook.url) => None,
            Ok(_) => Some(format!(
                "POST {} is not allowed by queue.webhook_allow",
                allow::shown(&hook.url)
            )),
            Err(problem) => Some(problem.clone()),
        };
        let jobs = claim(client, queue_id, name, size);
        let claimed = jobs.len();
        for job in &jobs {
            self.attempts
                .insert((job.id, job.lease), job.attempt.clone());
        }
        if let Some(message) = refusal {
            // an attempt that sends nothing
            let failed = jobs
                .into_iter()
                .map(|Claimed { id, lease, .. }| Done {
                    queue_id,
                    id,
                    lease,
                    outcome: Outcome::Failed {
                        message: message.clone(),
                        permanent: false,
                        retry_after_us: None,
                    },
                })
                .collect();
            return Batch {
                claimed,
                requests: Vec::new(),
                tally: record(client, failed, &mut self.attempts),
            };
        }
        let requests = jobs
            .into_iter()
            .map(|job| {
                // The headers carry the job's trace on, through this attempt's span.
                let mut headers = hook.headers.clone();
                headers.extend(job.attempt.headers());
                Request {
                    queue_id,
                    id: job.id,
                    lease: job.lease,
                    url: hook.url.clone(),
                    headers,
                    body: job.body,
                    webhook_id: job.webhook_id,
                    key: hook.key.clone(),
                    timeout: hook.timeout,
                }
            })
            .collect();
        Batch {
            claimed,
            requests,
            tally: Tally::default(),
        }
    }

    /// Sends the requests of a batch whose claim has committed.
    pub fn start(&mut self, requests: Vec<Request>) {
        if let Some(dispatcher) = self.dispatcher.as_mut() {
            for request in requests {
                dispatcher.send(request);
            }
        }
    }

    /// The worker leaves with requests still open (it is asked for its slot
    /// and they have had their grace, or it is stopped): in the caller's
    /// transaction, the outcomes that came back are recorded, and the jobs
    /// of the open ones are ready again, their attempts as they are, to be
    /// sent again by the next worker with the same webhook-id (the endpoint
    /// may have had them).
    pub fn abandon(&mut self, client: &mut SpiClient<'_>) -> Tally {
        let tally = self.record(client);
        // Their attempts have no outcome, so no span.
        self.attempts.clear();
        if let Some(dispatcher) = self.dispatcher.as_mut() {
            let (ids, leases): (Vec<i64>, Vec<Uuid>) = dispatcher.abandon().into_iter().unzip();
            if !ids.is_empty() {
                db::run(
                    client,
                    &queries::RELEASE_HELD,
                    args![ids = ids, leases = leases],
                );
            }
        }
        tally
    }
}

/// queue.webhook_allow as it stands now for this database.
fn allow_list(client: &mut SpiClient<'_>) -> String {
    // SAFETY: MyDatabaseId is set when the worker connects to its database
    // and never changes after.
    let database = unsafe { pg_sys::MyDatabaseId };
    db::run(client, &queries::WEBHOOK_ALLOW, args![database = database])
        .first()
        .expect("one row")
        .value("allow")
}

/// A job claimed for a request.
struct Claimed {
    id: i64,
    lease: Uuid,
    /// The request's body: the job object a SQL sender gets.
    body: Vec<u8>,
    webhook_id: String,
    /// The attempt, in the job's trace.
    attempt: spans::Attempt,
}

/// Claims up to `size` due jobs of the queue, each with the body of its
/// request and its webhook-id.
fn claim(client: &mut SpiClient<'_>, queue_id: i32, name: &str, size: usize) -> Vec<Claimed> {
    let Some(queue) = batches::queue_for_worker(client, queue_id, name) else {
        return Vec::new();
    };
    batches::claim_for_worker(client, &queue, size, true)
        .jobs
        .into_iter()
        .map(|job| Claimed {
            id: job.id,
            lease: job.lease,
            attempt: spans::Attempt::begin(name, job.id, job.attempt, job.headers),
            body: job.body.expect("a claim with bodies").into_bytes(),
            webhook_id: job.webhook_id.expect("a claim with webhook-ids"),
        })
        .collect()
}

/// A delivered request's reply as its job's result (outcome.rs says how),
/// a jsonb made in a subtransaction of its own: a body that PostgreSQL's
/// jsonb refuses after all (nesting too deep for its stack, say) is kept as
/// a string instead, rather than failing the batch.
fn result_of(reply: &Reply) -> Jsonb {
    let jsonb = |text: String| {
        let text = std::ffi::CString::new(text).expect("JSON without NUL");
        // SAFETY: jsonb_in takes one cstring, NUL-terminated, live for the
        // call; it returns a jsonb datum in the current memory context (the
        // transaction's: subxact::run gives back the caller's), or raises.
        unsafe {
            Jsonb::copy_of(
                pgrx::direct_function_call_as_datum(
                    pg_sys::jsonb_in,
                    &[Some(pg_sys::Datum::from(text.as_ptr()))],
                )
                .expect("jsonb_in returns a value"),
            )
        }
    };
    subxact::run(|| jsonb(reply.result_json())).unwrap_or_else(|_| {
        let text = Reply {
            status: reply.status,
            body: Vec::new(),
            truncated: false,
        };
        let body = serde_json::to_string(&String::from_utf8_lossy(&reply.body).replace('\0', ""))
            .expect("a string encodes");
        jsonb(
            text.result_json()
                .replace(r#""body": """#, &format!(r#""body": {body}"#)),
        )
    })
}

/// The outcomes of requests, in the caller's transaction: a 2xx completes
/// its job (unless it was cancelled or purged meanwhile: the outcome is
/// dropped), a failure follows the queue's retry policy, a Retry-After
/// capped by its max_retry_delay.
fn record(
    client: &mut SpiClient<'_>,
    done: Vec<Done>,
    attempts: &mut HashMap<(i64, Uuid), spans::Attempt>,
) -> Tally {
    for d in &done {
        if let Some(attempt) = attempts.remove(&(d.id, d.lease)) {
            match &d.outcome {
                Outcome::Delivered(_) => attempt.ended(ends::Outcome::Succeeded, None),
                Outcome::Failed { message, .. } => {
                    attempt.ended(ends::Outcome::Failed, Some(message))
                }
            }
        }
    }
    let mut tally = Tally::default();
    let mut ids = Vec::new();
    let mut leases = Vec::new();
    let mut results = Vec::new();
    for d in &done {
        if let Outcome::Delivered(reply) = &d.outcome {
            ids.push(d.id);
            leases.push(d.lease);
            results.push(Some(result_of(reply)));
        }
    }
    tally.delivered = ids.len();
    if !ids.is_empty() {
        jobs::complete(client, ids, leases, Some(results));
    }
    for d in &done {
        if let Outcome::Failed {
            message,
            permanent,
            retry_after_us,
        } = &d.outcome
        {
            tally.failures += 1;
            tally.last_error = Some(message.clone());
            let failed = jobs::fail(
                client,
                d.id,
                d.lease,
                message,
                *retry_after_us,
                *permanent,
                true,
            );
            if let Some(failed) = &failed {
                announce::attempt_failed(failed);
            }
        }
    }
    tally
}
