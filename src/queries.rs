//! The statements of the API, from `sql/queries/`, with their parameter types.

use pgrx::pg_sys::BuiltinOid::*;
use pgrx::pg_sys::PgOid::BuiltIn;

use crate::db::Statement;

macro_rules! statements {
    ($($name:ident = $file:literal ($($arg:ident),*);)*) => {
        $(pub const $name: Statement = Statement {
            sql: include_str!(concat!("../sql/queries/", $file)),
            args: &[$(BuiltIn($arg)),*],
        };)*

        /// Every statement, for the test that prepares them all.
        #[cfg(any(test, feature = "pg_test"))]
        pub const ALL: &[&Statement] = &[$(&$name),*];
    };
}

statements! {
    FIND_QUEUE = "find_queue.sql" (TEXTOID);
    CREATE_QUEUE = "create_queue.sql" (TEXTOID, OIDOID, INT4OID, TEXTOID, INTERVALOID,
        INTERVALOID, INTERVALOID, INTERVALOID);
    ALTER_QUEUE = "alter_queue.sql" (INT4OID, INT4OID, TEXTOID, INTERVALOID, INTERVALOID,
        INTERVALOID, INTERVALOID);
    DROP_QUEUE = "drop_queue.sql" (INT4OID, BOOLOID);
    SET_PAUSED = "set_paused.sql" (INT4OID, BOOLOID);
    PURGE = "purge.sql" (INT4OID, TEXTOID);

    ENQUEUE = "enqueue.sql" (INT4OID, JSONBOID, JSONBOID, INT4OID, TIMESTAMPTZOID, TEXTOID,
        TEXTOID, TIMESTAMPTZOID);
    ENQUEUE_BATCH = "enqueue_batch.sql" (INT4OID, JSONBARRAYOID, INT4OID, TIMESTAMPTZOID,
        TEXTOID, TIMESTAMPTZOID);
    DEDUP_FIND = "dedup_find.sql" (INT4OID, TEXTOID);

    CLAIM_CHORES = "claim_chores.sql" (INT4OID, TIMESTAMPTZOID);
    PROMOTE = "promote.sql" (INT4OID, TIMESTAMPTZOID, INT4OID);
    RESCUE = "rescue.sql" (INT4OID, TIMESTAMPTZOID, INT4OID, INT4OID);
    CLAIM = "claim.sql" (INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID);
    COMPLETE = "complete.sql" (INT8ARRAYOID, UUIDARRAYOID, TIMESTAMPTZOID);
    FINISH = "finish.sql" (INT8ARRAYOID, TIMESTAMPTZOID, TEXTOID);
    FAIL_LOCK = "fail_lock.sql" (INT8OID, UUIDOID);
    FAIL_RETRY = "fail_retry.sql" (INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID);
    BURY = "bury.sql" (INT8ARRAYOID, TIMESTAMPTZOID, TEXTOID);
    EXTEND = "extend.sql" (INT8OID, UUIDOID, TIMESTAMPTZOID);

    RETRY_FIND = "retry_find.sql" (INT8OID);
    RETRY = "retry.sql" (INT8OID, TIMESTAMPTZOID);

    SET_SENDER = "set_sender.sql" (INT4OID, TEXTOID, OIDOID, INT4OID);
    SENDER_FUNCTION = "sender_function.sql" (OIDOID, OIDOID);
    SENDER_QUEUES = "sender_queues.sql" ();
    SENDER_CHECK = "sender_check.sql" (INT4OID);
    LOGIN_SETTINGS = "login_settings.sql" (OIDOID, OIDOID);
    DELIVER_LOCK = "deliver_lock.sql" (INT8ARRAYOID, UUIDARRAYOID, TEXTOID, INT4OID);
    RELEASE = "release.sql" (INT8ARRAYOID);
    ORPHANS = "orphans.sql" (TEXTOID);
    ORPHAN_LOCK = "orphan_lock.sql" (INT8OID, TEXTOID);
    RECLAIM = "reclaim.sql" (INT8OID, TIMESTAMPTZOID, TEXTOID);
    UNCLAIM = "unclaim.sql" (INT8OID);
    EXPIRE_LEASES = "expire_leases.sql" (TIMESTAMPTZOID, INT4OID);
    NEXT_DUE = "next_due.sql" ();
    NEXT_CLEANUP = "next_cleanup.sql" ();
}
