//! What a transaction announces when it commits, and to whom. The API and
//! the worker say what they did to a queue (jobs of it fall due, jobs of it
//! ended, its rules changed); this module decides who is woken: the
//! database's worker for a queue it delivers (worker/wake.rs), the
//! consumers waiting in `queue_wait` for a pulled one, and the sessions in
//! `queue_await` for a job that ended (worker/waiters.rs).
//! Nothing happens before the commit, and nothing after a rollback.

use crate::ends::{Ended, Failed};
use crate::worker::{waiters, wake};

/// `jobs` jobs of queue `queue_id` fall due at `at` (microseconds since the
/// Unix epoch; a time gone by: now). `pushed`: the worker delivers the
/// queue.
pub fn work_due(queue_id: i32, pushed: bool, jobs: usize, at: i64) {
    if jobs == 0 {
        return;
    }
    wake::on_commit(pushed);
    if !pushed {
        waiters::note_due(queue_id, jobs, at);
    }
}

/// `jobs` jobs of queue `queue_id` that were in flight or waiting ended
/// (succeeded, cancelled, purged): a limit or an ordered group may let
/// others go.
pub fn jobs_ended(queue_id: i32, jobs: usize) {
    waiters::note_ended(queue_id, jobs);
}

/// Jobs that ended, each of its queue (`jobs_ended` queue by queue): their
/// awaiters (queue_await) return, too.
pub fn ended(jobs: &[Ended]) {
    waiters::note_ended_jobs(jobs.iter().map(|job| job.id));
    let mut by_queue: Vec<(i32, usize)> = Vec::new();
    for job in jobs {
        match by_queue
            .iter_mut()
            .find(|(queue, _)| *queue == job.queue_id)
        {
            Some((_, count)) => *count += 1,
            None => by_queue.push((job.queue_id, 1)),
        }
    }
    for (queue_id, count) in by_queue {
        jobs_ended(queue_id, count);
    }
}

/// An attempt of a job failed (`jobs::fail`): it may free a limit, and its
/// retry falls due. (A job that failed for good was announced as ended by
/// jobs::bury.)
pub fn attempt_failed(failed: &Failed) {
    wake::on_commit(failed.wake);
    waiters::note_ended(failed.queue_id, 1);
    if let (Some(at), false) = (failed.retry_at, failed.wake) {
        waiters::note_due(failed.queue_id, 1, at);
    }
}

/// Queue `queue_id` changed in a way every one of its consumers must look
/// at again: resumed, its order or limits altered, given a sender or
/// webhook or rid of one. `pushed`: the worker delivers it now.
pub fn queue_changed(queue_id: i32, pushed: bool) {
    wake::on_commit(pushed);
    waiters::note_all(queue_id);
}

/// Queue `queue_id` is gone: its waiters learn it.
pub fn queue_dropped(queue_id: i32) {
    waiters::note_all(queue_id);
}

/// The database's schedules changed: its worker looks at them again (one
/// is started for their next tick if none runs).
pub fn schedules_changed() {
    wake::schedules_changed_at_commit();
}

/// The extension was just created in this database: the launcher serves
/// it.
pub fn extension_created() {
    wake::ask_at_commit(wake::Ask::Worker);
}
