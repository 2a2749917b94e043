//! Repairing jobs by id: sending dead letters and cancelled jobs back to
//! their queue, and cancelling unfinished ones.

use pgrx::prelude::*;

use crate::announce;
use crate::catalog;
use crate::db::{self, args};
use crate::dependencies;
use crate::errors::required;
use crate::jobs;
use crate::queries;

#[pg_extern(volatile, parallel_unsafe)]
fn queue_retry(id: Option<i64>) -> bool {
    let id = required(id, "id");
    let now = db::timestamp(crate::time::now_us());
    db::with_tables(|client| {
        let Some(row) = db::run(client, &queries::RETRY_FIND, args![id = id]).first() else {
            return false;
        };
        let queue_id: i32 = row.value("queue_id");
        let key: Option<String> = row.get("dedup_key");
        // NULL means the queue is gone, and the retry below finds nothing.
        let pushed = row.get::<bool>("has_sender").unwrap_or(false);
        // The locks of an enqueue: the queue is not dropped meanwhile, and
        // no other job with the key is enqueued meanwhile.
        catalog::lock_queue(queue_id, false);
        // A job of a group put back into an ordered queue becomes its group's
        // head: it waits for the claims and batches under way, which may have
        // taken a later job of the group without seeing it, and those after it
        // see it (catalog::lock_rules). Taken before the dedup key's lock,
        // which a sender's enqueue in such a batch may want.
        let grouped = row.get::<String>("group_key").is_some();
        if grouped && row.get::<bool>("ordered").unwrap_or(false) {
            catalog::lock_rules(queue_id, true);
        }
        if let Some(key) = key {
            catalog::lock_dedup_key(queue_id, &key);
            let holder = db::run(
                client,
                &queries::DEDUP_FIND,
                args![queue_id = queue_id, dedup_key = key.as_str()],
            );
            if !holder.is_empty() {
                return false;
            }
        }
        let Some(back) = db::run(client, &queries::RETRY, args![id = id, run_at = now]).first()
        else {
            return false;
        };
        announce::work_due(queue_id, pushed, 1, crate::time::now_us());
        // The jobs its end cancelled wait for it again.
        if back.value::<bool>("has_children") {
            dependencies::resume(client, id);
        }
        true
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_cancel(id: Option<i64>) -> bool {
    let id = required(id, "id");
    // A cancelled job may free a limit or its ordered group: jobs.rs announces it.
    !db::with_tables(|client| jobs::cancel(client, vec![id])).is_empty()
}
