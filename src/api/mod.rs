//! The SQL functions of the API, one file per group. Each one checks its
//! arguments, then runs its statements as the extension owner.

mod await_job;
mod consume;
mod groups;
pub mod metrics;
mod procedure;
mod produce;
mod queues;
mod repair;
mod schedules;
mod senders;
mod upkeep;
mod wait;
mod webhooks;
pub mod workers;

use pgrx::datum::Interval;

use crate::catalog::micros;
use crate::errors::QueueError;
use crate::jsonb::Jsonb;
use crate::rules::Duration;

/// An interval argument as the rules see it.
fn duration(value: &Interval) -> Duration {
    Duration {
        micros: micros(value),
        text: value.to_string(),
    }
}

/// A job's headers: a JSON object, or 22023.
fn check_headers(headers: Option<Jsonb>) {
    if let Some(h) = headers {
        let kind = h.type_name();
        if kind != "object" {
            QueueError::NotAnObject {
                argument: "headers",
                value: kind,
            }
            .raise();
        }
    }
}
