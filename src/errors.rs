//! Every error the API raises, with its SQLSTATE, message and hint, in one
//! place. Each message names the offending value and the rule it broke.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::contract::{
    CATCH_UP_WORDS, MAX_BATCH, MAX_RESULT_BYTES, NAME_RULE, PARENT_FAILURE_WORDS, STATUSES,
    WORKER_NAME,
};

#[derive(Debug, Clone, PartialEq)]
pub enum QueueError {
    /// A NULL where the argument has no (non-NULL) default.
    NullArgument {
        argument: &'static str,
    },
    /// A NULL element inside an array argument (1-based position).
    NullElement {
        argument: &'static str,
        position: usize,
    },
    InvalidName {
        name: String,
    },
    InvalidScheduleName {
        name: String,
    },
    /// An option or argument outside its range; `rule` says the range.
    OutOfRange {
        option: &'static str,
        value: String,
        rule: &'static str,
    },
    UnknownBackoff {
        word: String,
    },
    UnknownStatus {
        word: String,
    },
    NotAnObject {
        argument: &'static str,
        value: String,
    },
    NotOneDimensional {
        argument: &'static str,
    },
    /// A traceparent or tracestate in a job's headers that the W3C Trace
    /// Context rules refuse (trace_context.rs says why).
    MalformedTraceContext {
        problem: String,
    },
    ArrayLengthMismatch {
        left: &'static str,
        left_len: usize,
        right: &'static str,
        right_len: usize,
    },
    BatchTooLarge {
        argument: &'static str,
        len: usize,
    },
    UndefinedQueue {
        name: String,
    },
    NotOwner {
        name: String,
        action: &'static str,
    },
    UnfinishedJobs {
        name: String,
        unfinished: i64,
    },
    ReservedWorkerName,
    DeliveredBySender {
        name: String,
        sender: String,
    },
    /// A function oid that names no function.
    UndefinedSender {
        oid: u32,
    },
    /// A sender that does not take exactly one jsonb argument.
    SenderArguments {
        sender: String,
    },
    /// A procedure, aggregate, window or set-returning function.
    SenderKind {
        sender: String,
        kind: &'static str,
    },
    SenderNotExecutable {
        sender: String,
    },
    /// A webhook URL that is not an absolute http(s) URL without user
    /// information (`url`: as shown, without its query).
    WebhookUrl {
        url: String,
    },
    /// A webhook URL that queue.webhook_allow does not allow.
    WebhookNotAllowed {
        url: String,
    },
    /// queue.webhook_allow itself cannot be read.
    WebhookAllowList {
        problem: String,
    },
    /// Registered headers that break a rule (the problem never shows a
    /// value).
    WebhookHeaders {
        problem: String,
    },
    /// A secret that is not a Standard Webhooks secret.
    WebhookSecret {
        problem: &'static str,
    },
    /// A change to the queue on a hot standby (the server is in recovery).
    InRecovery,
    /// A cron expression the API does not take; `field` is the one at fault
    /// ("expression" when it is the whole).
    InvalidCron {
        cron: String,
        field: &'static str,
        problem: String,
    },
    UnknownTimeZone {
        name: String,
    },
    UnknownCatchUp {
        word: String,
    },
    UndefinedSchedule {
        name: String,
    },
    /// queue_drop of a queue that schedules enqueue into, without force.
    QueueHasSchedules {
        name: String,
        schedules: i64,
    },
    /// queue_wait where it would hold a snapshot while it waits: inside a
    /// transaction block, or called from a function.
    /// `queue_wait` or `queue_await` inside a transaction block.
    WaitInTransaction {
        procedure: &'static str,
    },
    /// queue_wait without the preload: no shared memory for commits to
    /// find the waiters in.
    WaitWithoutPreload {
        procedure: &'static str,
    },
    /// A result larger than contract::MAX_RESULT_BYTES.
    ResultTooLarge {
        bytes: usize,
    },
    /// on_parent_failure that is not one of its words.
    UnknownParentFailure {
        word: String,
    },
    /// A parent in depends_on that does not exist or is no longer retained.
    MissingParent {
        id: i64,
    },
    /// What a transaction with one snapshot for all its statements cannot
    /// do right, as PostgreSQL's own serialization failures: its client
    /// retries.
    SerializationFailure {
        what: &'static str,
    },
    /// A statement of the extension that does not match its declaration
    /// (queries.rs), or that SPI refused: a bug in the extension.
    StatementShape {
        statement: &'static str,
        detail: String,
    },
}

impl QueueError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        use PgSqlErrorCode::*;
        match self {
            QueueError::NullArgument { .. } | QueueError::NullElement { .. } => {
                ERRCODE_NULL_VALUE_NOT_ALLOWED
            }
            QueueError::InvalidName { .. }
            | QueueError::InvalidScheduleName { .. }
            | QueueError::OutOfRange { .. }
            | QueueError::UnknownBackoff { .. }
            | QueueError::UnknownStatus { .. }
            | QueueError::NotAnObject { .. }
            | QueueError::NotOneDimensional { .. }
            | QueueError::MalformedTraceContext { .. }
            | QueueError::ArrayLengthMismatch { .. }
            | QueueError::ReservedWorkerName
            | QueueError::InvalidCron { .. }
            | QueueError::UnknownTimeZone { .. }
            | QueueError::UnknownCatchUp { .. }
            | QueueError::UnknownParentFailure { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            QueueError::MissingParent { .. } => ERRCODE_FOREIGN_KEY_VIOLATION,
            QueueError::SerializationFailure { .. } => ERRCODE_T_R_SERIALIZATION_FAILURE,
            QueueError::UndefinedSchedule { .. } => ERRCODE_UNDEFINED_OBJECT,
            QueueError::QueueHasSchedules { .. } => ERRCODE_OBJECT_IN_USE,
            QueueError::BatchTooLarge { .. } => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            QueueError::UndefinedQueue { .. } => ERRCODE_UNDEFINED_OBJECT,
            QueueError::NotOwner { .. } => ERRCODE_INSUFFICIENT_PRIVILEGE,
            QueueError::UnfinishedJobs { .. } => ERRCODE_OBJECT_IN_USE,
            QueueError::WebhookUrl { .. }
            | QueueError::WebhookAllowList { .. }
            | QueueError::WebhookHeaders { .. }
            | QueueError::WebhookSecret { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            QueueError::WebhookNotAllowed { .. } => ERRCODE_INSUFFICIENT_PRIVILEGE,
            QueueError::StatementShape { .. } => ERRCODE_INTERNAL_ERROR,
            QueueError::InRecovery => ERRCODE_READ_ONLY_SQL_TRANSACTION,
            QueueError::WaitInTransaction { .. } => ERRCODE_ACTIVE_SQL_TRANSACTION,
            QueueError::WaitWithoutPreload { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            QueueError::ResultTooLarge { .. } => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            QueueError::DeliveredBySender { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            QueueError::UndefinedSender { .. } | QueueError::SenderArguments { .. } => {
                ERRCODE_UNDEFINED_FUNCTION
            }
            QueueError::SenderKind { .. } => ERRCODE_DATATYPE_MISMATCH,
            QueueError::SenderNotExecutable { .. } => ERRCODE_INSUFFICIENT_PRIVILEGE,
        }
    }

    pub fn message(&self) -> String {
        match self {
            QueueError::NullArgument { argument } => format!("{argument} must not be NULL"),
            QueueError::NullElement { argument, position } => {
                format!("{argument} must not contain NULL (element {position} is NULL)")
            }
            QueueError::InvalidName { name } => {
                format!("invalid queue name \"{name}\": {NAME_RULE}")
            }
            QueueError::InvalidScheduleName { name } => format!(
                "invalid schedule name \"{name}\": {}",
                NAME_RULE.replace("a queue name", "a schedule name")
            ),
            QueueError::OutOfRange {
                option,
                value,
                rule,
            } => {
                format!("{option} must be {rule}, got {value}")
            }
            QueueError::UnknownBackoff { word } => format!(
                "unknown backoff \"{word}\": must be {}",
                crate::policy::Backoff::WORDS
            ),
            QueueError::UnknownStatus { word } => format!(
                "unknown status \"{word}\": must be one of {}",
                STATUSES.join(", ")
            ),
            QueueError::NotAnObject { argument, value } => {
                format!("{argument} must be a JSON object, got {value}")
            }
            QueueError::MalformedTraceContext { problem } => format!("headers: {problem}"),
            QueueError::NotOneDimensional { argument } => {
                format!("{argument} must be a one-dimensional array")
            }
            QueueError::ArrayLengthMismatch {
                left,
                left_len,
                right,
                right_len,
            } => format!(
                "{left} and {right} must have the same length, got {left_len} and {right_len}"
            ),
            QueueError::BatchTooLarge { argument, len } => {
                format!(
                    "{argument} has {len} elements, more than the limit of {MAX_BATCH} per call"
                )
            }
            QueueError::UndefinedQueue { name } => format!("queue \"{name}\" does not exist"),
            QueueError::NotOwner { name, action } => {
                format!("must be owner of queue \"{name}\" to {action} it")
            }
            QueueError::UnfinishedJobs { name, unfinished } => {
                let jobs = if *unfinished == 1 { "job" } else { "jobs" };
                format!("queue \"{name}\" still has {unfinished} unfinished {jobs}")
            }
            QueueError::ReservedWorkerName => format!(
                "worker name \"{}\" is reserved for the background worker",
                WORKER_NAME
            ),
            QueueError::DeliveredBySender { name, sender } => {
                format!("queue \"{name}\" is delivered by its sender {sender}")
            }
            QueueError::UndefinedSender { oid } => {
                format!("sender function with oid {oid} does not exist")
            }
            QueueError::SenderArguments { sender } => {
                format!("sender {sender} must take exactly one argument, of type jsonb")
            }
            QueueError::SenderKind { sender, kind } => {
                format!("sender {sender} is {kind}; a sender must be a plain function")
            }
            QueueError::SenderNotExecutable { sender } => {
                format!("permission denied to register sender {sender}: no EXECUTE privilege")
            }
            QueueError::WebhookUrl { url } => format!(
                "webhook url \"{url}\" must be an absolute http:// or https:// URL without user information"
            ),
            QueueError::WebhookNotAllowed { url } => {
                format!("webhook url \"{url}\" is not allowed by queue.webhook_allow")
            }
            QueueError::WebhookAllowList { problem } => problem.clone(),
            QueueError::WebhookHeaders { problem } => format!("webhook headers: {problem}"),
            QueueError::WebhookSecret { problem } => {
                format!("webhook secret is not a Standard Webhooks secret: {problem}")
            }
            QueueError::StatementShape { statement, detail } => {
                format!("internal error in the queue extension's statement {statement}: {detail}")
            }
            QueueError::InRecovery => {
                "cannot change the queue during recovery: this server is a standby".into()
            }
            QueueError::InvalidCron {
                cron,
                field,
                problem,
            } => {
                if *field == "expression" {
                    format!("invalid cron expression \"{cron}\": {problem}")
                } else {
                    format!("invalid cron expression \"{cron}\": {field} field: {problem}")
                }
            }
            QueueError::UnknownTimeZone { name } => {
                format!("unknown time zone \"{name}\": must be an IANA zone name")
            }
            QueueError::UnknownCatchUp { word } => format!(
                "unknown catch_up \"{word}\": must be {CATCH_UP_WORDS}"
            ),
            QueueError::UnknownParentFailure { word } => format!(
                "unknown on_parent_failure \"{word}\": must be {PARENT_FAILURE_WORDS}"
            ),
            QueueError::MissingParent { id } => format!(
                "job {id} in depends_on does not exist or is no longer retained"
            ),
            QueueError::SerializationFailure { what } => {
                format!("could not serialize access: {what}")
            }
            QueueError::UndefinedSchedule { name } => {
                format!("schedule \"{name}\" does not exist")
            }
            QueueError::QueueHasSchedules { name, schedules } => {
                let them = if *schedules == 1 { "schedule" } else { "schedules" };
                format!("queue \"{name}\" is used by {schedules} {them}")
            }
            QueueError::WaitInTransaction { procedure } => {
                format!("{procedure} cannot run inside a transaction block or a function")
            }
            QueueError::WaitWithoutPreload { procedure } => {
                format!("{procedure} needs the extension's library in shared_preload_libraries")
            }
            QueueError::ResultTooLarge { bytes } => format!(
                "a job's result is {bytes} bytes: more than the limit of {MAX_RESULT_BYTES} bytes"
            ),
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            QueueError::InvalidName { .. } | QueueError::InvalidScheduleName { .. } => {
                Some("Use lower-case letters, digits and the characters _ - . : only.".into())
            }
            QueueError::BatchTooLarge { .. } => Some("Split the batch into several calls.".into()),
            QueueError::UndefinedQueue { name } => {
                Some(format!("Create it first with queue_create('{name}')."))
            }
            QueueError::NotOwner { .. } => Some(
                "Only the role that created the queue, its members and superusers may do this."
                    .into(),
            ),
            QueueError::InvalidCron { .. } => Some(
                "Five fields (minute hour day-of-month month day-of-week), or six with a leading \
                 second field, of *, numbers, names, lists, ranges and steps; or @yearly, \
                 @monthly, @weekly, @daily, @hourly."
                    .into(),
            ),
            QueueError::UnknownTimeZone { .. } => Some(
                "Use a name from the IANA database, such as 'UTC' or 'Europe/Berlin' \
                 (SELECT name FROM pg_timezone_names lists them)."
                    .into(),
            ),
            QueueError::QueueHasSchedules { .. } => Some(
                "Remove them with queue_unschedule(), or drop the queue anyway with force => true, \
                 which removes them too."
                    .into(),
            ),
            QueueError::UnfinishedJobs { .. } => {
                Some("Wait for the jobs to finish, or drop it anyway with force => true.".into())
            }
            QueueError::DeliveredBySender { name, .. } => Some(format!(
                "Its jobs are pushed by the background worker; \
                 queue_unregister_sender('{name}') turns it back into a pull queue."
            )),
            QueueError::SenderArguments { .. } | QueueError::SenderKind { .. } => {
                Some("Declare it as CREATE FUNCTION name(job jsonb) RETURNS void.".into())
            }
            QueueError::WebhookNotAllowed { .. } => Some(
                "A superuser allows endpoints with the setting queue.webhook_allow, for example \
                 ALTER DATABASE mydb SET queue.webhook_allow = 'https://hooks.example.com/in'."
                    .into(),
            ),
            QueueError::WebhookSecret { .. } => {
                Some("A secret is whsec_ followed by the base64 of 24 to 64 random bytes.".into())
            }
            QueueError::SenderNotExecutable { .. } => Some(
                "The sender runs as the role that registers it, which needs EXECUTE on it.".into(),
            ),
            QueueError::WaitInTransaction { procedure } => Some(format!(
                "Run CALL {procedure}(...) on its own, in autocommit mode (not after BEGIN, nor \
                 from a function or a procedure that is): it gives up its snapshot while it \
                 waits, which only a CALL outside a transaction block may do."
            )),
            QueueError::WaitWithoutPreload { procedure } => Some(format!(
                "Add queue to shared_preload_libraries in postgresql.conf and restart the server \
                 (commits wake waiters through its shared memory); until then, {}.",
                if *procedure == "queue_wait" {
                    "poll with queue_claim"
                } else {
                    "poll with queue_job"
                }
            )),
            QueueError::MissingParent { .. } => Some(
                "A job can depend only on jobs of this database that exist: enqueue the \
                 parents first (a parent that succeeded counts while it is retained)."
                    .into(),
            ),
            QueueError::SerializationFailure { .. } => {
                Some("Retry the transaction.".into())
            }
            QueueError::ResultTooLarge { .. } => Some(
                "Keep large outputs in a table of your own and return a reference to them."
                    .into(),
            ),
            QueueError::InRecovery => Some(
                "Enqueue, claim and every other change go to the primary; a standby can read \
                 the views and queue_job()."
                    .into(),
            ),
            _ => None,
        }
    }

    /// Raises this error as a PostgreSQL ERROR; never returns.
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.sqlstate(), self.message(), "queue");
        if let Some(hint) = self.hint() {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("an ERROR report returns control to PostgreSQL")
    }
}

/// Says (WARNING, so that it shows even inside CREATE EXTENSION, which
/// hides notices) that nothing will be pushed without the preload.
pub fn warn_without_preload() {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        "the queue background worker is not running: jobs are only delivered to consumers \
         that call queue_claim()",
        "queue",
    )
    .set_hint(
        "Add queue to shared_preload_libraries in postgresql.conf and restart the server \
         for push delivery through senders.",
    )
    .report(PgLogLevel::WARNING);
}

/// Says that a schedule is stored but nothing fires it without the preload.
pub fn warn_schedules_without_preload() {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        "the queue background worker is not running: the schedule is stored, but no tick \
         fires until it runs",
        "queue",
    )
    .set_hint(
        "Add queue to shared_preload_libraries in postgresql.conf and restart the server; \
         queue_run_schedule() enqueues a schedule's job by hand meanwhile.",
    )
    .report(PgLogLevel::WARNING);
}

/// Unwraps a value, or raises the error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, QueueError> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| e.raise())
    }
}

/// A required argument: NULL raises 22004 naming it.
pub fn required<T>(value: Option<T>, argument: &'static str) -> T {
    value.unwrap_or_else(|| QueueError::NullArgument { argument }.raise())
}

/// The elements of an array argument: a NULL element raises 22004 naming
/// its position.
pub fn no_null_elements<T>(values: Vec<Option<T>>, argument: &'static str) -> Vec<T> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.unwrap_or_else(|| {
                QueueError::NullElement {
                    argument,
                    position: i + 1,
                }
                .raise()
            })
        })
        .collect()
}
