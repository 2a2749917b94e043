//! pg_dump of a tenant database keeps its queues and jobs: restored into a
//! new database, every job is back in the same state, and the queue works on.

use std::process::Command;

use queue_client_tests::{one, Cluster, DB};

/// Every retained job, every column, as text.
fn snapshot(client: &mut queue_client_tests::Client) -> Vec<String> {
    client
        .query("SELECT j::text FROM queue_jobs j ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn pg_dump_keeps_queues_and_jobs() {
    let cluster = Cluster::start();
    let mut source = cluster.connect();
    source
        .batch_execute(
            "SELECT queue_create('dump.a', max_attempts => 3, lease => '1 hour');
             SELECT queue_create('dump.b', backoff => 'fixed', retention => '30 days');
             SELECT queue_enqueue('dump.a', '{\"n\": 1}', priority => 5, dedup_key => 'k',
                                  headers => '{\"h\": 1}');
             SELECT queue_enqueue('dump.a', '{\"n\": 2}', delay => '1 day');
             SELECT count(*) FROM queue_enqueue_batch('dump.b',
                 ARRAY['{\"n\": 3}', '{\"n\": 4}', '{\"n\": 5}']::jsonb[]);
             SELECT queue_complete(id, lease) FROM queue_claim('dump.b');
             SELECT queue_fail(id, lease, 'broken', permanent => true) FROM queue_claim('dump.b');
             SELECT count(*) FROM queue_claim('dump.b', 'holder');
             SELECT count(*) FROM queue_claim('dump.a', 'holder');",
        )
        .unwrap();
    // one rotation, so that jobs sit in the second partition too
    source
        .batch_execute("SELECT queue_maintain(force => true)")
        .unwrap();
    source
        .batch_execute("SELECT queue_enqueue('dump.b', '{\"n\": 6}')")
        .unwrap();
    let before = snapshot(&mut source);
    assert_eq!(before.len(), 6);

    let dump = std::env::temp_dir().join(format!("queue-dump-{}.sql", std::process::id()));
    let out = Command::new(cluster.bin("pg_dump"))
        .arg("-h")
        .arg(cluster.socket_dir())
        .args(["-p", "5432", "-U", "postgres", "-f"])
        .arg(&dump)
        .arg(DB)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    cluster
        .connect_to("postgres")
        .batch_execute("CREATE DATABASE restored")
        .unwrap();
    let out = Command::new(cluster.bin("psql"))
        .arg("-h")
        .arg(cluster.socket_dir())
        .args([
            "-p",
            "5432",
            "-U",
            "postgres",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            "restored",
            "-f",
        ])
        .arg(&dump)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&dump);
    assert!(
        out.status.success(),
        "restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut restored = cluster.connect_to("restored");
    assert_eq!(snapshot(&mut restored), before);
    let same_queues: bool = one(
        &mut restored,
        "SELECT count(*) = 2 AND bool_and(owner = 'postgres'::regrole) FROM queue_queues
              WHERE (name, max_attempts, backoff, lease, retention) IN
                    (('dump.a', 3, 'exponential', '1 hour', '1 day'),
                     ('dump.b', 5, 'fixed', '5 minutes', '30 days'))",
        &[],
    );
    assert!(same_queues);

    // The restored queues work: new ids continue, and dedup keys still hold.
    let max_before: i64 = one(&mut source, "SELECT max(id) FROM queue_jobs", &[]);
    let next: i64 = one(
        &mut restored,
        "SELECT queue_enqueue('dump.a', '{\"n\": 7}')",
        &[],
    );
    assert!(next > max_before);
    let dedup: i64 = one(
        &mut restored,
        "SELECT queue_enqueue('dump.a', '{}', dedup_key => 'k')",
        &[],
    );
    let original: i64 = one(
        &mut source,
        "SELECT id FROM queue_jobs WHERE dedup_key = 'k'",
        &[],
    );
    assert_eq!(dedup, original);
    let claimed: i64 = one(
        &mut restored,
        "SELECT count(*) FROM queue_claim('dump.b', max_jobs => 10)",
        &[],
    );
    assert_eq!(claimed, 1, "the job enqueued after the rotation");
}
