//! The filters of a jobs page, from its query string: status, a piece of
//! the last error, a payload key (and its value), group, worker, and a time
//! range on the enqueue or the finish. Empty fields (a form sends them) are
//! no filter. The database reads the times (its time zone for those
//! without one) and refuses what it cannot (22007).

use serde::{Deserialize, Serialize};

use crate::failure::Failure;
use crate::pages::STATUSES;

#[derive(Deserialize, Serialize, Default, Clone)]
pub struct Filter {
    pub status: Option<String>,
    pub error: Option<String>,
    /// A payload key, and the text its value must have (`payload ->> key`).
    pub key: Option<String>,
    pub value: Option<String>,
    pub group: Option<String>,
    pub worker: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// What the range applies to: "finished", else the enqueue.
    pub time: Option<String>,
}

fn set(field: &mut Option<String>) {
    if field.as_deref().is_some_and(|v| v.trim().is_empty()) {
        *field = None;
    }
}

impl Filter {
    /// The filter with its empty fields unset, checked.
    pub fn cleaned(mut self) -> Result<Filter, Failure> {
        for field in [
            &mut self.status,
            &mut self.error,
            &mut self.key,
            &mut self.value,
            &mut self.group,
            &mut self.worker,
            &mut self.from,
            &mut self.to,
            &mut self.time,
        ] {
            set(field);
        }
        if let Some(s) = &self.status {
            if !STATUSES.contains(&s.as_str()) {
                return Err(Failure::BadRequest(format!(
                    "no status {s:?}: one of {}",
                    STATUSES.join(", ")
                )));
            }
        }
        match self.time.as_deref() {
            None | Some("enqueued") => self.time = None,
            Some("finished") => {}
            Some(other) => {
                return Err(Failure::BadRequest(format!(
                    "a time range is on enqueued or finished, not {other:?}"
                )))
            }
        }
        if self.value.is_some() && self.key.is_none() {
            return Err(Failure::BadRequest("a payload value needs its key".into()));
        }
        Ok(self)
    }

    /// Whether the dead letters' own view (queue_failed: payload, last
    /// error, finish) can answer it: failed jobs, no group, worker or
    /// enqueue time.
    pub fn dead_letters_only(&self) -> bool {
        self.status.as_deref() == Some("failed")
            && self.group.is_none()
            && self.worker.is_none()
            && (self.time.as_deref() == Some("finished")
                || (self.from.is_none() && self.to.is_none()))
    }

    /// Whether any filter besides the status is set.
    pub fn narrows(&self) -> bool {
        self.error.is_some()
            || self.key.is_some()
            || self.group.is_some()
            || self.worker.is_some()
            || self.from.is_some()
            || self.to.is_some()
    }

    /// The query string of this filter, for the next page's link (with
    /// `before` added there) and the status links.
    pub fn query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("status", &self.status),
            ("error", &self.error),
            ("key", &self.key),
            ("value", &self.value),
            ("group", &self.group),
            ("worker", &self.worker),
            ("from", &self.from),
            ("to", &self.to),
            ("time", &self.time),
        ] {
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
        query.finish()
    }

    /// The same filter with another status (None: any).
    pub fn with_status(&self, status: Option<&str>) -> Filter {
        Filter {
            status: status.map(str::to_string),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(status: &str, error: &str, time: &str) -> Filter {
        Filter {
            status: Some(status.into()),
            error: Some(error.into()),
            time: Some(time.into()),
            ..Filter::default()
        }
    }

    #[test]
    fn empty_fields_are_no_filter_and_bad_ones_are_refused() {
        let f = filter("", " ", "").cleaned().unwrap();
        assert!(f.status.is_none() && f.error.is_none() && !f.narrows());
        assert_eq!(f.query(), "");
        assert!(filter("lost", "", "").cleaned().is_err());
        assert!(filter("", "", "run_at").cleaned().is_err());
        let value_alone = Filter {
            value: Some("7".into()),
            ..Filter::default()
        };
        assert!(value_alone.cleaned().is_err());
    }

    #[test]
    fn the_query_carries_every_filter_escaped() {
        let f = Filter {
            key: Some("to".into()),
            value: Some("a&b=c".into()),
            ..filter("failed", "550 mailbox", "finished")
        }
        .cleaned()
        .unwrap();
        assert_eq!(
            f.query(),
            "status=failed&error=550+mailbox&key=to&value=a%26b%3Dc&time=finished"
        );
        assert!(f.dead_letters_only() && f.narrows());
        assert!(!f.with_status(None).dead_letters_only());
        let by_group = Filter {
            group: Some("g".into()),
            ..f.clone()
        };
        assert!(!by_group.dead_letters_only());
    }
}
