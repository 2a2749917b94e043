//! The worker's side of webhooks: it claims a webhook queue's due jobs (the
//! attempt is counted at that commit), hands the requests to the
//! dispatcher, which runs them off the main thread, and records their
//! outcomes as they come back, a transaction for whatever has come. A
//! queue never has more than its max_in_flight requests open.

use std::time::Duration;

use pgrx::datum::{Interval, Uuid};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;
use pgrx::JsonB;
use url::Url;

use super::delivery::{self, report_stat};
use super::session::{self, Session};
use super::shared::SHARED;
use super::wake;
use crate::catalog;
use crate::db::{self, args};
use crate::errors::QueueError;
use crate::gucs;
use crate::jobs;
use crate::queries;
use crate::rules;
use crate::webhooks::allow;
use crate::webhooks::dispatch::{Dispatcher, Done, Request};
use crate::webhooks::outcome::Outcome;
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
            // (registration checked all of it; a row changed by hand that
            // breaks the rules is an error, not a webhook without headers)
            url: Url::parse(&url).unwrap_or_else(|_| {
                QueueError::WebhookUrl {
                    url: url.split(['?', '#']).next().unwrap_or("").to_string(),
                }
                .raise()
            }),
            headers: rules::check_webhook_headers(&headers.0).unwrap_or_else(|e| e.raise()),
            timeout: Duration::from_micros(catalog::micros(&timeout).max(0) as u64),
            // (never unsigned for a secret that does not decode)
            key: secret.map(|s| {
                sign::key_of(&s)
                    .unwrap_or_else(|problem| QueueError::WebhookSecret { problem }.raise())
            }),
            max_in_flight: row.value::<i32>("max_in_flight").max(1) as usize,
        })
    }
}

/// How long the allow list read from the catalogs is used before it is
/// read again.
const ALLOW_LIST_FOR_US: i64 = crate::time::SECOND_US;

#[derive(Default)]
pub struct Http {
    /// Started at the first webhook queue (its threads cost nothing before).
    dispatcher: Option<Dispatcher>,
    /// queue.webhook_allow as last read, and when.
    allow: Option<(i64, Result<Vec<Url>, String>)>,
}

impl Http {
    /// Whether requests are open: the worker stays until they end.
    pub fn sending(&self) -> bool {
        self.dispatcher
            .as_ref()
            .is_some_and(Dispatcher::any_in_flight)
    }

    /// Claims up to `size` due jobs of webhook queue `queue_id` (`name`),
    /// within its max_in_flight, and sends them. Returns how many.
    pub fn send(
        &mut self,
        session: &Session,
        slot: usize,
        queue_id: i32,
        name: &str,
        hook: &Webhook,
        size: usize,
    ) -> usize {
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
            return 0;
        }
        let dispatcher = self.dispatcher.as_mut().expect("started above");
        let size = size.min(
            hook.max_in_flight
                .saturating_sub(dispatcher.in_flight(queue_id)),
        );
        if size == 0 {
            return 0;
        }
        let now = crate::time::now_us();
        if self
            .allow
            .as_ref()
            .is_none_or(|(at, _)| now - at >= ALLOW_LIST_FOR_US)
        {
            let list = session::transaction(|| session.tables(allow_list));
            self.allow = Some((now, allow::parse(&list)));
        }
        let refusal = match &self.allow.as_ref().expect("read above").1 {
            Ok(entries) if allow::allows(entries, &hook.url) => None,
            Ok(_) => Some(format!(
                "POST {} is not allowed by queue.webhook_allow",
                allow::shown(&hook.url)
            )),
            Err(problem) => Some(problem.clone()),
        };
        let jobs = session::transaction(|| session.tables(|c| claim(c, queue_id, name, size)));
        report_stat();
        if jobs.is_empty() {
            return 0;
        }
        let count = jobs.len();
        if let Some(message) = refusal {
            // an attempt that sends nothing
            let failed = jobs
                .into_iter()
                .map(|(id, lease, _)| Done {
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
            record(session, slot, failed);
            return count;
        }
        // SAFETY: MyDatabaseId is set when the worker connects to its
        // database and never changes after.
        let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
        for (id, lease, body) in jobs {
            dispatcher.send(Request {
                queue_id,
                id,
                lease,
                url: hook.url.clone(),
                headers: hook.headers.clone(),
                body,
                webhook_id: format!("msg_{database}_{id}"),
                key: hook.key.clone(),
                timeout: hook.timeout,
            });
        }
        count
    }

    /// The worker leaves with requests still open (it is asked for its slot
    /// and they have had their grace): their jobs are ready again, their
    /// attempts as they are, to be sent again by the next worker, with the
    /// same webhook-id (the endpoint may have had them). Outcomes that came
    /// back meanwhile are recorded first.
    pub fn abandon(&mut self, session: &Session, slot: usize) {
        self.collect(session, slot);
        let Some(dispatcher) = self.dispatcher.as_mut() else {
            return;
        };
        let open = dispatcher.abandon();
        if open.is_empty() {
            return;
        }
        session::transaction(|| {
            session.tables(|client| {
                let (ids, leases): (Vec<i64>, Vec<Uuid>) = open.into_iter().unzip();
                db::run(
                    client,
                    &queries::RELEASE_HELD,
                    args![ids = ids, leases = leases],
                );
            })
        });
        report_stat();
    }

    /// Records the outcomes that have come back; returns how many.
    pub fn collect(&mut self, session: &Session, slot: usize) -> usize {
        let Some(dispatcher) = self.dispatcher.as_mut() else {
            return 0;
        };
        let done = dispatcher.finished();
        let count = done.len();
        if count > 0 {
            record(session, slot, done);
        }
        count
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

/// Claims up to `size` due jobs of the queue and reads the body of each
/// request: the job object a SQL sender gets. (id, lease, body) each.
fn claim(
    client: &mut SpiClient<'_>,
    queue_id: i32,
    name: &str,
    size: usize,
) -> Vec<(i64, Uuid, Vec<u8>)> {
    let Some((found, claimed)) = delivery::claim_for_worker(client, queue_id, name, size) else {
        return Vec::new();
    };
    if claimed.is_empty() {
        return Vec::new();
    }
    let (ids, leases): (Vec<i64>, Vec<Uuid>) = claimed.iter().map(|j| (j.id, j.lease)).unzip();
    let lease_of: std::collections::HashMap<i64, Uuid> =
        claimed.iter().map(|j| (j.id, j.lease)).collect();
    db::run(
        client,
        &queries::DELIVER_LOCK,
        args![
            ids = ids,
            leases = leases,
            queue = found.name.as_str(),
            max_attempts = found.max_attempts,
        ],
    )
    .map(|r| {
        let id: i64 = r.value("id");
        let job: JsonB = r.value("job");
        let body = serde_json::to_vec(&job.0).expect("a JSON value serializes");
        (id, lease_of[&id], body)
    })
    .collect()
}

/// The outcomes of requests, in one transaction: a 2xx completes its job
/// (unless it was cancelled or purged meanwhile: the outcome is dropped),
/// a failure follows the queue's retry policy, a Retry-After capped by its
/// max_retry_delay.
fn record(session: &Session, slot: usize, done: Vec<Done>) {
    let delivered: Vec<&Done> = done
        .iter()
        .filter(|d| d.outcome == Outcome::Delivered)
        .collect();
    let mut last_error = None;
    let mut failures = 0;
    session::transaction(|| {
        session.tables(|client| {
            if !delivered.is_empty() {
                let ids = delivered.iter().map(|d| d.id).collect();
                let leases = delivered.iter().map(|d| d.lease).collect();
                jobs::complete(client, ids, leases);
            }
            for d in &done {
                if let Outcome::Failed {
                    message,
                    permanent,
                    retry_after_us,
                } = &d.outcome
                {
                    failures += 1;
                    last_error = Some(message.clone());
                    let failed = jobs::fail(
                        client,
                        d.id,
                        d.lease,
                        message,
                        *retry_after_us,
                        *permanent,
                        true,
                    );
                    wake::on_commit(failed.is_some_and(|f| f.wake));
                }
            }
        })
    });
    report_stat();
    delivery::note_outcomes(slot, delivered.len(), failures, last_error);
}
