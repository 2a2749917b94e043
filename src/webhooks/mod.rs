//! HTTP delivery: a queue's jobs POSTed to a registered URL by the
//! background worker, signed as the Standard Webhooks specification says,
//! to endpoints that `queue.webhook_allow` allows.

pub mod allow;
pub mod dispatch;
pub mod outcome;
pub mod sign;
