//! What the connecting role may do, so that a page offers only that. The
//! database still decides each action (a refusal that comes anyway is its
//! own); this only keeps buttons that would surely be refused off the page.

use serde::Serialize;

use crate::databases::Client;
use crate::failure::Failure;

const RIGHTS: &str = include_str!("../queries/rights.sql");
const ACTS_AS_OWNER: &str = include_str!("../queries/acts_as_owner.sql");

#[derive(Serialize, Default)]
pub struct Rights {
    pub retry: bool,
    pub cancel: bool,
    pub pause: bool,
    pub resume: bool,
    pub purge: bool,
    /// Purging chosen jobs: queue_purge with their ids (0.4), and whether
    /// this database's extension has that form at all.
    pub purge_ids: bool,
    pub has_purge_ids: bool,
    pub run_schedule: bool,
    /// Whether the role may read queue_queues: the queues' owners and
    /// options.
    pub reads_queues: bool,
    /// Why pause, resume, purge or running a schedule is not offered.
    pub why_not: Option<String>,
}

impl Rights {
    /// Retry and cancel, which any role may call that may execute them.
    pub async fn of_jobs(client: &Client) -> Result<Rights, Failure> {
        Ok(Rights::of_functions(&client.query_one(RIGHTS, &[]).await?))
    }

    fn of_functions(row: &tokio_postgres::Row) -> Rights {
        Rights {
            retry: row.get("retry"),
            cancel: row.get("cancel"),
            reads_queues: row.get("reads_queues"),
            has_purge_ids: row.get("has_purge_ids"),
            ..Rights::default()
        }
    }

    /// Also what only `queue`'s owner (or a superuser) may do. Its owner
    /// is in queue_queues, which no view shows: a role that may not read
    /// it is offered none of that.
    pub async fn of_queue(client: &Client, queue: &str) -> Result<Rights, Failure> {
        let row = client.query_one(RIGHTS, &[]).await?;
        let mut rights = Rights::of_functions(&row);
        let owner_only = "Pause, resume, purge and running a schedule are for the queue's \
                          owner (a member of its role) or a superuser";
        if !rights.reads_queues {
            rights.why_not = Some(format!(
                "{owner_only}; this role may not read who owns the queue, so they are not \
                 offered here."
            ));
            return Ok(rights);
        }
        let owner = client.query_opt(ACTS_AS_OWNER, &[&queue]).await?;
        if !owner.is_some_and(|row| row.get::<_, bool>(0)) {
            rights.why_not = Some(format!(
                "{owner_only}; this role is neither, so they are not offered here."
            ));
            return Ok(rights);
        }
        let mut revoked = Vec::new();
        for (field, function) in [
            (&mut rights.pause, "pause"),
            (&mut rights.resume, "resume"),
            (&mut rights.purge, "purge"),
            (&mut rights.purge_ids, "purge_ids"),
            (&mut rights.run_schedule, "run_schedule"),
        ] {
            *field = row.get(function);
            // (purge_ids is queue_purge too, or missing from this version)
            if !*field && function != "purge_ids" {
                revoked.push(format!("queue_{function}"));
            }
        }
        if !revoked.is_empty() {
            rights.why_not = Some(format!(
                "Not offered, as this role may not execute them: {}.",
                revoked.join(", ")
            ));
        }
        Ok(rights)
    }
}
