//! Internals, tested inside PostgreSQL.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::catalog;
    use crate::db;
    use crate::errors::QueueError;
    use crate::jsonb::{ArrayShape, Jsonb, JsonbArray};
    use crate::queries;

    fn one<T: IntoDatum + FromDatum>(sql: &str) -> T {
        Spi::get_one(sql)
            .expect("query runs")
            .expect("a non-NULL value")
    }

    #[pg_test]
    fn every_statement_prepares() {
        let all = [
            &queries::FIND_QUEUE,
            &queries::CREATE_QUEUE,
            &queries::ALTER_QUEUE,
            &queries::DROP_QUEUE,
            &queries::ENQUEUE,
            &queries::ENQUEUE_BATCH,
            &queries::DEDUP_LOCK,
            &queries::DEDUP_FIND,
            &queries::PROMOTE,
            &queries::RESCUE,
            &queries::CLAIM,
            &queries::COMPLETE,
            &queries::FAIL_LOCK,
            &queries::FAIL_RETRY,
            &queries::BURY,
            &queries::EXTEND,
        ];
        Spi::connect(|client| {
            for stmt in all {
                let prepared = client.prepare_mut(stmt.sql, stmt.args);
                assert!(prepared.is_ok(), "cannot prepare {}", stmt.sql);
            }
        });
    }

    #[pg_test]
    fn tables_are_reached_as_the_extension_owner_and_the_caller_comes_back() {
        Spi::run("CREATE ROLE queue_test_caller").unwrap();
        Spi::run("SET ROLE queue_test_caller").unwrap();
        let caller = db::calling_role();
        let inside: String = db::with_tables(|client| {
            client
                .select(
                    "SELECT current_user || ' ' || current_setting('jit') || ' '
                            || current_setting('plan_cache_mode')",
                    None,
                    &[],
                )
                .unwrap()
                .first()
                .get_one()
                .unwrap()
                .unwrap()
        });
        let owner: String =
            one("SELECT extowner::regrole::text FROM pg_extension WHERE extname = 'queue'");
        assert_eq!(inside, format!("{owner} off force_generic_plan"));
        assert_eq!(db::calling_role(), caller);
        assert_eq!(
            one::<String>("SELECT current_user::text"),
            "queue_test_caller"
        );
        Spi::run("RESET ROLE").unwrap();
    }

    #[pg_test]
    fn a_missing_queue_is_none_and_a_bad_name_an_error() {
        Spi::run("SELECT queue_create('t.exists', lease => '42 seconds', max_attempts => 3)")
            .unwrap();
        db::with_tables(|client| {
            let q = catalog::find(client, "t.exists").unwrap().expect("found");
            assert_eq!(q.name, "t.exists");
            assert_eq!(q.max_attempts, 3);
            assert_eq!(q.lease_us, 42_000_000);
            assert!(!q.paused);
            assert!(catalog::find(client, "t.absent").unwrap().is_none());
            assert!(matches!(
                catalog::find(client, "T.Bad"),
                Err(QueueError::InvalidName { .. })
            ));
            assert!(matches!(
                catalog::require(client, "t.absent"),
                Err(QueueError::UndefinedQueue { .. })
            ));
        });
    }

    #[pg_test]
    fn jsonb_passes_through_without_conversion() {
        // 40 significant digits: more than an f64, and than serde_json keeps
        let text = r#"{"n": 1234567890123456789012345678901234567890.5, "s": "\u00e9"}"#;
        let value: Jsonb = Spi::get_one_with_args("SELECT $1::jsonb", &[text.into()])
            .unwrap()
            .unwrap();
        let same: bool =
            Spi::get_one_with_args("SELECT $1 = $2::jsonb", &[value.into(), text.into()])
                .unwrap()
                .unwrap();
        assert!(same);
        assert_eq!(value.type_name(), "object");
    }

    #[pg_test]
    fn batch_arrays_report_their_shape() {
        let shape = |sql: &str| -> ArrayShape {
            let array: JsonbArray = Spi::get_one(sql).unwrap().unwrap();
            array.shape()
        };
        assert_eq!(
            shape("SELECT ARRAY['1', '2', '3']::jsonb[]"),
            ArrayShape {
                len: 3,
                dimensions: 1,
                first_null: None
            }
        );
        assert_eq!(
            shape("SELECT ARRAY['1', NULL, NULL]::jsonb[]"),
            ArrayShape {
                len: 3,
                dimensions: 1,
                first_null: Some(2)
            }
        );
        assert_eq!(shape("SELECT ARRAY[['1'], ['2']]::jsonb[]").dimensions, 2);
        assert_eq!(shape("SELECT '{}'::jsonb[]").len, 0);
    }

    #[pg_test]
    fn plans_are_prepared_once_per_backend() {
        Spi::run("SELECT queue_create('t.plans')").unwrap();
        let count = || -> i64 {
            Spi::get_one("SELECT count(*) FROM pg_prepared_statements")
                .unwrap()
                .unwrap()
        };
        // kept SPI plans are not SQL prepared statements: none leak into the session
        let before = count();
        for _ in 0..3 {
            Spi::run("SELECT queue_enqueue('t.plans', '{}')").unwrap();
        }
        assert_eq!(count(), before);
        let n: i64 = one("SELECT count(*) FROM queue_jobs WHERE queue = 't.plans'");
        assert_eq!(n, 3);
    }

    /// The claim reads the ready index in claim order and stops after the batch:
    /// its cost does not grow with scheduled jobs, jobs in flight, or other queues.
    #[pg_test]
    fn a_claim_reads_only_the_ready_index() {
        Spi::run("SELECT queue_create('t.scan')").unwrap();
        Spi::run("SELECT queue_create('t.other')").unwrap();
        Spi::run(
            "SELECT count(*) FROM queue_enqueue_batch('t.scan', array_fill('{}'::jsonb, ARRAY[2000]), delay => '1 hour')",
        )
        .unwrap();
        Spi::run("SELECT count(*) FROM queue_enqueue_batch('t.other', array_fill('{}'::jsonb, ARRAY[2000]))")
            .unwrap();
        Spi::run("SELECT count(*) FROM queue_enqueue_batch('t.scan', array_fill('{}'::jsonb, ARRAY[2000]))")
            .unwrap();
        Spi::run("SELECT count(*) FROM queue_claim('t.scan', max_jobs => 1000)").unwrap();
        Spi::run("ANALYZE queue_live").unwrap();
        let plan: pgrx::datum::Json = one(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON)
             SELECT id FROM queue_live
              WHERE queue_id = (SELECT id FROM queue_queues WHERE name = 't.scan') AND state = 'ready'
              ORDER BY priority DESC, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED",
        );
        let mut nodes = Vec::new();
        plan_nodes(&plan.0[0]["Plan"], &mut nodes);
        let scans: Vec<_> = nodes
            .iter()
            .filter(|n| {
                n["Relation Name"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("queue_live"))
            })
            .collect();
        assert!(!scans.is_empty());
        for scan in scans {
            assert_eq!(scan["Node Type"], "Index Scan", "{}", plan.0);
            let index = scan["Index Name"].as_str().unwrap();
            assert!(index.contains("priority_run_at_id"), "{index}");
            assert!(scan["Actual Rows"].as_i64().unwrap() <= 10, "{}", plan.0);
        }
        assert!(
            !nodes.iter().any(|n| n["Node Type"] == "Sort"),
            "{}",
            plan.0
        );
    }

    fn plan_nodes<'a>(node: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        out.push(node);
        for child in node["Plans"].as_array().into_iter().flatten() {
            plan_nodes(child, out);
        }
    }
}
