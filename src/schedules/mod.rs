//! Recurring jobs (docs/schedules.md). When a schedule's ticks fall is
//! computed by pure functions of its expression, its zone and the clock,
//! so that the API, the worker and the unit tests compute it alike.
//!
//! - `cron`: which expressions the API takes (croner parses them)
//! - `ticks`: the next tick after an instant, on a zone's wall clock
//! - `plan`: which due ticks fire and which are skipped by `catch_up`
//! - `fire`: enqueueing the jobs of due ticks, in the database

pub mod cron;
pub mod fire;
pub mod plan;
pub mod ticks;
