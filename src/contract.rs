//! The words and limits of the SQL contract that several modules name: the
//! input rules (rules.rs) check them, the errors (errors.rs) quote them.

/// Largest array `queue_enqueue_batch` and `queue_complete_batch` accept, and
/// the most jobs one `queue_claim` call hands out.
pub const MAX_BATCH: usize = 10_000;

pub const NAME_RULE: &str = "a queue name is 1 to 63 characters of a-z, 0-9, _, -, . and :";

/// The status words of a job, as `queue_jobs` shows them.
pub const STATUSES: [&str; 5] = ["pending", "processing", "succeeded", "failed", "cancelled"];

/// The name background workers claim jobs under. It marks the jobs a worker
/// has in flight, so that the next worker knows which ones a stopped worker
/// left behind; consumers may not use it.
pub const WORKER_NAME: &str = "queue worker";

/// The words of a schedule's `catch_up`, as errors quote them.
pub const CATCH_UP_WORDS: &str = "'none', 'one' or 'all'";

/// The largest result a job keeps (`queue_complete`'s, a sender's), in
/// bytes of its jsonb: a megabyte, the least the contract allows.
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// How much of a webhook's response body its job keeps as its result
/// (`{"status", "body", "truncated"}`), in bytes.
pub const WEBHOOK_RESULT_BODY_BYTES: usize = 64 * 1024;

/// The words of `on_parent_failure`, as errors quote them.
pub const PARENT_FAILURE_WORDS: &str = "'cancel' or 'run'";
