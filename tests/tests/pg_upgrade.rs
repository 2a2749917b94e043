//! pg_upgrade from PostgreSQL 15 to 18 of a cluster with queues, jobs in
//! every status and a registered sender, with the extension installed into
//! both (`make pg-upgrade`): afterwards the jobs are claimable, the sender
//! delivers and the counters are exact.

use std::process::Command;

use queue_client_tests::{
    as_owner, column, eventually, one, run, Cluster, QueueState, JOBS_IN_EVERY_STATUS,
};

fn config(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        panic!("{variable} names a pg_config: run this through `make pg-upgrade`")
    })
}

#[test]
fn pg_upgrade_from_15_to_18_keeps_queues_working() {
    let (old_config, new_config) = (config("QUEUE_PG15_CONFIG"), config("QUEUE_PG18_CONFIG"));
    let old = Cluster::start_bare(&old_config, &[]);
    let mut admin = old.connect_to("postgres");
    admin.batch_execute("CREATE DATABASE app").unwrap();
    admin.batch_execute("CREATE ROLE mailer LOGIN").unwrap();
    drop(admin);
    let mut app = old.connect_to("app");
    app.batch_execute(
        "CREATE EXTENSION queue;
         CREATE TABLE outbox (job bigint);
         GRANT INSERT ON outbox TO mailer;
         CREATE FUNCTION mail(job jsonb) RETURNS void LANGUAGE sql AS
             $$ INSERT INTO outbox VALUES ((job->>'id')::bigint) $$;
         SET ROLE mailer;
         SELECT queue_create('mail');
         SELECT queue_register_sender('mail', 'mail(jsonb)');
         SELECT queue_enqueue('mail', '{}');
         RESET ROLE;",
    )
    .unwrap();
    app.batch_execute(JOBS_IN_EVERY_STATUS).unwrap();
    app.batch_execute(
        "SELECT queue_claim('work', 'held', max_jobs => 1);
         SELECT queue_schedule('nightly', 'work', '0 3 * * *', time_zone => 'Europe/Berlin',
                               paused => true);",
    )
    .unwrap();
    let schedules = "SELECT row(s.*)::text FROM queue_schedules s ORDER BY name";
    let schedules_before: Vec<String> = column(&mut app, schedules, &[]);
    eventually("the first mail delivered on 15", || {
        one::<i64>(&mut app, "SELECT count(*) FROM outbox", &[]) == 1
    });
    let before = QueueState::of(&mut app);
    // Debian's PostgreSQL 15.20 marks every column of every table with a
    // column option pg_attver that 18.6 (the newest 18 in reach) does not
    // know, so its pg_upgrade fails on any table at all. That skew between
    // the two minor releases is not the extension's; clear the option here
    // so that the rest of the upgrade is tested.
    app.batch_execute(
        "SET allow_system_table_mods = on;
         UPDATE pg_attribute
            SET attoptions = nullif(array(SELECT o FROM unnest(attoptions) o
                                           WHERE o NOT LIKE 'pg_attver=%'), '{}')
          WHERE attoptions::text LIKE '%pg_attver=%';",
    )
    .unwrap();
    drop(app);
    old.stop_server();

    // a new 18 cluster, stopped, then pg_upgrade as its documentation says
    // (18's initdb turns data checksums on by default; 15's cluster has none)
    let new = Cluster::start_bare_with(&new_config, &["--no-data-checksums"], &[]);
    new.stop_server();
    let bindir = |config: &str| {
        let out = Command::new(config).arg("--bindir").output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let work = new.socket_dir().join("upgrade");
    run({
        let mut c = as_owner(std::path::Path::new("/bin/mkdir"));
        c.arg("-p").arg(&work);
        c
    });
    run({
        let mut c = as_owner(&new.bin("pg_upgrade"));
        c.current_dir(&work)
            .arg("-b")
            .arg(bindir(&old_config))
            .arg("-B")
            .arg(bindir(&new_config))
            .arg("-d")
            .arg(old.data())
            .arg("-D")
            .arg(new.data())
            .args(["-U", "postgres", "-p", "50432", "-P", "50433", "-s"])
            .arg(&work);
        c
    });
    new.start_server();
    let mut app = new.connect_to("app");
    // the same version on both: an update finds nothing to do
    app.batch_execute("ALTER EXTENSION queue UPDATE").unwrap();
    let version: String = one(&mut app, "SHOW server_version_num", &[]);
    assert!(version.starts_with("18"), "{version}");
    assert_eq!(
        QueueState::of(&mut app),
        before,
        "every job and counter as on 15"
    );
    let claimed: i64 = one(
        &mut app,
        "SELECT count(*) FROM queue_claim('work', 'after', max_jobs => 100)",
        &[],
    );
    assert_eq!(claimed, 3, "the due pending jobs are claimable");
    app.batch_execute("SET ROLE mailer; SELECT queue_enqueue('mail', '{}'); RESET ROLE;")
        .unwrap();
    eventually("the sender to deliver on 18", || {
        one::<i64>(&mut app, "SELECT count(*) FROM outbox", &[]) == 2
    });
    let totals: Vec<i64> = one(
        &mut app,
        "SELECT ARRAY[enqueued_total, succeeded_total] FROM queue_stats WHERE queue = 'mail'",
        &[],
    );
    assert_eq!(totals, [2, 2], "the counters go on from 15's");
    let schedules_after: Vec<String> = column(&mut app, schedules, &[]);
    assert_eq!(schedules_after, schedules_before);
    app.batch_execute("SELECT queue_schedule('nightly', 'work', '* * * * * *')")
        .unwrap();
    eventually("the schedule to fire on 18", || {
        one::<i64>(
            &mut app,
            "SELECT count(*) FROM queue_jobs WHERE headers->>'schedule' = 'nightly'",
            &[],
        ) > 0
    });
}
