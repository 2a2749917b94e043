//! Push delivery through sender hooks, on a cluster with the library
//! preloaded: exactly once, the retry policy, QU001, the sender's role and
//! settings, revoked privileges, search_path hijacks, a crash of the
//! server, a sender that kills its worker or the server, cancels during
//! delivery, and unregistering. Deadlines are generous; nothing here asserts a timing.

use std::collections::HashSet;

use queue_client_tests::{
    all_rows, column, enqueue_many, eventually, one, one_row, unfinished, Client, Cluster, NoTls,
    DB, DURABLE,
};

/// (status, count) of the jobs of `queue`.
fn statuses(client: &mut Client, queue: &str) -> Vec<(String, i64)> {
    all_rows(
        client,
        "SELECT status, count(*) FROM queue_jobs WHERE queue = $1 GROUP BY 1 ORDER BY 1",
        &[&queue],
    )
}

/// Waits until every job of `queue` has ended (no pending or processing).
fn drained(client: &mut Client, queue: &str) {
    eventually(&format!("queue {queue} to drain"), || {
        unfinished(client, queue) == 0
    });
}

/// A role `mailer` (no superuser) and a table `app.sent` that senders write
/// to: one row per call that committed.
fn setup(client: &mut Client) {
    client
        .batch_execute(
            "CREATE ROLE mailer LOGIN;
             CREATE SCHEMA app;
             GRANT USAGE ON SCHEMA app TO mailer;
             CREATE TABLE app.sent (job bigint, attempt int, who text, note text);
             GRANT INSERT, SELECT ON app.sent TO mailer;",
        )
        .unwrap();
}

/// `queue` owned by `mailer`, delivered by `sender` as mailer.
fn mailer_queue(client: &mut Client, queue: &str, sender: &str, options: &str) {
    client
        .batch_execute(&format!(
            "SET ROLE mailer;
             SELECT queue_create('{queue}'{options});
             SELECT queue_register_sender('{queue}', '{sender}', 10);
             RESET ROLE;"
        ))
        .unwrap();
}

fn sent_jobs(client: &mut Client) -> Vec<i64> {
    column(client, "SELECT job FROM app.sent ORDER BY job", &[])
}

/// (status, attempts, last_error) of job `id`.
fn outcome(client: &mut Client, id: i64) -> (String, i32, String) {
    one_row(
        client,
        "SELECT status, attempts, last_error FROM queue_job($1)",
        &[&id],
    )
}

/// A sender app.deliver that records each job in app.sent.
const DELIVER: &str = "CREATE FUNCTION app.deliver(job jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, 'sent')
$$;";

/// `queue` owned by mailer, delivered by a sender app.slow that sleeps
/// `sleep` (seconds, an SQL expression of `job`) before it records each job
/// and its attempt in app.sent.
fn slow_queue(client: &mut Client, queue: &str, sleep: &str) {
    client
        .batch_execute(&format!(
            "CREATE FUNCTION app.slow(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_sleep({sleep});
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                                              current_user, 'sent');
             END $$;"
        ))
        .unwrap();
    mailer_queue(client, queue, "app.slow(jsonb)", "");
}

#[test]
fn a_thousand_jobs_are_delivered_exactly_once() {
    // (one worker, so that its queue_workers row counts every delivery; a
    // helper's count leaves with it)
    let cluster = Cluster::start_with(&["queue.max_workers_per_database = 1"]);
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.deliver(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                                              current_user, job->'payload'->>'i')
             $$;",
        )
        .unwrap();
    mailer_queue(&mut client, "e2e", "app.deliver(jsonb)", "");
    let mut ids = enqueue_many(&mut client, "e2e", 1000);
    drained(&mut client, "e2e");
    assert_eq!(
        statuses(&mut client, "e2e"),
        [("succeeded".to_string(), 1000)]
    );
    ids.sort_unstable();
    assert_eq!(
        sent_jobs(&mut client),
        ids,
        "each job's effect exactly once"
    );
    let (who, attempts): (String, i64) = {
        let row = client
            .query_one("SELECT min(who), max(attempt) FROM app.sent", &[])
            .unwrap();
        (row.get(0), row.get::<_, i32>(1) as i64)
    };
    assert_eq!((who.as_str(), attempts), ("mailer", 1));
    // history says what the sender was told: attempt 1, by the worker
    let recorded: Vec<(i32, Option<String>, i64)> = all_rows(
        &mut client,
        "SELECT attempts, worker, count(*) FROM queue_jobs WHERE queue = 'e2e'
          GROUP BY 1, 2",
        &[],
    );
    assert_eq!(recorded, [(1, Some("queue worker".to_string()), 1000)]);
    let (sender, delivered): (Option<String>, i64) = one_row(
        &mut client,
        "SELECT s.sender, w.jobs_delivered FROM queue_stats s, queue_workers w
          WHERE s.queue = 'e2e' AND w.database = current_database()",
        &[],
    );
    assert_eq!(sender.as_deref(), Some("app.deliver(jsonb)"));
    assert!(delivered >= 1000, "{delivered}");
}

#[test]
fn failures_follow_the_retry_policy_and_roll_back() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.flaky(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 -- a write that must not survive the failed attempt
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                                              current_user, 'written before the error');
                 IF job->'payload'->>'kind' = 'permanent' THEN
                     RAISE EXCEPTION 'no such mailbox' USING ERRCODE = 'QU001';
                 END IF;
                 RAISE EXCEPTION 'smtp down (attempt %)', job->>'attempt';
             END $$;",
        )
        .unwrap();
    mailer_queue(
        &mut client,
        "flaky",
        "app.flaky(jsonb)",
        ", max_attempts => 3, backoff => 'fixed', retry_delay => '200 ms'",
    );
    let retried: i64 = one(&mut client, "SELECT queue_enqueue('flaky', '{}')", &[]);
    let permanent: i64 = one(
        &mut client,
        "SELECT queue_enqueue('flaky', '{\"kind\": \"permanent\"}')",
        &[],
    );
    drained(&mut client, "flaky");
    assert_eq!(
        outcome(&mut client, retried),
        ("failed".into(), 3, "smtp down (attempt 3)".into())
    );
    assert_eq!(
        outcome(&mut client, permanent),
        ("failed".into(), 1, "no such mailbox".into())
    );
    assert!(
        sent_jobs(&mut client).is_empty(),
        "failed attempts wrote nothing"
    );
    let failed_total: i64 = one(
        &mut client,
        "SELECT failed_total FROM queue_stats WHERE queue = 'flaky'",
        &[],
    );
    assert_eq!(failed_total, 2);
}

#[test]
fn a_sender_runs_as_its_role_and_cannot_leave_it() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.escape(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             DECLARE
                 outcome text;
             BEGIN
                 BEGIN
                     RESET ROLE;
                     outcome := 'reset role: now ' || current_user;
                 EXCEPTION WHEN OTHERS THEN
                     outcome := 'reset role refused';
                 END;
                 BEGIN
                     SET ROLE postgres;
                     outcome := outcome || ', set role: now ' || current_user;
                 EXCEPTION WHEN OTHERS THEN
                     outcome := outcome || ', set role refused';
                 END;
                 BEGIN
                     SET SESSION AUTHORIZATION postgres;
                     outcome := outcome || ', session authorization: now ' || current_user;
                 EXCEPTION WHEN OTHERS THEN
                     outcome := outcome || ', session authorization refused';
                 END;
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                     current_user || '/' || (SELECT CASE WHEN rolsuper THEN 'superuser' ELSE 'no superuser' END
                                             FROM pg_catalog.pg_roles WHERE rolname = current_user),
                     outcome);
             END $$;",
        )
        .unwrap();
    mailer_queue(&mut client, "roles", "app.escape(jsonb)", "");
    client
        .batch_execute("SELECT queue_enqueue('roles', '{}')")
        .unwrap();
    drained(&mut client, "roles");
    let (who, note): (String, String) = one_row(&mut client, "SELECT who, note FROM app.sent", &[]);
    assert_eq!(who, "mailer/no superuser");
    assert_eq!(
        note,
        "reset role refused, set role refused, session authorization refused"
    );
}

#[test]
fn settings_of_one_sender_never_reach_the_next() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.setter(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 SET work_mem = '77MB';
                 SET search_path = app, public;
                 PERFORM set_config('application_name', 'changed', false);
                 PERFORM set_config('statement_timeout', '1', true);
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, 'setter');
             END $$;
             CREATE FUNCTION app.reader(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user,
                     concat_ws(' | ', current_setting('work_mem'), current_setting('search_path'),
                               current_setting('application_name'),
                               current_setting('statement_timeout')));
             END $$;",
        )
        .unwrap();
    mailer_queue(&mut client, "setter", "app.setter(jsonb)", "");
    mailer_queue(&mut client, "reader", "app.reader(jsonb)", "");
    // both in one round: the setter's queue comes first (lower id)
    client
        .batch_execute(
            "BEGIN;
             SELECT queue_enqueue('setter', '{}') FROM generate_series(1, 3);
             SELECT queue_enqueue('reader', '{}') FROM generate_series(1, 3);
             COMMIT;",
        )
        .unwrap();
    drained(&mut client, "setter");
    drained(&mut client, "reader");
    let seen: Vec<String> = column(
        &mut client,
        "SELECT DISTINCT note FROM app.sent WHERE note <> 'setter'",
        &[],
    );
    // the settings of a new session of mailer (the server's defaults)
    assert_eq!(seen, ["4MB | \"$user\", public | queue worker | 0"]);
}

#[test]
fn a_sender_written_like_any_other_function_works() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    // a role with no settings of its own, a table in public, and a sender
    // that names it unqualified, registered by its unqualified name
    client
        .batch_execute(
            "CREATE ROLE mailer LOGIN;
             CREATE TABLE outbox (job bigint, who text);
             GRANT INSERT ON outbox TO mailer;
             CREATE FUNCTION send_welcome(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO outbox VALUES ((job->>'id')::bigint, current_user);
             END $$;
             SET ROLE mailer;
             SELECT queue_create('welcome', max_attempts => 1);
             SELECT queue_register_sender('welcome', 'send_welcome(jsonb)');
             SELECT queue_enqueue('welcome', '{}') FROM generate_series(1, 5);
             RESET ROLE;",
        )
        .unwrap();
    drained(&mut client, "welcome");
    assert_eq!(statuses(&mut client, "welcome"), [("succeeded".into(), 5)]);
    let who: Vec<String> = column(&mut client, "SELECT DISTINCT who FROM outbox", &[]);
    assert_eq!(who, ["mailer"]);
}

/// What a sender of `queue` saw, and what a new session of mailer sees:
/// the search_path and the custom settings app.a to app.e.
const SETTINGS_SEEN: &str = "concat_ws(' | ', current_setting('search_path'),
    current_setting('app.a', true), current_setting('app.b', true),
    current_setting('app.c', true), current_setting('app.d', true),
    current_setting('app.e', true))";

#[test]
fn a_sender_starts_with_its_roles_login_settings() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    // every level of pg_db_role_setting, each overriding the one before
    client
        .batch_execute(&format!(
            "ALTER ROLE ALL SET app.a = 'all roles';
             ALTER ROLE ALL SET app.b = 'all roles';
             ALTER DATABASE queue_test SET app.b = 'database';
             ALTER DATABASE queue_test SET app.c = 'database';
             ALTER ROLE mailer SET app.c = 'role';
             ALTER ROLE mailer SET app.d = 'role';
             ALTER ROLE mailer SET search_path = app, public;
             ALTER ROLE mailer IN DATABASE queue_test SET app.d = 'role in database';
             ALTER ROLE mailer SET app.e = 'role';
             ALTER ROLE mailer IN DATABASE postgres SET app.e = 'role in another database';
             CREATE TABLE app.seen (queue text, settings text);
             GRANT INSERT ON app.seen TO mailer;
             -- unqualified: the role's search_path finds app.seen
             CREATE FUNCTION app.report(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO seen VALUES (job->>'queue', {SETTINGS_SEEN});
             END $$;
             -- a function's own SET clause wins, as anywhere
             CREATE FUNCTION app.report_own(job jsonb) RETURNS void LANGUAGE plpgsql
             SET search_path = app SET app.e = 'function' AS $$
             BEGIN
                 INSERT INTO seen VALUES (job->>'queue', {SETTINGS_SEEN});
             END $$;"
        ))
        .unwrap();
    mailer_queue(&mut client, "report", "app.report(jsonb)", "");
    mailer_queue(&mut client, "own", "app.report_own(jsonb)", "");
    client
        .batch_execute("SELECT queue_enqueue('report', '{}'); SELECT queue_enqueue('own', '{}');")
        .unwrap();
    drained(&mut client, "report");
    drained(&mut client, "own");
    let seen = |client: &mut Client, queue: &str| -> String {
        one(
            client,
            "SELECT settings FROM app.seen WHERE queue = $1",
            &[&queue],
        )
    };
    let expected = "app, public | all roles | database | role | role in database | role";
    assert_eq!(seen(&mut client, "report"), expected);
    assert_eq!(
        seen(&mut client, "own"),
        "app | all roles | database | role | role in database | function"
    );
    // exactly what mailer's own sessions start with
    let mut config = cluster.config(queue_client_tests::DB);
    config.user("mailer");
    let mut session = config.connect(queue_client_tests::NoTls).unwrap();
    let login: String = one(&mut session, &format!("SELECT {SETTINGS_SEEN}"), &[]);
    assert_eq!(login, expected);
}

#[test]
fn a_role_that_loses_execute_or_is_dropped_is_not_delivered_for() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client.batch_execute(DELIVER).unwrap();
    client
        .batch_execute(
            "CREATE ROLE temp_mailer;
             GRANT USAGE ON SCHEMA app TO temp_mailer;
             GRANT INSERT ON app.sent TO temp_mailer;",
        )
        .unwrap();
    mailer_queue(
        &mut client,
        "revoked",
        "app.deliver(jsonb)",
        ", max_attempts => 1",
    );
    client
        .batch_execute(
            "SET ROLE temp_mailer;
             SELECT queue_create('orphaned', max_attempts => 1);
             SELECT queue_register_sender('orphaned', 'app.deliver(jsonb)');
             RESET ROLE;
             REVOKE EXECUTE ON FUNCTION app.deliver(jsonb) FROM PUBLIC;
             GRANT EXECUTE ON FUNCTION app.deliver(jsonb) TO temp_mailer;
             REVOKE ALL ON FUNCTION app.deliver(jsonb) FROM temp_mailer;
             REVOKE ALL ON app.sent FROM temp_mailer;
             REVOKE ALL ON SCHEMA app FROM temp_mailer;
             DROP ROLE temp_mailer;
             SELECT queue_enqueue('revoked', '{}');
             SELECT queue_enqueue('orphaned', '{}');",
        )
        .unwrap();
    drained(&mut client, "revoked");
    drained(&mut client, "orphaned");
    assert!(sent_jobs(&mut client).is_empty());
    let errors: Vec<(String, String)> = all_rows(
        &mut client,
        "SELECT queue, last_error FROM queue_failed ORDER BY queue",
        &[],
    );
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].0, "orphaned");
    assert!(errors[0].1.contains("no longer exists"), "{errors:?}");
    assert_eq!(errors[1].0, "revoked");
    assert_eq!(
        errors[1].1,
        "role mailer no longer has EXECUTE on sender app.deliver(jsonb)"
    );
}

#[test]
fn a_search_path_hijack_is_never_executed() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    // The sender calls helper() unqualified, meaning its own app.helper;
    // an attacker who may create objects in public plants look-alikes.
    client
        .batch_execute(
            "CREATE FUNCTION app.helper(job jsonb) RETURNS text LANGUAGE sql AS $$ SELECT 'app' $$;
             CREATE FUNCTION app.deliver(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, helper(job));
             END $$;
             CREATE ROLE mallory;
             GRANT CREATE, USAGE ON SCHEMA public TO mallory;
             CREATE TABLE public.hijacked (who text);
             GRANT INSERT ON public.hijacked TO mallory;
             SET ROLE mallory;
             CREATE FUNCTION public.helper(job jsonb) RETURNS text LANGUAGE sql AS $$
                 INSERT INTO public.hijacked VALUES (current_user) RETURNING 'public'
             $$;
             CREATE FUNCTION public.deliver(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO public.hijacked VALUES (current_user)
             $$;
             CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$
                 INSERT INTO public.hijacked VALUES (current_user) RETURNING NULL::uuid
             $$;
             RESET ROLE;
             SET search_path = app, public;
             -- how mailer's own sessions resolve names, so its sender too
             ALTER ROLE mailer SET search_path = app;",
        )
        .unwrap();
    // registered by its unqualified name, with app first on the path
    mailer_queue(
        &mut client,
        "hijack",
        "deliver(jsonb)",
        ", max_attempts => 1",
    );
    client
        .batch_execute("SELECT queue_enqueue('hijack', '{}')")
        .unwrap();
    drained(&mut client, "hijack");
    let hijacked: i64 = one(&mut client, "SELECT count(*) FROM public.hijacked", &[]);
    assert_eq!(hijacked, 0, "no look-alike ran");
    let sender: String = one(
        &mut client,
        "SELECT sender FROM queue_stats WHERE queue = 'hijack'",
        &[],
    );
    assert_eq!(sender, "app.deliver(jsonb)");
    // the unqualified call found mailer's app.helper, as in its sessions
    let note: String = one(&mut client, "SELECT note FROM app.sent", &[]);
    assert_eq!(note, "app");
}

#[test]
fn a_crash_during_delivery_loses_nothing_and_duplicates_nothing() {
    let cluster = Cluster::start_with(&[DURABLE]);
    let mut client = cluster.connect();
    setup(&mut client);
    slow_queue(&mut client, "crash", "0.005");
    let mut ids = enqueue_many(&mut client, "crash", 600);
    eventually("some jobs to be delivered", || {
        one::<i64>(&mut client, "SELECT count(*) FROM app.sent", &[]) > 50
    });
    cluster.crash();
    cluster.start_server();
    let mut client = cluster.connect();
    drained(&mut client, "crash");
    assert_eq!(
        statuses(&mut client, "crash"),
        [("succeeded".to_string(), 600)]
    );
    ids.sort_unstable();
    assert_eq!(
        sent_jobs(&mut client),
        ids,
        "every job's effect exactly once"
    );
}

#[test]
fn a_sender_that_kills_its_worker_uses_up_only_its_own_attempts() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    // registered by a superuser, who may terminate the worker's backend
    let (mut ids, poison) = poisoned_batch(
        &mut client,
        "poison",
        3,
        "PERFORM pg_terminate_backend(pg_backend_pid());",
    );
    drained(&mut client, "poison");
    let (status, attempts, error) = outcome(&mut client, poison);
    assert_eq!((status.as_str(), attempts), ("failed", 3));
    assert_eq!(error, "the queue worker stopped during attempt 3 of 3");
    ids.sort_unstable();
    assert_eq!(
        sent_jobs(&mut client),
        ids,
        "the others were delivered once"
    );
    let succeeded: i64 = one(
        &mut client,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'poison' AND status = 'succeeded'",
        &[],
    );
    assert_eq!(succeeded, 9);
}

#[test]
fn a_sender_that_crashes_the_server_uses_up_only_its_own_attempts() {
    // A batch of a queue without limits is claimed, delivered and recorded
    // in one transaction: the attempt under way when the server crashed
    // must still count, from the ids the worker wrote down (suspects.rs).
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    // (kill -KILL of a backend: the postmaster restarts every process)
    let (mut ids, poison) = poisoned_batch(
        &mut client,
        "crash",
        2,
        "EXECUTE format('COPY (SELECT) TO PROGRAM %L', 'kill -KILL ' || pg_backend_pid());",
    );
    drop(client);
    // the server restarts twice (attempts 1 and 2), then the job is buried
    let mut client = eventually_connected(&cluster, |client| {
        client
            .query_one("SELECT status FROM queue_job($1)", &[&poison])
            .is_ok_and(|r| r.get::<_, String>(0) == "failed")
    });
    drained(&mut client, "crash");
    let (_, attempts, error) = outcome(&mut client, poison);
    assert_eq!(attempts, 2);
    assert_eq!(error, "the queue worker stopped during attempt 2 of 2");
    ids.sort_unstable();
    assert_eq!(
        sent_jobs(&mut client),
        ids,
        "the others were delivered once"
    );
}

/// Queue `queue` (`max_attempts`, no retry delay) delivered by a sender of
/// its own, app.`queue`, that records each job in app.sent but runs
/// `poison` first for the one job with `{"poison": true}`; that job
/// enqueued amid nine others, all in one batch of the worker (the queue
/// paused until all are there). The others' ids, and the poison's.
fn poisoned_batch(
    client: &mut Client,
    queue: &str,
    max_attempts: i32,
    poison: &str,
) -> (Vec<i64>, i64) {
    client
        .batch_execute(&format!(
            "CREATE FUNCTION app.{queue}(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload' ? 'poison' THEN
                     {poison}
                 END IF;
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, (job->>'attempt')::int,
                                              current_user, 'sent');
             END $$;
             SELECT queue_create('{queue}', max_attempts => {max_attempts}, retry_delay => '0');
             SELECT queue_register_sender('{queue}', 'app.{queue}(jsonb)', 10);
             SELECT queue_pause('{queue}');"
        ))
        .unwrap();
    let mut ids = enqueue_many(client, queue, 4);
    let poisoned: i64 = one(
        client,
        "SELECT queue_enqueue($1, '{\"poison\": true}')",
        &[&queue],
    );
    ids.extend(enqueue_many(client, queue, 5));
    // A poison that crashes the server may do so as soon as the resume has
    // committed, before its reply reaches this connection: the connection
    // is then closed, and the caller goes on from a new one.
    if let Err(error) = client.execute("SELECT queue_resume($1)", &[&queue]) {
        assert!(error.is_closed(), "the resume: {error}");
    }
    (ids, poisoned)
}

/// A connection once `f` holds on one, across the server's restarts.
fn eventually_connected(cluster: &Cluster, mut f: impl FnMut(&mut Client) -> bool) -> Client {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(mut client) = cluster.config(DB).connect(NoTls) {
            if f(&mut client) {
                return client;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the poison job to be buried"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_cancel_during_delivery_waits_and_never_leaves_an_effect() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    slow_queue(
        &mut client,
        "cancel",
        "CASE WHEN job->'payload' ? 'slow' THEN 1 ELSE 0.003 END",
    );
    // A job in the same batch as a slow one: its cancel waits for the
    // batch, and finds it delivered.
    client
        .batch_execute("SELECT queue_pause('cancel')")
        .unwrap();
    // (both in one transaction: a round of the worker that started before
    // the pause committed can still claim what it then sees, and must see
    // both or neither)
    let (slow, next): (i64, i64) = one_row(
        &mut client,
        "SELECT queue_enqueue('cancel', '{\"slow\": 1}'), queue_enqueue('cancel', '{}')",
        &[],
    );
    client
        .batch_execute("SELECT queue_resume('cancel')")
        .unwrap();
    eventually("the slow job to be in delivery", || {
        one::<i64>(
            &mut client,
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'queue worker'
                AND wait_event = 'PgSleep'",
            &[],
        ) > 0
    });
    let cancelled: bool = one(&mut client, "SELECT queue_cancel($1)", &[&next]);
    assert!(!cancelled, "the job was delivered while the cancel waited");
    assert_eq!(sent_jobs(&mut client), [slow, next]);

    // Many cancels racing deliveries: a job ends cancelled exactly when
    // its cancel said so, and then no effect of it exists. (From the last
    // job back, so that the cancels meet the workers, however many there
    // are, somewhere in the middle.)
    let ids = enqueue_many(&mut client, "cancel", 400);
    let mut said_cancelled = HashSet::new();
    for id in ids.iter().rev().step_by(3) {
        if one::<bool>(&mut client, "SELECT queue_cancel($1)", &[id]) {
            said_cancelled.insert(*id);
        }
    }
    drained(&mut client, "cancel");
    let sent: HashSet<i64> = sent_jobs(&mut client).into_iter().collect();
    for id in &ids {
        let status: String = one(&mut client, "SELECT status FROM queue_job($1)", &[id]);
        if said_cancelled.contains(id) {
            assert_eq!(status, "cancelled", "job {id}");
            assert!(!sent.contains(id), "cancelled job {id} has an effect");
        } else {
            assert_eq!(status, "succeeded", "job {id}");
            assert!(sent.contains(id), "job {id} has no effect");
        }
    }
    assert!(!said_cancelled.is_empty() && said_cancelled.len() < 134);
}

#[test]
fn unregistering_stops_delivery() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client.batch_execute(DELIVER).unwrap();
    mailer_queue(&mut client, "unreg", "app.deliver(jsonb)", "");
    let first: i64 = one(&mut client, "SELECT queue_enqueue('unreg', '{}')", &[]);
    drained(&mut client, "unreg");
    let unregistered: bool = one(&mut client, "SELECT queue_unregister_sender('unreg')", &[]);
    assert!(unregistered);
    let again: bool = one(&mut client, "SELECT queue_unregister_sender('unreg')", &[]);
    assert!(!again);
    let missing: bool = one(&mut client, "SELECT queue_unregister_sender('nope')", &[]);
    assert!(!missing);
    let second: i64 = one(&mut client, "SELECT queue_enqueue('unreg', '{}')", &[]);
    // a marker through another sender queue: once the worker has delivered
    // it, it has been round every sender queue since the enqueue
    mailer_queue(&mut client, "marker", "app.deliver(jsonb)", "");
    let marker: i64 = one(&mut client, "SELECT queue_enqueue('marker', '{}')", &[]);
    drained(&mut client, "marker");
    assert_eq!(
        sent_jobs(&mut client),
        [first, marker],
        "nothing delivered after unregistering"
    );
    // a pull queue again
    let claimed: i64 = one(&mut client, "SELECT id FROM queue_claim('unreg')", &[]);
    assert_eq!(claimed, second);
    let sender: Option<String> = one(
        &mut client,
        "SELECT sender FROM queue_stats WHERE queue = 'unreg'",
        &[],
    );
    assert_eq!(sender, None);
}

#[test]
fn a_hung_sender_is_cancelled_by_the_timeout() {
    let cluster = Cluster::start_with(&["queue.sender_timeout = 300"]);
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.hang(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
             BEGIN
                 IF job->'payload' ? 'hang' THEN
                     PERFORM pg_sleep(30);
                 END IF;
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, 'sent');
             END $$;",
        )
        .unwrap();
    mailer_queue(
        &mut client,
        "hang",
        "app.hang(jsonb)",
        ", max_attempts => 2, retry_delay => '0'",
    );
    let hung: i64 = one(
        &mut client,
        "SELECT queue_enqueue('hang', '{\"hang\": 1}')",
        &[],
    );
    let fine: i64 = one(&mut client, "SELECT queue_enqueue('hang', '{}')", &[]);
    drained(&mut client, "hang");
    let (status, attempts, error) = outcome(&mut client, hung);
    assert_eq!(
        (status.as_str(), attempts, error.as_str()),
        ("failed", 2, "canceling statement due to statement timeout")
    );
    assert_eq!(sent_jobs(&mut client), [fine]);
}

#[test]
fn scheduled_jobs_are_delivered_when_due_even_after_the_worker_left() {
    // no polling to speak of: only the due time can bring the job out
    let cluster = Cluster::start_with(&["queue.idle_exit = 1", "queue.poll_interval = '1h'"]);
    let mut client = cluster.connect();
    setup(&mut client);
    client
        .batch_execute(
            "CREATE FUNCTION app.deliver(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user,
                                              clock_timestamp()::text)
             $$;",
        )
        .unwrap();
    mailer_queue(&mut client, "later", "app.deliver(jsonb)", "");
    let id: i64 = one(
        &mut client,
        "SELECT queue_enqueue('later', '{}', delay => '4 seconds')",
        &[],
    );
    // the worker gives its slot back meanwhile
    eventually("the worker to exit idle", || {
        one::<i64>(
            &mut client,
            "SELECT count(*) FROM queue_workers WHERE pid IS NOT NULL",
            &[],
        ) == 0
    });
    drained(&mut client, "later");
    let on_time: bool = one(
        &mut client,
        "SELECT s.note::timestamptz >= j.run_at FROM app.sent s, queue_job($1) j",
        &[&id],
    );
    assert!(on_time, "delivered before it was due");
}

#[test]
fn a_slow_queue_does_not_starve_another() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    slow_queue(&mut client, "slow", "0.05");
    client
        .batch_execute(
            "CREATE FUNCTION app.fast(job jsonb) RETURNS void LANGUAGE sql AS $$
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, 'fast')
             $$;",
        )
        .unwrap();
    mailer_queue(&mut client, "fast", "app.fast(jsonb)", "");
    // 300 slow jobs (15 s of work), then 30 fast ones
    enqueue_many(&mut client, "slow", 300);
    eventually("the slow queue to be in delivery", || {
        one::<i64>(&mut client, "SELECT count(*) FROM app.sent", &[]) > 0
    });
    enqueue_many(&mut client, "fast", 30);
    drained(&mut client, "fast");
    let slow_left: i64 = one(
        &mut client,
        "SELECT count(*) FROM queue_jobs WHERE queue = 'slow' AND status = 'pending'",
        &[],
    );
    assert!(
        slow_left > 100,
        "the fast queue waited for the slow backlog ({slow_left} left)"
    );
}

#[test]
fn the_worker_buries_expired_leases_and_cleans_up() {
    let cluster = Cluster::start_with(&["queue.upkeep_interval = 1"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT queue_create('pull', max_attempts => 1, retention => '1 millisecond');
             SELECT queue_enqueue('pull', '{}') FROM generate_series(1, 3);",
        )
        .unwrap();
    // one job claimed and abandoned, two completed
    let abandoned: i64 = one(
        &mut client,
        "SELECT id FROM queue_claim('pull', 'gone', 1, lease => '500 ms')",
        &[],
    );
    client
        .batch_execute(
            "SELECT queue_complete(id, lease) FROM queue_claim('pull', 'done', 2, '1 hour')",
        )
        .unwrap();
    eventually("the abandoned job to be buried", || {
        one::<String>(
            &mut client,
            "SELECT status FROM queue_job($1)",
            &[&abandoned],
        ) == "failed"
    });
    let error: String = one(
        &mut client,
        "SELECT last_error FROM queue_job($1)",
        &[&abandoned],
    );
    assert_eq!(error, "lease expired during attempt 1 of 1 (worker gone)");
    // retention 1 ms: the worker's upkeep removes the succeeded jobs
    eventually("retention cleanup", || {
        one::<i64>(
            &mut client,
            "SELECT count(*) FROM queue_jobs WHERE status = 'succeeded'",
            &[],
        ) == 0
    });
    let totals: (i64, i64) = one_row(
        &mut client,
        "SELECT succeeded_total, failed_total FROM queue_stats WHERE queue = 'pull'",
        &[],
    );
    assert_eq!(totals, (2, 1));
}

#[test]
fn a_sender_made_again_as_a_set_returning_function_is_not_called() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    setup(&mut client);
    client.batch_execute(DELIVER).unwrap();
    mailer_queue(
        &mut client,
        "remade",
        "app.deliver(jsonb)",
        ", max_attempts => 1",
    );
    // the same signature, now a set-returning function, which registration
    // would have refused
    client
        .batch_execute(
            "DROP FUNCTION app.deliver(jsonb);
             CREATE FUNCTION app.deliver(job jsonb) RETURNS SETOF int LANGUAGE sql AS $$
                 INSERT INTO app.sent VALUES ((job->>'id')::bigint, 1, current_user, 'sent')
                 RETURNING 1
             $$;
             SELECT queue_enqueue('remade', '{}');",
        )
        .unwrap();
    drained(&mut client, "remade");
    assert!(sent_jobs(&mut client).is_empty(), "it was not called");
    let error: String = one(&mut client, "SELECT last_error FROM queue_failed", &[]);
    assert_eq!(
        error,
        "sender app.deliver(jsonb) is now a set-returning function; a sender must be a plain function"
    );
}
