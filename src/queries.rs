//! The statements of the extension, from `sql/queries/`: for each, the one
//! declaration of its shape, the names and types of its parameters in `$n`
//! order and the names of its result columns in order. Calls pass
//! arguments by these names (`db::args!`) and read columns by them
//! (`db::Row`); the `#[pg_test]` statements_have_their_declared_shape
//! checks every declaration against the prepared statement.

use pgrx::pg_sys::BuiltinOid::*;
use pgrx::pg_sys::PgOid::BuiltIn;

use crate::db::Statement;

macro_rules! statements {
    ($($name:ident = $file:literal $(+ $more:literal)*
        ($($param:ident: $type:ident),*) -> ($($column:ident),*);)*) => {
        $(pub static $name: Statement = Statement {
            file: concat!($file $(, " + ", $more)*),
            sql: concat!(
                include_str!(concat!("../sql/queries/", $file))
                $(, include_str!(concat!("../sql/queries/", $more)))*
            ),
            params: &[$(stringify!($param)),*],
            types: &[$(BuiltIn($type)),*],
            columns: &[$(stringify!($column)),*],
        };)*

        /// Every statement, for the tests that prepare them all.
        #[cfg(any(test, feature = "pg_test"))]
        pub static ALL: &[&Statement] = &[$(&$name),*];
    };
}

statements! {
    FIND_QUEUE = "find_queue.sql" (name: TEXTOID)
        -> (id, owner, max_attempts, lease, paused, sender, ordered, max_in_flight,
            group_max_in_flight, rate_limit, rate_window, group_rate_limit, group_rate_window,
            keeps_history);
    FIND_QUEUE_BY_ID = "find_queue_by_id.sql" (id: INT4OID)
        -> (id, name, owner, max_attempts, lease, paused, sender, ordered, max_in_flight,
            group_max_in_flight, rate_limit, rate_window, group_rate_limit, group_rate_window,
            keeps_history);
    CREATE_QUEUE = "create_queue.sql" (name: TEXTOID, owner: OIDOID, max_attempts: INT4OID,
        backoff: TEXTOID, retry_delay: INTERVALOID, max_retry_delay: INTERVALOID,
        lease: INTERVALOID, retention: INTERVALOID, ordered: BOOLOID, max_in_flight: INT4OID,
        group_max_in_flight: INT4OID, rate_limit: INT4OID, rate_window: INTERVALOID,
        group_rate_limit: INT4OID, group_rate_window: INTERVALOID) -> ();
    ALTER_QUEUE = "alter_queue.sql" (queue_id: INT4OID, max_attempts: INT4OID, backoff: TEXTOID,
        retry_delay: INTERVALOID, max_retry_delay: INTERVALOID, lease: INTERVALOID,
        retention: INTERVALOID, ordered: BOOLOID, max_in_flight: INT4OID,
        group_max_in_flight: INT4OID, rate_limit: INT4OID, rate_window: INTERVALOID,
        group_rate_limit: INT4OID, group_rate_window: INTERVALOID) -> ();
    DROP_QUEUE = "drop_queue.sql" (queue_id: INT4OID, force: BOOLOID)
        -> (dropped, unfinished, schedules, gone, parents);
    SET_PAUSED = "set_paused.sql" (queue_id: INT4OID, paused: BOOLOID) -> ();
    PURGE = "purge.sql" (queue_id: INT4OID, status: TEXTOID) -> (purged, unfinished, parents);
    PURGE_IDS = "purge_ids.sql" (queue_id: INT4OID, status: TEXTOID, ids: INT8ARRAYOID)
        -> (purged, unfinished, parents);

    ENQUEUE = "enqueue.sql" (queue_id: INT4OID, payload: JSONBOID, headers: JSONBOID,
        priority: INT4OID, run_at: TIMESTAMPTZOID, state: TEXTOID, dedup_key: TEXTOID,
        now: TIMESTAMPTZOID, group_key: TEXTOID, turn_safe: BOOLOID) -> (id);
    ENQUEUE_PLAIN = "enqueue_plain.sql" (queue_id: INT4OID, payload: JSONBOID, headers: JSONBOID,
        priority: INT4OID, run_at: TIMESTAMPTZOID, state: TEXTOID, dedup_key: TEXTOID,
        now: TIMESTAMPTZOID) -> (id);
    ENQUEUE_BATCH = "enqueue_batch.sql" (queue_id: INT4OID, payloads: JSONBARRAYOID,
        priority: INT4OID, run_at: TIMESTAMPTZOID, state: TEXTOID, now: TIMESTAMPTZOID,
        headers: JSONBOID, uids: UUIDARRAYOID) -> (ids);
    ENQUEUE_BATCH_KEYS = "enqueue_batch_keys.sql" (queue_id: INT4OID, payloads: JSONBARRAYOID,
        priority: INT4OID, run_at: TIMESTAMPTZOID, state: TEXTOID, now: TIMESTAMPTZOID,
        group_keys: TEXTARRAYOID, dedup_keys: TEXTARRAYOID, skip: INT8ARRAYOID,
        turn_safe: BOOLOID, headers: JSONBOID) -> (ids);
    DEDUP_FIND_MANY = "dedup_find_many.sql" (queue_id: INT4OID, dedup_keys: TEXTARRAYOID)
        -> (dedup_key, id);
    DEDUP_FIND = "dedup_find.sql" (queue_id: INT4OID, dedup_key: TEXTOID) -> (id);

    AWAIT_CHECK = "await_check.sql" (id: INT8OID) -> (status, result);

    LOCK_PARENTS = "lock_parents.sql" (ids: INT8ARRAYOID) -> (id);
    PARENTS_ENDED = "parents_ended.sql" (ids: INT8ARRAYOID) -> (id, status);
    LIVE_IDS = "live_ids.sql" (ids: INT8ARRAYOID) -> (id);
    DEPEND = "depend.sql" (children: INT8ARRAYOID, depends_on: INT8ARRAYOID,
        waiting: INT8ARRAYOID, cancels: BOOLOID, failed: INT8ARRAYOID) -> ();
    SETTLE_EDGES = "settle_edges.sql" (parents: INT8ARRAYOID, outcomes: TEXTARRAYOID)
        -> (child);
    COUNT_PARENTS = "count_parents.sql" (children: INT8ARRAYOID, now: TIMESTAMPTZOID)
        -> (id, released, queue_id, run_at, pushed);
    CANCELLING_EDGES = "cancelling_edges.sql" (parents: INT8ARRAYOID,
        outcomes: TEXTARRAYOID) -> (child, parent, outcome);
    CANCEL_CHILDREN = "cancel_children.sql" + "into_history.sql" (ids: INT8ARRAYOID,
        at: TIMESTAMPTZOID, status: TEXTOID, parents: INT8ARRAYOID, outcomes: TEXTARRAYOID)
        -> (id, queue_id, has_children, lease);
    RESUME_FIND = "resume_find.sql" (parent: INT8OID) -> (id);
    LOCK_EDGES = "lock_edges.sql" (children: INT8ARRAYOID) -> (child);
    RESUME = "resume.sql" (ids: INT8ARRAYOID, waiting: INT4ARRAYOID, run_at: TIMESTAMPTZOID)
        -> (id, has_children);

    DUE_OR_EXPIRED = "due_or_expired.sql" (queue_id: INT4OID, now: TIMESTAMPTZOID)
        -> (due, expired);
    PROMOTE = "promote.sql" (queue_id: INT4OID, now: TIMESTAMPTZOID, limit: INT4OID) -> ();
    TAKE_BACK = "take_back.sql" (queue_id: INT4OID, now: TIMESTAMPTZOID, limit: INT4OID,
        max_attempts: INT4OID) -> (id, exhausted);
    CLAIM = "claim_set.sql" + "claim_next.sql" + "claim_returning.sql" (queue_id: INT4OID, limit: INT4OID,
        max_attempts: INT4OID, lease_until: TIMESTAMPTZOID, worker: TEXTOID, body_queue: TEXTOID,
        group_counted: BOOLOID)
        -> (id, state, payload, headers, attempts, enqueued_at, lease, lease_expires_at,
            priority, run_at, turn, webhook_id, body, group_key);
    CLAIM_ORDERED = "claim_set.sql" + "ordered_front.sql" + "claim_heads.sql" + "ordered_heads.sql"
        + "claim_returning.sql"
        (queue_id: INT4OID, limit: INT4OID, max_attempts: INT4OID, lease_until: TIMESTAMPTZOID,
        worker: TEXTOID, body_queue: TEXTOID, group_counted: BOOLOID)
        -> (id, state, payload, headers, attempts, enqueued_at, lease, lease_expires_at,
            priority, run_at, turn, webhook_id, body, group_key);
    CLAIM_IDS = "claim_set.sql" + "claim_ids.sql" + "claim_returning.sql" (queue_id: INT4OID, limit: INT4OID,
        max_attempts: INT4OID, lease_until: TIMESTAMPTZOID, worker: TEXTOID, body_queue: TEXTOID,
        group_counted: BOOLOID, ids: INT8ARRAYOID)
        -> (id, state, payload, headers, attempts, enqueued_at, lease, lease_expires_at,
            priority, run_at, turn, webhook_id, body, group_key);
    CLAIM_CANDIDATES = "claim_candidates.sql" (queue_id: INT4OID, limit: INT4OID,
        ordered: BOOLOID) -> (id, group_key, head);
    GROUP_FIRSTS = "group_firsts.sql" (queue_id: INT4OID, limit: INT4OID, per_group: INT4OID,
        ordered: BOOLOID) -> (id, group_key);
    IN_FLIGHT = "in_flight.sql" (queue_id: INT4OID, groups: TEXTARRAYOID) -> (group_key, busy);
    RATE_USED = "rate_used.sql" (queue_id: INT4OID, since: TIMESTAMPTZOID,
        group_since: TIMESTAMPTZOID, groups: TEXTARRAYOID) -> (group_key, used);
    RATE_FREES = "rate_frees.sql" (queue_id: INT4OID, at: TIMESTAMPTZOID, group: TEXTOID) -> (at);
    RATE_NOTE = "rate_note.sql" (queue_id: INT4OID, at: TIMESTAMPTZOID, groups: TEXTARRAYOID,
        jobs: INT4ARRAYOID) -> ();
    RATE_SWEEP = "rate_sweep.sql" (queue_id: INT4OID, before: TIMESTAMPTZOID) -> ();
    COMPLETE = "complete.sql" + "into_history.sql" (ids: INT8ARRAYOID, at: TIMESTAMPTZOID,
        status: TEXTOID, leases: UUIDARRAYOID, results: JSONBARRAYOID) -> (id, queue_id, has_children, lease);
    COMPLETE_CLAIMED = "complete_claimed.sql" + "into_history.sql" (ids: INT8ARRAYOID,
        at: TIMESTAMPTZOID, status: TEXTOID, results: JSONBARRAYOID) -> (id, queue_id, has_children, lease);
    FINISH = "finish.sql" + "into_history.sql" (ids: INT8ARRAYOID, at: TIMESTAMPTZOID,
        status: TEXTOID) -> (id, queue_id, has_children, lease);
    FINISH_LOCKED = "finish_locked.sql" + "into_history.sql" (ids: INT8ARRAYOID,
        at: TIMESTAMPTZOID, status: TEXTOID, worker: TEXTOID, results: JSONBARRAYOID)
        -> (id, queue_id, has_children, lease);
    FAIL_LOCK = "fail_lock.sql" (id: INT8OID, lease: UUIDOID)
        -> (attempts, max_attempts, backoff, retry_delay, max_retry_delay, has_sender, queue_id);
    FAIL_RETRY = "fail_retry.sql" (id: INT8OID, run_at: TIMESTAMPTZOID, state: TEXTOID,
        error: TEXTOID) -> ();
    BURY = "bury.sql" (ids: INT8ARRAYOID, at: TIMESTAMPTZOID, error: TEXTOID)
        -> (id, queue_id, has_children, lease);
    EXTEND = "extend.sql" (id: INT8OID, lease: UUIDOID, lease_until: TIMESTAMPTZOID)
        -> (lease_expires_at);

    GROUPS = "groups.sql" (queue_id: INT4OID, ordered: BOOLOID)
        -> (group_key, pending, processing, oldest_due_age, head_id);

    SCHEDULE_LOCK = "schedule_lock.sql" (name: TEXTOID)
        -> (queue, queue_id, time_zone, group_key, ordered, pushed);
    SCHEDULE_PUT = "schedule_put.sql" (name: TEXTOID, queue_id: INT4OID, cron: TEXTOID,
        time_zone: TEXTOID, payload: JSONBOID, headers: JSONBOID, priority: INT4OID,
        group_key: TEXTOID, catch_up: TEXTOID, no_overlap: BOOLOID, paused: BOOLOID,
        owner: OIDOID, next_run_at: TIMESTAMPTZOID, now: TIMESTAMPTZOID) -> ();
    SCHEDULE_DELETE = "schedule_delete.sql" (name: TEXTOID) -> (queue_id);
    SCHEDULE_FIND = "schedule_find.sql" (name: TEXTOID) -> (queue_id);
    SCHEDULES_DUE = "schedules_due.sql" (now: TIMESTAMPTZOID) -> (name, queue_id);
    SCHEDULE_DUE_LOCK = "schedule_due_lock.sql" (name: TEXTOID, now: TIMESTAMPTZOID)
        -> (queue_id, cron, time_zone, catch_up, no_overlap, next_run_at, missed_before,
            last_job_id, group_key, ordered);
    SCHEDULE_JOB = "schedule_job.sql" (name: TEXTOID, scheduled_for: TEXTOID,
        now: TIMESTAMPTZOID) -> (id);
    SCHEDULE_ADVANCE = "schedule_advance.sql" (name: TEXTOID, next_run_at: TIMESTAMPTZOID,
        last_run_at: TIMESTAMPTZOID, last_job_id: INT8OID, runs: INT8OID, skipped: INT8OID) -> ();
    SCHEDULE_RUN = "schedule_run.sql" (name: TEXTOID, last_run_at: TIMESTAMPTZOID,
        last_job_id: INT8OID) -> ();
    JOB_UNFINISHED = "job_unfinished.sql" (id: INT8OID) -> (unfinished);
    NEXT_TICK = "next_tick.sql" () -> (at);

    RETRY_FIND = "retry_find.sql" (id: INT8OID)
        -> (queue_id, dedup_key, group_key, has_sender, ordered);
    RETRY = "retry.sql" (id: INT8OID, run_at: TIMESTAMPTZOID) -> (queue_id, has_children);

    SET_SENDER = "set_sender.sql" (queue_id: INT4OID, sender: TEXTOID, role: OIDOID,
        batch_size: INT4OID) -> (had_sender);
    SET_WEBHOOK = "set_webhook.sql" (queue_id: INT4OID, sender: TEXTOID, role: OIDOID,
        max_in_flight: INT4OID, url: TEXTOID, headers: JSONBOID, timeout: INTERVALOID,
        secret: TEXTOID) -> ();
    WEBHOOK_ALLOW = "webhook_allow.sql" (database: OIDOID) -> (allow);
    SENDER_SIGNATURE = "sender_signature.sql" (function: OIDOID) -> (signature);
    SENDER_QUEUES = "sender_queues.sql" ()
        -> (id, name, owner, max_attempts, lease, paused, sender, ordered, max_in_flight,
            group_max_in_flight, rate_limit, rate_window, group_rate_limit, group_rate_window,
            keeps_history, role, batch_size, url, headers, timeout, secret,
            webhook_max_in_flight);
    SENDER_CHECK = "sender_check.sql" (queue_id: INT4OID, database: OIDOID)
        -> (sender, webhook, function, role, role_name, name, max_attempts, settings);
    DELIVER_LOCK = "deliver_lock.sql" (ids: INT8ARRAYOID, leases: UUIDARRAYOID, queue: TEXTOID,
        max_attempts: INT4OID) -> (id, job);
    LOCK_NEXT = "lock_set.sql" + "lock_next.sql" (queue_id: INT4OID, limit: INT4OID, queue: TEXTOID,
        max_attempts: INT4OID) -> (id, attempts, job, group_key, run_at);
    LOCK_NEXT_ORDERED = "ordered_front.sql" + "lock_set.sql" + "ordered_heads.sql" (queue_id: INT4OID,
        limit: INT4OID, queue: TEXTOID, max_attempts: INT4OID) -> (id, attempts, job, group_key, run_at);
    COUNT_ATTEMPTS = "count_attempts.sql" (ids: INT8ARRAYOID, worker: TEXTOID, at: TIMESTAMPTZOID)
        -> (id, lease, queue_id, group_key);
    RELEASE = "release.sql" (ids: INT8ARRAYOID) -> ();
    LEFT_IN_FLIGHT = "left_in_flight.sql" (worker: TEXTOID) -> (id);
    RECOVER_LOCK = "recover_lock.sql" (id: INT8OID, worker: TEXTOID)
        -> (attempts, max_attempts, lease, sql_sender, queue_id, group_key);
    RECOVER_CLAIM = "recover_claim.sql" (id: INT8OID, lease_until: TIMESTAMPTZOID, error: TEXTOID)
        -> (lease);
    RECOVER_LATER = "recover_later.sql" (id: INT8OID, until: TIMESTAMPTZOID) -> ();
    RELEASE_ONE = "release_one.sql" (id: INT8OID) -> ();
    RELEASE_HELD = "release_held.sql" (ids: INT8ARRAYOID, leases: UUIDARRAYOID) -> ();
    EXPIRE_LEASES = "expire_leases.sql" (now: TIMESTAMPTZOID, limit: INT4OID) -> (id);
    NEXT_DUE = "next_due.sql" () -> (at);
    WAIT_CHECK = "wait_check.sql" (queue_id: INT4OID, now: TIMESTAMPTZOID)
        -> (ready, due_or_expired, next_at, window_ends_at);
    NEXT_CLEANUP = "next_cleanup.sql" () -> (at);
}
