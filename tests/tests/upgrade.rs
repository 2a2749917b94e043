//! `ALTER EXTENSION queue UPDATE` from 0.1.0, 0.2.0 and 0.3.0, as a user who
//! installed that release does it: its library and install script as
//! released (built from its commit by `make old-release`, which these tests
//! need), a database filled by it, then the current library and a restart,
//! then the update. The result must equal a fresh install, object by
//! object, and keep every job, sender, counter and grant working.

use queue_client_tests::{
    column, complete, eventually, one, one_row, pg_config, Client, Cluster, QueueState,
    JOBS_IN_EVERY_STATUS,
};

/// Every object of the extension, with its definition (tests/sql).
const OBJECTS: &str = include_str!("../sql/extension_objects.sql");

fn objects(client: &mut Client, privileges: bool) -> Vec<String> {
    column(client, OBJECTS, &[&privileges])
}

/// The lines of `a` not in `b`, and of `b` not in `a`, for a readable failure.
fn differences(a: &[String], b: &[String]) -> String {
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter().filter(|l| !y.contains(l)).cloned().collect()
    };
    format!(
        "only after the update:\n{}\nonly in a fresh install:\n{}",
        only(a, b).join("\n"),
        only(b, a).join("\n")
    )
}

/// Where `make old-release` put the library of release `version`
/// (QUEUE_OLD_LIBDIR names 0.1.0's; the others are beside it).
fn old_library_dir(version: &str) -> String {
    let first = std::env::var("QUEUE_OLD_LIBDIR").expect(
        "QUEUE_OLD_LIBDIR names the directory of 0.1.0's queue.so: run this test through \
         `make client` (which builds it with `make old-release`)",
    );
    first.replace("/0.1.0/", &format!("/{version}/"))
}

#[test]
fn an_update_from_0_1_0_equals_a_fresh_install_and_keeps_everything() {
    // CREATE EXTENSION reads the comment from the control file, which is
    // the current one here: give the 0.1.0 installs the comment 0.1.0's
    // gave them
    update_from(
        "0.1.0",
        Some("COMMENT ON EXTENSION queue IS 'queue:  Created by pgrx'"),
    );
}

#[test]
fn an_update_from_0_2_0_equals_a_fresh_install_and_keeps_everything() {
    update_from("0.2.0", None);
}

#[test]
fn an_update_from_0_3_0_equals_a_fresh_install_and_keeps_everything() {
    update_from("0.3.0", None);
}

/// A webhook whose URL keeps its secret in the path, registered under the
/// old release (0.2.0 and later have webhooks): after the update, views
/// show it as 0.4.0 does.
const SECRET_PATH_WEBHOOK: &str = "
    SET queue.webhook_allow = 'https://hooks.slack.com/services';
    SELECT queue_create('slack');
    SELECT queue_register_webhook('slack', 'https://hooks.slack.com/services/T000/B000/XXXX');
    RESET queue.webhook_allow;";

/// The update from release `old`; `comment`: what makes an install of it
/// carry the comment that release gave it.
fn update_from(old: &str, comment: Option<&str>) {
    let old_version = old;
    let old = old_library_dir(old_version);
    let cluster = Cluster::start_bare(&pg_config(), &[&format!("dynamic_library_path = '{old}'")]);
    let mut admin = cluster.connect_to("postgres");
    for statement in [
        "CREATE DATABASE filled",
        "CREATE DATABASE empty",
        "CREATE ROLE app LOGIN",
        "CREATE ROLE mailer LOGIN",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    let comment = comment.unwrap_or("SELECT");
    let mut empty = cluster.connect_to("empty");
    empty
        .batch_execute(&format!("CREATE EXTENSION queue VERSION '{old_version}'"))
        .unwrap();
    empty.batch_execute(comment).unwrap();
    let mut filled = cluster.connect_to("filled");
    // 0.1.0's senders ran with search_path pg_catalog, pg_temp: qualified
    filled
        .batch_execute(&format!(
            "CREATE EXTENSION queue VERSION '{old_version}';
             CREATE TABLE public.mail_out (job bigint);
             GRANT INSERT ON public.mail_out TO mailer;
             CREATE FUNCTION public.mail(job jsonb) RETURNS void LANGUAGE sql AS
                 $$ INSERT INTO public.mail_out VALUES ((job->>'id')::bigint) $$;
             SET ROLE mailer;
             SELECT queue_create('mail', retry_delay => '0');
             SELECT queue_register_sender('mail', 'public.mail(jsonb)');
             SELECT queue_pause('mail');
             SELECT queue_enqueue('mail', '{{\"before\": true}}');
             RESET ROLE;
             REVOKE EXECUTE ON FUNCTION queue_purge(text, text) FROM PUBLIC;
             GRANT EXECUTE ON FUNCTION queue_purge(text, text) TO app;
             REVOKE EXECUTE ON FUNCTION queue_enqueue FROM PUBLIC;
             GRANT EXECUTE ON FUNCTION queue_enqueue TO app, mailer;
             GRANT SELECT ON queue_jobs TO app;"
        ))
        .unwrap();
    filled.batch_execute(JOBS_IN_EVERY_STATUS).unwrap();
    let webhooks = old_version != "0.1.0";
    if webhooks {
        filled.batch_execute(SECRET_PATH_WEBHOOK).unwrap();
    }
    filled.batch_execute(comment).unwrap();
    // a lease held across the upgrade
    let held = filled
        .query_one(
            "SELECT id, lease::text FROM queue_claim('work', 'held', max_jobs => 1)",
            &[],
        )
        .unwrap();
    let (held_id, held_lease): (i64, String) = (held.get(0), held.get(1));
    let before = QueueState::of(&mut filled);
    let statuses: Vec<&str> = before.jobs.iter().map(|j| j.2.as_str()).collect();
    for status in ["pending", "processing", "succeeded", "failed", "cancelled"] {
        assert!(statuses.contains(&status), "a {status} job: {statuses:?}");
    }
    drop((empty, filled, admin));

    // the current library, a restart, then the update
    cluster.stop_server();
    cluster.configure(&["dynamic_library_path = '$libdir'"]);
    cluster.start_server();
    let mut admin = cluster.connect_to("postgres");
    admin.batch_execute("CREATE DATABASE fresh").unwrap();
    let mut fresh = cluster.connect_to("fresh");
    fresh.batch_execute("CREATE EXTENSION queue").unwrap();
    let version: String = one(
        &mut fresh,
        "SELECT extversion FROM pg_extension WHERE extname = 'queue'",
        &[],
    );
    let mut empty = cluster.connect_to("empty");
    let mut filled = cluster.connect_to("filled");
    // before the update, the old release's SQL runs on the new library
    assert_eq!(
        QueueState::of(&mut filled),
        before,
        "the old release's functions on the new library"
    );
    for client in [&mut empty, &mut filled] {
        client
            .batch_execute("ALTER EXTENSION queue UPDATE")
            .unwrap();
        let now: String = one(
            client,
            "SELECT extversion FROM pg_extension WHERE extname = 'queue'",
            &[],
        );
        assert_eq!(now, version);
    }
    assert_ne!(version, old_version);

    // the same objects and definitions as a fresh install, privileges too
    let (updated, new) = (objects(&mut empty, true), objects(&mut fresh, true));
    assert!(updated.len() > 100, "the catalog query sees the objects");
    assert!(updated == new, "{}", differences(&updated, &new));
    // with data and user grants, the same objects (grants aside)
    let (updated, new) = (objects(&mut filled, false), objects(&mut fresh, false));
    assert!(updated == new, "{}", differences(&updated, &new));

    // every job, counter and grant is still there, and works
    assert_eq!(QueueState::of(&mut filled), before);
    if webhooks {
        let sender: String = one(
            &mut filled,
            "SELECT sender FROM queue_stats WHERE queue = 'slack'",
            &[],
        );
        assert_eq!(sender, "POST https://hooks.slack.com/services/\u{2026}");
    }
    let app_may: bool = one(
        &mut filled,
        // (queue_purge gained `ids` in 0.4.0: the new one carries them)
        "SELECT has_function_privilege('app', 'queue_purge(text, text, bigint[])', 'EXECUTE')
            AND has_table_privilege('app', 'queue_jobs', 'SELECT')
            AND NOT has_function_privilege('mailer', 'queue_purge(text, text, bigint[])', 'EXECUTE')",
        &[],
    );
    assert!(app_may, "the grants made under the old release hold");
    // queue_enqueue gained arguments in 0.3.0 and 0.4.0: a new function
    // each time, which carries the old one's privileges, as the DBA's own
    // (pg_dump keeps dumping them: no initial privileges recorded for them)
    let enqueue_grants: (bool, bool, i64) = one_row(
        &mut filled,
        "SELECT has_function_privilege('app', 'queue_enqueue(text, jsonb, interval, int,
                    text, timestamptz, jsonb, text, bigint[], text)', 'EXECUTE'),
                has_function_privilege('public', 'queue_enqueue(text, jsonb, interval, int,
                    text, timestamptz, jsonb, text, bigint[], text)', 'EXECUTE'),
                (SELECT count(*) FROM pg_init_privs
                  WHERE objoid = 'queue_enqueue'::regproc)",
        &[],
    );
    assert_eq!(
        enqueue_grants,
        (true, false, 0),
        "queue_enqueue's grants carried over"
    );
    let completed: bool = complete(&mut filled, held_id, &held_lease);
    assert!(completed, "the lease held across the update completes");
    let claimed: i64 = one(
        &mut filled,
        "SELECT count(*) FROM queue_claim('work', 'after', max_jobs => 100)",
        &[],
    );
    assert!(claimed > 0, "pending jobs are claimed");
    // the jobs from before have no group; new ones may, in an ordered queue
    filled
        .batch_execute(
            "SELECT queue_alter('work', ordered => true, max_in_flight => 100);
             SELECT queue_enqueue('work', '{\"new\": true}', group_key => 'g1');",
        )
        .unwrap();
    let groups: i64 = one(
        &mut filled,
        "SELECT count(*) FROM queue_groups('work')",
        &[],
    );
    assert_eq!(groups, 1, "a group after the update");
    // the sender registered by mailer under the old release delivers
    filled
        .batch_execute(
            "SET ROLE mailer; SELECT queue_resume('mail');
             SELECT queue_enqueue('mail', '{\"after\": true}'); RESET ROLE;",
        )
        .unwrap();
    eventually("the sender to deliver both jobs", || {
        one::<i64>(&mut filled, "SELECT count(*) FROM public.mail_out", &[]) == 2
    });
    let totals: Vec<i64> = one(
        &mut filled,
        "SELECT ARRAY[enqueued_total, succeeded_total] FROM queue_stats WHERE queue = 'mail'",
        &[],
    );
    assert_eq!(
        totals,
        [2, 2],
        "the counters go on from where the old release left them"
    );
}
