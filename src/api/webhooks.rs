//! Registering an HTTP endpoint that the background worker POSTs a queue's
//! jobs to (webhooks/).

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::JsonB;

use super::duration;
use crate::announce;
use crate::db::{self, args};
use crate::errors::{self, required, OrRaise, QueueError};
use crate::gucs;
use crate::queries;
use crate::rules;
use crate::webhooks::{allow, sign};
use crate::worker::shared;

#[pg_extern(volatile, parallel_unsafe)]
fn queue_register_webhook(
    queue: Option<&str>,
    url: Option<&str>,
    headers: default!(Option<JsonB>, "NULL"),
    timeout: default!(Option<Interval>, "'30 seconds'"),
    secret: default!(Option<&str>, "NULL"),
    max_in_flight: default!(Option<i32>, 16),
) {
    let name = required(queue, "queue");
    let url = required(url, "url");
    let timeout = required(timeout, "timeout");
    let max_in_flight = required(max_in_flight, "max_in_flight");
    rules::check_name(name).or_raise();
    let target = check_url(url).or_raise();
    let headers = headers.map_or(serde_json::json!({}), |h| h.0);
    rules::check_webhook_headers(&headers).or_raise();
    rules::check_webhook_timeout(&duration(&timeout)).or_raise();
    if let Some(secret) = secret {
        sign::key_of(secret)
            .map_err(|problem| QueueError::WebhookSecret { problem })
            .or_raise();
    }
    let max_in_flight = rules::check_max_in_flight(max_in_flight).or_raise();
    let allowed = allow::parse(&gucs::text(&gucs::WEBHOOK_ALLOW))
        .map_err(|problem| QueueError::WebhookAllowList { problem })
        .or_raise();
    if !allow::allows(&allowed, &target) {
        QueueError::WebhookNotAllowed {
            url: allow::shown(&target),
        }
        .raise();
    }
    let caller = db::calling_role();
    super::queues::with_owned_queue(name, "register a webhook for", |client, queue| {
        db::run(
            client,
            &queries::SET_WEBHOOK,
            args![
                queue_id = queue.id,
                sender = format!("POST {}", allow::shown(&target)),
                role = caller,
                max_in_flight = max_in_flight,
                url = target.as_str(),
                headers = JsonB(headers),
                timeout = timeout,
                secret = secret,
            ],
        );
        // Its waiters learn that it is no longer pulled.
        announce::queue_changed(queue.id, true);
    });
    if !shared::available() {
        errors::warn_without_preload();
    }
}

/// An absolute http(s) URL with a host and without user information.
fn check_url(url: &str) -> Result<url::Url, QueueError> {
    let parsed = url::Url::parse(url).ok();
    match parsed {
        Some(u)
            if (u.scheme() == "http" || u.scheme() == "https")
                && u.host().is_some()
                && u.username().is_empty()
                && u.password().is_none() =>
        {
            Ok(u)
        }
        // Shown without a query or user information: either may carry a credential.
        Some(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            Err(QueueError::WebhookUrl {
                url: allow::shown(&u),
            })
        }
        None => Err(QueueError::WebhookUrl {
            url: url.split(['?', '#']).next().unwrap_or("").to_string(),
        }),
    }
}

/// A registered URL as views show it (allow::shown), for the update script
/// from 0.3.0, which shows the webhooks registered before so too; not part
/// of the SQL API (no SQL is made for it).
#[pg_extern(sql = false, immutable, parallel_safe)]
fn queue_webhook_shown(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| String::new(), |u| allow::shown(&u))
}
