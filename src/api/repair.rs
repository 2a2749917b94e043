//! Repairing jobs by id: sending dead letters and cancelled jobs back to
//! their queue, and cancelling unfinished ones.

use pgrx::prelude::*;

use crate::catalog;
use crate::db;
use crate::errors::required;
use crate::queries;
use crate::worker::wake;

#[pg_extern(volatile, parallel_unsafe)]
fn queue_retry(id: Option<i64>) -> bool {
    let id = required(id, "id");
    let now = db::timestamp(crate::time::now_us());
    db::with_tables(|client| {
        let found = db::run(client, &queries::RETRY_FIND, &[id.into()]);
        let Some(row) = found.into_iter().next() else {
            return false;
        };
        let queue_id: i32 = row.get(1).ok().flatten().expect("a queue id");
        let key: Option<String> = row.get(2).ok().flatten();
        let pushed: bool = row.get(3).ok().flatten().unwrap_or(false);
        // The locks of an enqueue: the queue is not dropped meanwhile, and
        // no other job with the key is enqueued meanwhile.
        catalog::lock_queue(queue_id, false);
        if let Some(key) = key {
            catalog::lock_dedup_key(queue_id, &key);
            let holder = db::run(
                client,
                &queries::DEDUP_FIND,
                &[queue_id.into(), key.as_str().into()],
            );
            if !holder.is_empty() {
                return false;
            }
        }
        let retried = !db::run(client, &queries::RETRY, &[id.into(), now.into()]).is_empty();
        if retried {
            wake::on_commit(pushed);
        }
        retried
    })
}

#[pg_extern(volatile, parallel_unsafe)]
fn queue_cancel(id: Option<i64>) -> bool {
    let id = required(id, "id");
    let now = db::timestamp(crate::time::now_us());
    db::with_tables(|client| {
        let ended = db::run(
            client,
            &queries::FINISH,
            &[vec![id].into(), now.into(), "cancelled".into()],
        );
        !ended.is_empty()
    })
}
