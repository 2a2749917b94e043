//! Time as the extension counts it: microseconds since 2000-01-01 (a
//! PostgreSQL TimestampTz), from the wall clock at the moment of the call
//! (not the transaction's start: leases and delays count from then).

use pgrx::pg_sys;

/// One second.
pub const SECOND_US: i64 = 1_000_000;

/// The wall-clock time now.
pub fn now_us() -> i64 {
    // SAFETY: reads the system clock; no precondition.
    unsafe { pg_sys::GetCurrentTimestamp() }
}

/// A number of seconds (a setting's value, say), in microseconds.
pub fn seconds(n: i32) -> i64 {
    i64::from(n) * SECOND_US
}
