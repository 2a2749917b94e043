//! Internals, tested inside PostgreSQL.

use pgrx::prelude::*;

#[pg_test]
fn schema_is_installed() {
    let n: Option<i64> = Spi::get_one("SELECT count(*) FROM queue_queues").unwrap();
    assert_eq!(n, Some(0));
}
