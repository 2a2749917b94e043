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

    /// Every statement prepares with the parameter types queries.rs
    /// declares, its result columns are the ones declared, by name and in
    /// order, and its text names each parameter it declares: a column or a
    /// parameter added, dropped, renamed or moved on one side only fails
    /// here.
    #[pg_test]
    fn statements_have_their_declared_shape() {
        Spi::run("SET LOCAL search_path = pg_catalog, public, pg_temp").unwrap();
        for stmt in queries::ALL {
            assert_eq!(stmt.params.len(), stmt.types.len(), "{}", stmt.file);
            let c_sql = std::ffi::CString::new(stmt.sql).unwrap();
            let mut types: Vec<pg_sys::Oid> = stmt.types.iter().map(|t| t.value()).collect();
            // SAFETY: inside this test's transaction, with SPI connected for
            // the call; the text and the type array outlive SPI_prepare,
            // which copies them; the plan's sources and their result
            // descriptor are read before SPI_finish frees them.
            let columns = unsafe {
                assert_eq!(pg_sys::SPI_connect(), pg_sys::SPI_OK_CONNECT as i32);
                let plan =
                    pg_sys::SPI_prepare(c_sql.as_ptr(), types.len() as i32, types.as_mut_ptr());
                assert!(!plan.is_null(), "{} does not prepare", stmt.file);
                let sources = pgrx::PgList::<pg_sys::CachedPlanSource>::from_pg(
                    pg_sys::SPI_plan_get_plan_sources(plan),
                );
                let source = sources.get_ptr(sources.len() - 1).unwrap();
                let desc = (*source).resultDesc;
                let names: Vec<String> = if desc.is_null() {
                    Vec::new()
                } else {
                    pgrx::PgTupleDesc::from_pg_unchecked(desc)
                        .iter()
                        .map(|a| a.name().to_string())
                        .collect()
                };
                pg_sys::SPI_finish();
                names
            };
            assert_eq!(columns, stmt.columns, "the result columns of {}", stmt.file);
            for n in 1..=stmt.params.len() {
                assert!(
                    stmt.sql.contains(&format!("${n}")),
                    "{} declares ${n} ({}) but never uses it",
                    stmt.file,
                    stmt.params[n - 1]
                );
            }
            assert!(
                !stmt.sql.contains(&format!("${}", stmt.params.len() + 1)),
                "{} uses more parameters than it declares",
                stmt.file
            );
        }
    }

    /// A column read under a name its statement does not declare, or as
    /// another type, is an error with SQLSTATE XX000, never a silent NULL.
    #[pg_test(
        error = "internal error in the queue extension's statement find_queue.sql: it declares no result column nosuch"
    )]
    fn a_column_read_by_a_wrong_name_is_an_error() {
        Spi::run("SELECT queue_create('t.shape')").unwrap();
        db::with_tables(|client| {
            let row = db::run(client, &queries::FIND_QUEUE, db::args![name = "t.shape"])
                .first()
                .unwrap();
            let _: Option<i32> = row.get("nosuch");
        });
    }

    #[pg_test(
        error = "internal error in the queue extension's statement find_queue.sql: called with (queue), declared (name)"
    )]
    fn arguments_under_other_names_are_an_error() {
        db::with_tables(|client| {
            db::run(client, &queries::FIND_QUEUE, db::args![queue = "t.shape"]);
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
                            || current_setting('plan_cache_mode') || ' ' || current_setting('enable_seqscan')",
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
        assert_eq!(inside, format!("{owner} off force_generic_plan off"));
        assert_eq!(db::calling_role(), caller);
        // the plan settings and the search path come back too
        assert_eq!(
            one::<String>(
                "SELECT current_setting('jit') || ' ' || current_setting('plan_cache_mode')
                        || ' ' || current_setting('enable_seqscan')"
            ),
            "on auto on"
        );
        assert_eq!(
            one::<String>("SELECT current_user::text"),
            "queue_test_caller"
        );
        Spi::run("RESET ROLE").unwrap();
    }

    /// Inside, only pg_catalog and the extension's schema are searched: no
    /// temporary schema, nothing of the caller's search_path.
    #[pg_test]
    fn statements_see_only_the_catalog_and_the_extension_schema() {
        Spi::run("SET search_path = pg_temp, public").unwrap();
        let inside: String = db::with_tables(|client| {
            client
                .select("SELECT current_schemas(true)::text", None, &[])
                .unwrap()
                .first()
                .get_one()
                .unwrap()
                .unwrap()
        });
        let schema: String = one(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'queue'",
        );
        assert_eq!(inside, format!("{{pg_catalog,{schema}}}"));
        assert_eq!(
            one::<String>("SELECT current_setting('search_path')"),
            "pg_temp, public"
        );
    }

    /// queue_done_slot() is inlined into the statements that call it for
    /// every finished job, and keeps its four-hour windows.
    #[pg_test]
    fn the_done_slot_is_inlined() {
        let plan: String = Spi::connect_mut(|client| {
            client
                .update(
                    "EXPLAIN (VERBOSE, COSTS OFF)
                     SELECT queue_done_slot(now() + g * interval '1 hour') FROM generate_series(1, 2) g",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        });
        assert!(!plan.contains("queue_done_slot"), "{plan}");
        let slots: String = one(
            "SELECT string_agg(queue_done_slot(t::timestamptz)::text, ' ' ORDER BY t)
               FROM unnest(ARRAY['1969-12-31 19:59:59+00', '1969-12-31 20:00:00+00',
                                 '1970-01-01 00:00:00+00', '1970-01-01 03:59:59+00',
                                 '1970-01-01 04:00:00+00', '1970-01-02 08:00:00+00',
                                 '2026-11-30 12:00:00+00']) t",
        );
        // 2026-11-30 12:00 UTC is 1,796,040,000 s: window 124,725, slot 5
        assert_eq!(slots, "6 7 0 0 1 0 5");
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
        // the first calls prepare the statements they run...
        for _ in 0..2 {
            Spi::run("SELECT queue_enqueue('t.plans', '{}')").unwrap();
            Spi::run("SELECT queue_complete(id, lease) FROM queue_claim('t.plans')").unwrap();
        }
        let prepared = crate::db::prepared_count();
        assert!(prepared > 0, "the calls prepared their statements");
        // ...and later ones reuse them
        for _ in 0..3 {
            Spi::run("SELECT queue_enqueue('t.plans', '{}')").unwrap();
            Spi::run("SELECT queue_complete(id, lease) FROM queue_claim('t.plans')").unwrap();
        }
        assert_eq!(
            crate::db::prepared_count(),
            prepared,
            "no statement prepared again"
        );
        // kept SPI plans are not SQL prepared statements: none leak into the session
        let sql_prepared: i64 = one("SELECT count(*) FROM pg_prepared_statements");
        assert_eq!(sql_prepared, 0);
        let n: i64 =
            one("SELECT count(*) FROM queue_jobs WHERE queue = 't.plans' AND status = 'succeeded'");
        assert_eq!(n, 5);
    }

    /// Runs one of the API's statements the way the API does (one generic
    /// plan) under EXPLAIN ANALYZE, and checks that it reads the job tables
    /// through indexes only and no more than `max_rows` rows from any of them:
    /// its cost does not grow with the jobs stored.
    fn assert_index_driven(stmt: &crate::db::Statement, args: &str, max_rows: i64) {
        let types = stmt
            .types
            .iter()
            .map(|t| one::<String>(&format!("SELECT format_type({}, NULL)", t.value().to_u32())))
            .collect::<Vec<_>>()
            .join(", ");
        Spi::run("SET LOCAL plan_cache_mode = force_generic_plan").unwrap();
        Spi::run("SET LOCAL enable_seqscan = off").unwrap();
        Spi::run("DEALLOCATE ALL").unwrap();
        Spi::run(&format!("PREPARE under_test ({types}) AS {}", stmt.sql)).unwrap();
        let plan: pgrx::datum::Json = one(&format!(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) EXECUTE under_test({args})"
        ));
        let mut nodes = Vec::new();
        plan_nodes(&plan.0[0]["Plan"], &mut nodes);
        for node in &nodes {
            let kind = node["Node Type"].as_str().unwrap();
            assert!(
                !["Hash Join", "Merge Join"].contains(&kind),
                "{kind}: {}",
                plan.0
            );
            let relation = node["Relation Name"].as_str().unwrap_or("");
            let job_table =
                relation.starts_with("queue_live") || relation.starts_with("queue_done");
            if job_table && kind != "ModifyTable" {
                assert!(
                    kind.starts_with("Index"),
                    "{kind} on {relation}: {}",
                    plan.0
                );
                // PostgreSQL 18 shows row counts as decimals, per loop.
                let read = node["Actual Rows"].as_f64().unwrap()
                    + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0);
                assert!(
                    read <= max_rows as f64,
                    "{read} rows from {relation}: {}",
                    plan.0
                );
            }
        }
    }

    /// Claims and completions stay O(batch) whatever else is stored: jobs
    /// scheduled for later, jobs of other queues, jobs in flight, finished jobs.
    #[pg_test]
    fn claims_and_completions_read_only_their_batch() {
        Spi::run("SELECT queue_create('t.scan')").unwrap();
        Spi::run("SELECT queue_create('t.other')").unwrap();
        let fill = |queue: &str, extra: &str| {
            Spi::run(&format!(
                "SELECT count(*) FROM queue_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[5000]){extra})"
            ))
            .unwrap();
        };
        fill("t.scan", ", delay => '1 hour', priority => 9");
        fill("t.other", "");
        fill("t.scan", "");
        Spi::run("SELECT count(*) FROM queue_claim('t.scan', max_jobs => 2000)").unwrap();
        Spi::run(
            "SELECT count(*) FROM (
                SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                  FROM queue_claim('t.scan', max_jobs => 1000)) c,
                LATERAL queue_complete_batch(c.ids, c.leases)",
        )
        .unwrap();
        Spi::run("ANALYZE queue_live, queue_done").unwrap();
        let queue: i32 = one("SELECT id FROM queue_queues WHERE name = 't.scan'");
        let batch: String = one(&format!(
            "SELECT quote_literal(array_agg(id)::text) FROM (SELECT id FROM queue_live
              WHERE queue_id = {queue} AND state = 'processing' LIMIT 10) s"
        ));
        let leases: String = one(&format!(
            "SELECT quote_literal(array_agg(lease)::text) FROM queue_live WHERE id = ANY ({batch}::bigint[])"
        ));
        assert_index_driven(
            &queries::CLAIM,
            &format!("{queue}, 10, 5, now() + interval '1 hour', 'test', 't.scan', false"),
            10,
        );
        assert_index_driven(
            &queries::COMPLETE,
            &format!("{batch}, now(), 'succeeded', {leases}, NULL"),
            10,
        );
        assert_index_driven(
            &queries::DELIVER_LOCK,
            &format!("{batch}, {leases}, 't.scan', 5"),
            10,
        );
        assert_index_driven(
            &queries::FINISH,
            &format!("{batch}, now(), 'succeeded'"),
            10,
        );
        assert_index_driven(&queries::PROMOTE, &format!("{queue}, now(), 1000"), 0);
        assert_index_driven(&queries::TAKE_BACK, &format!("{queue}, now(), 10, 5"), 0);
    }

    /// queue_stats reads the counters and a few index entries, never the
    /// finished jobs nor the backlog of due ones: its cost grows with
    /// neither.
    #[pg_test]
    fn stats_never_read_finished_jobs_or_the_backlog() {
        Spi::run("SELECT queue_create('t.stats', max_attempts => 1)").unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.stats', array_fill('{}'::jsonb, ARRAY[3]))")
            .unwrap();
        Spi::run("SELECT queue_complete(id, lease) FROM queue_claim('t.stats')").unwrap();
        Spi::run("SELECT queue_fail(id, lease, 'x') FROM queue_claim('t.stats')").unwrap();
        Spi::run("SELECT queue_create('t.backlog')").unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.backlog', array_fill('{}'::jsonb, ARRAY[5000]))")
            .unwrap();
        Spi::run("ANALYZE queue_live").unwrap();
        let plan: pgrx::datum::Json =
            one("EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) SELECT * FROM queue_stats");
        let mut nodes = Vec::new();
        plan_nodes(&plan.0[0]["Plan"], &mut nodes);
        let relations: Vec<&str> = nodes
            .iter()
            .filter_map(|n| n["Relation Name"].as_str())
            .collect();
        assert!(relations.iter().any(|r| r.starts_with("queue_live")));
        assert!(relations.contains(&"queue_counters"));
        assert!(
            !relations
                .iter()
                .any(|r| r.starts_with("queue_done") || *r == "queue_dead"),
            "{relations:?}"
        );
        let live_rows: f64 = nodes
            .iter()
            .filter(|n| {
                n["Relation Name"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("queue_live"))
            })
            .map(|n| n["Actual Rows"].as_f64().unwrap() * n["Actual Loops"].as_f64().unwrap())
            .sum();
        assert!(live_rows < 100.0, "{live_rows} rows of queue_live read");
        let pending: Option<i64> =
            Spi::get_one("SELECT pending FROM queue_stats WHERE queue = 't.backlog'").unwrap();
        assert_eq!(pending, Some(5000));
        let figures: (Option<i64>, Option<i64>, Option<i64>) = Spi::get_three(
            "SELECT pending, succeeded, failed FROM queue_stats WHERE queue = 't.stats'",
        )
        .unwrap();
        assert_eq!(figures, (Some(1), Some(1), Some(1)));
    }

    /// The sender check (syscache look-ups) refuses each thing a sender
    /// cannot be, with the refusal that words it, and the signature a
    /// registration stores is schema-qualified.
    #[pg_test]
    fn the_sender_check_refuses_what_a_sender_cannot_be() {
        use crate::sender_check::{check, signature, Refusal};
        Spi::run(
            "CREATE ROLE t_sender_role;
             CREATE SCHEMA \"t Schema\";
             CREATE FUNCTION \"t Schema\".t_ok(j jsonb) RETURNS void LANGUAGE sql AS '';
             CREATE FUNCTION t_private(j jsonb) RETURNS void LANGUAGE sql AS '';
             REVOKE EXECUTE ON FUNCTION t_private(jsonb) FROM PUBLIC;
             CREATE FUNCTION t_text(j text) RETURNS void LANGUAGE sql AS '';
             CREATE FUNCTION t_two(j jsonb, k jsonb) RETURNS void LANGUAGE sql AS '';
             CREATE FUNCTION t_none() RETURNS void LANGUAGE sql AS '';
             CREATE FUNCTION t_set(j jsonb) RETURNS SETOF int LANGUAGE sql AS 'SELECT 1';
             CREATE FUNCTION t_out(j jsonb, OUT a int, OUT b int) LANGUAGE sql AS 'SELECT 1, 2';
             CREATE PROCEDURE t_proc(j jsonb) LANGUAGE sql AS '';
             CREATE AGGREGATE t_agg(jsonb) (SFUNC = jsonb_concat, STYPE = jsonb);",
        )
        .unwrap();
        let role: pg_sys::Oid = one("SELECT 't_sender_role'::regrole::oid");
        let superuser: pg_sys::Oid = one("SELECT 10::oid");
        let oid_of = |signature: &str| -> pg_sys::Oid {
            one(&format!("SELECT '{signature}'::regprocedure::oid"))
        };
        let cases = [
            ("\"t Schema\".t_ok(jsonb)", Ok(())),
            ("t_private(jsonb)", Err(Refusal::NotExecutable)),
            ("t_text(text)", Err(Refusal::Arguments)),
            ("t_two(jsonb,jsonb)", Err(Refusal::Arguments)),
            ("t_none()", Err(Refusal::Arguments)),
            (
                "t_set(jsonb)",
                Err(Refusal::Kind("a set-returning function")),
            ),
            ("t_out(jsonb)", Ok(())),
            ("t_proc(jsonb)", Err(Refusal::Kind("a procedure"))),
            ("t_agg(jsonb)", Err(Refusal::Kind("an aggregate"))),
        ];
        for (function, expected) in cases {
            assert_eq!(check(oid_of(function), role), expected, "{function}");
        }
        // the superuser may execute anything
        assert_eq!(check(oid_of("t_private(jsonb)"), superuser), Ok(()));
        let ok = oid_of("\"t Schema\".t_ok(jsonb)");
        let stored = db::with_tables(|client| signature(client, ok));
        assert_eq!(stored.as_deref(), Some("\"t Schema\".t_ok(jsonb)"));
        Spi::run("DROP FUNCTION \"t Schema\".t_ok(jsonb)").unwrap();
        assert_eq!(check(ok, role), Err(Refusal::Missing));
        assert_eq!(db::with_tables(|client| signature(client, ok)), None);
        // a refusal names a function gone meanwhile by its oid
        assert_eq!(
            Refusal::Arguments.at_delivery("t_ok(jsonb)", "r", ok, None),
            format!(
                "sender {} must take exactly one argument, of type jsonb",
                ok.to_u32()
            )
        );
    }

    /// queue_complete answers a job of a queue that keeps nothing without
    /// the statement, with the statement's rules: it sees a claim made by
    /// the same statement, completes only under the lease held and only
    /// once, and tallies the job. A queue that keeps history goes through
    /// the statement, until its retention becomes 0.
    #[pg_test]
    fn a_single_completion_of_a_queue_that_keeps_nothing_skips_the_statement() {
        use crate::direct_completion::answered;
        Spi::run("SELECT queue_create('t.none', retention => '0')").unwrap();
        Spi::run("SELECT queue_create('t.kept')").unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.none', array_fill('{}'::jsonb, ARRAY[4]))")
            .unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.kept', array_fill('{}'::jsonb, ARRAY[3]))")
            .unwrap();
        let claim_and_complete = |queue: &str| -> i64 {
            one(&format!(
                "SELECT count(*) FROM queue_claim('{queue}', max_jobs => 2) c
                  WHERE queue_complete(c.id, c.lease)"
            ))
        };
        let before = answered();
        assert_eq!(claim_and_complete("t.none"), 2);
        assert_eq!(answered() - before, 2);

        Spi::run("CREATE TEMP TABLE c AS SELECT id, lease FROM queue_claim('t.none')").unwrap();
        assert!(!one::<bool>(
            "SELECT queue_complete(id, gen_random_uuid()) FROM c"
        ));
        assert!(one::<bool>("SELECT queue_complete(id, lease) FROM c"));
        assert!(!one::<bool>("SELECT queue_complete(id, lease) FROM c"));
        assert!(!one::<bool>("SELECT queue_complete(-1, gen_random_uuid())"));
        // a job waiting (no lease) is not completed
        assert!(!one::<bool>(
            "SELECT queue_complete(id, gen_random_uuid()) FROM queue_jobs
              WHERE queue = 't.none' AND status = 'pending'"
        ));
        assert_eq!(answered() - before, 7);
        assert_eq!(
            one::<i64>("SELECT count(*) FROM queue_live JOIN c USING (id)"),
            0
        );
        let stats: (i64, i64, i64) = Spi::get_three(
            "SELECT succeeded_total, succeeded, pending FROM queue_stats WHERE queue = 't.none'",
        )
        .map(|(a, b, c)| (a.unwrap(), b.unwrap(), c.unwrap()))
        .unwrap();
        assert_eq!(stats, (3, 0, 1));

        let before = answered();
        assert_eq!(claim_and_complete("t.kept"), 2);
        assert_eq!(answered() - before, 0);
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM queue_jobs WHERE queue = 't.kept' AND status = 'succeeded'"
            ),
            2
        );
        Spi::run("SELECT queue_alter('t.kept', retention => '0')").unwrap();
        assert_eq!(claim_and_complete("t.kept"), 1);
        assert_eq!(answered() - before, 1);
        assert_eq!(
            one::<i64>("SELECT succeeded_total FROM queue_stats WHERE queue = 't.kept'"),
            3
        );
    }

    /// queue_complete_batch takes the same way for each pair it can (one
    /// snapshot, one tally row), and the statement for the others: the
    /// pairs of a queue that keeps history, and every pair when results
    /// are given. It returns the ids completed either way, ascending.
    #[pg_test]
    fn a_batch_completion_skips_the_statement_where_a_single_one_would() {
        use crate::direct_completion::answered;
        Spi::run("SELECT queue_create('t.bnone', retention => '0')").unwrap();
        Spi::run("SELECT queue_create('t.bkept')").unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.bnone', array_fill('{}'::jsonb, ARRAY[4]))")
            .unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.bkept', array_fill('{}'::jsonb, ARRAY[3]))")
            .unwrap();
        Spi::run(
            "CREATE TEMP TABLE b AS
             SELECT row_number() OVER (ORDER BY id) AS n, id, lease::text AS lease
               FROM (SELECT id, lease FROM queue_claim('t.bnone', max_jobs => 4)
                     UNION ALL SELECT id, lease FROM queue_claim('t.bkept', max_jobs => 3)) c",
        )
        .unwrap();
        let id = |n: i64| one::<i64>(&format!("SELECT id FROM b WHERE n = {n}"));
        let lease = |n: i64| one::<String>(&format!("SELECT lease FROM b WHERE n = {n}"));
        let tallies = || one::<i64>("SELECT count(*) FROM queue_tallies");
        // t.bnone's 1 to 3, 1 again, 4 under a lease not held; t.bkept's 5, 6
        let pairs: Vec<(i64, String)> = vec![
            (id(3), lease(3)),
            (id(1), lease(1)),
            (id(2), lease(2)),
            (id(1), lease(1)),
            (id(4), "00000000-0000-4000-8000-000000000000".into()),
            (id(6), lease(6)),
            (id(5), lease(5)),
        ];
        let (ids, leases): (Vec<String>, Vec<String>) = pairs
            .iter()
            .map(|(i, l)| (i.to_string(), l.clone()))
            .unzip();
        let (before, rows) = (answered(), tallies());
        let done: Vec<i64> = Spi::connect(|client| {
            client
                .select(
                    &format!(
                        "SELECT * FROM queue_complete_batch('{{{}}}'::bigint[], '{{{}}}'::uuid[])",
                        ids.join(","),
                        leases.join(",")
                    ),
                    None,
                    &[],
                )
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(done, vec![id(1), id(2), id(3), id(5), id(6)]);
        assert_eq!(
            answered() - before,
            5,
            "t.bnone's pairs, those not held included; none of t.bkept's"
        );
        assert_eq!(
            tallies() - rows,
            2,
            "one row for t.bnone's three, the statement's for t.bkept"
        );
        assert_eq!(
            one::<i64>("SELECT succeeded_total FROM queue_stats WHERE queue = 't.bnone'"),
            3
        );
        // with results: every pair by the statement
        let before = answered();
        let completed: i64 = one(&format!(
            "SELECT count(*) FROM queue_complete_batch(ARRAY[{}]::bigint[], ARRAY['{}']::uuid[],
                                                       ARRAY['{{}}'::jsonb])",
            id(4),
            lease(4)
        ));
        assert_eq!((completed, answered() - before), (1, 0));
    }

    /// What the completion without the statement knows of the tables
    /// follows them within one transaction: an index or a CHECK constraint
    /// added to queue_tallies (whose insert here would not keep it) sends
    /// completions to the statement, and once it is gone they skip the
    /// statement again; so does an id index that is not valid.
    #[pg_test]
    fn a_completion_without_the_statement_follows_the_tables() {
        use crate::direct_completion::answered;
        Spi::run("SELECT queue_create('t.follow', retention => '0')").unwrap();
        Spi::run("SELECT queue_enqueue_batch('t.follow', array_fill('{}'::jsonb, ARRAY[6]))")
            .unwrap();
        let claim_and_complete = || -> i64 {
            one("SELECT count(*) FROM queue_claim('t.follow') c WHERE queue_complete(c.id, c.lease)")
        };
        let skipped = |change: &str| {
            Spi::run(change).unwrap();
            let before = answered();
            assert_eq!(claim_and_complete(), 1, "{change}");
            answered() - before
        };
        assert_eq!(skipped("SELECT 1"), 1);
        assert_eq!(
            skipped("CREATE INDEX t_tallies ON queue_tallies (queue_id)"),
            0
        );
        assert_eq!(skipped("DROP INDEX t_tallies"), 1);
        assert_eq!(
            skipped("ALTER TABLE queue_tallies ADD CONSTRAINT t_check CHECK (slot >= -1)"),
            0
        );
        assert_eq!(
            skipped("ALTER TABLE queue_tallies DROP CONSTRAINT t_check"),
            1
        );
        assert_eq!(
            skipped(
                "UPDATE pg_index SET indisvalid = false
                  WHERE indexrelid = 'queue_live_0_id_idx'::regclass"
            ),
            0
        );
        assert_eq!(
            one::<i64>("SELECT succeeded_total FROM queue_stats WHERE queue = 't.follow'"),
            6
        );
    }

    /// A publication that publishes deletes from the live partitions, which
    /// have no replica identity, refuses a completion without the statement
    /// as it refuses the statement's DELETE.
    #[pg_test(
        error = "cannot delete from table \"queue_live_0\" because it does not have a replica identity and publishes deletes"
    )]
    fn a_completion_without_the_statement_meets_a_publication_as_the_statement_does() {
        Spi::run("SELECT queue_create('t.pub', retention => '0')").unwrap();
        Spi::run("SELECT queue_enqueue('t.pub', '{}')").unwrap();
        Spi::run("CREATE TEMP TABLE c AS SELECT id, lease FROM queue_claim('t.pub')").unwrap();
        Spi::run("CREATE PUBLICATION t_all FOR ALL TABLES").unwrap();
        Spi::run("SELECT queue_complete(id, lease) FROM c").unwrap();
    }

    fn plan_nodes<'a>(node: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        out.push(node);
        for child in node["Plans"].as_array().into_iter().flatten() {
            plan_nodes(child, out);
        }
    }
}
