//! `webhook-id` is unique for ever and the same on every attempt of a job:
//! two clusters whose databases have the same oid and whose jobs have the
//! same ids post different ids to one receiver; a job retried posts its id
//! again; a database restored into another cluster posts the ids its jobs
//! had, and jobs enqueued afterwards under the same id in each cluster
//! differ; an asynchronous failover that lost jobs hands their job ids out
//! again, but never their webhook-ids.

use std::collections::{BTreeMap, BTreeSet};

use queue_client_tests::receiver::{Receiver, Reply};
use queue_client_tests::{all_rows, column, eventually, one, Client, Cluster, DB, DURABLE};

fn allow(receiver: &Receiver) -> String {
    format!("queue.webhook_allow = 'http://127.0.0.1:{}'", receiver.port)
}

/// A webhook queue `w` posting to `path` of the receiver.
fn webhook_queue(client: &mut Client, receiver: &Receiver, path: &str) {
    client
        .batch_execute(&format!(
            "SELECT queue_create('w', retry_delay => '0', retention => '1 day');
             SELECT queue_register_webhook('w', '{}');",
            receiver.url(path)
        ))
        .unwrap();
}

fn enqueue(client: &mut Client, n: i32) -> Vec<i64> {
    column(
        client,
        "SELECT * FROM queue_enqueue_batch('w', array_fill('{}'::jsonb, ARRAY[$1::int]))",
        &[&n],
    )
}

fn all_delivered(client: &mut Client) {
    eventually("every job of w to be delivered", || {
        one::<i64>(
            client,
            "SELECT count(*) FROM queue_jobs WHERE queue = 'w' AND status <> 'succeeded'",
            &[],
        ) == 0
    });
}

/// The webhook-ids the receiver saw at `path`, by job id.
fn posted(receiver: &Receiver, path: &str) -> BTreeMap<i64, Vec<String>> {
    let mut posts: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for seen in receiver.seen(path) {
        let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
        posts
            .entry(body["id"].as_i64().unwrap())
            .or_default()
            .push(seen.header("webhook-id").unwrap().to_string());
    }
    posts
}

/// The webhook-id of each job of w from its stored identity, by job id.
fn stored(client: &mut Client) -> BTreeMap<i64, String> {
    all_rows(
        client,
        "SELECT id, 'msg_' || replace(uid::text, '-', '') FROM queue_live
         UNION ALL
         SELECT id, 'msg_' || replace(uid::text, '-', '') FROM queue_done",
        &[],
    )
    .into_iter()
    .collect()
}

/// One webhook-id per job, the one it stored; returns them.
fn one_id_each(posts: &BTreeMap<i64, Vec<String>>, stored: &BTreeMap<i64, String>) -> Vec<String> {
    posts
        .iter()
        .map(|(id, ids)| {
            assert!(ids.iter().all(|i| i == &ids[0]), "job {id} under {ids:?}");
            assert_eq!(Some(&ids[0]), stored.get(id), "job {id}");
            ids[0].clone()
        })
        .collect()
}

/// Two clusters, each with a first database of the same oid and jobs of
/// the same ids, post to one receiver: ten different webhook-ids, each
/// the same on every attempt (each path answers 503 first).
#[test]
fn two_clusters_with_the_same_oids_post_different_ids() {
    let receiver = Receiver::start();
    let mut oids = Vec::new();
    let mut ids = Vec::new();
    let mut webhook_ids = Vec::new();
    let clusters: Vec<Cluster> = (0..2)
        .map(|_| Cluster::start_with(&[&allow(&receiver)]))
        .collect();
    for (n, cluster) in clusters.iter().enumerate() {
        let path = format!("/cluster{n}");
        receiver.answer(
            &path,
            vec![
                Reply::Status(503, Vec::new()),
                Reply::Status(204, Vec::new()),
            ],
        );
        let mut client = cluster.connect();
        oids.push(one::<u32>(
            &mut client,
            "SELECT oid FROM pg_database WHERE datname = $1",
            &[&DB],
        ));
        webhook_queue(&mut client, &receiver, &path);
        ids.push(enqueue(&mut client, 5));
        all_delivered(&mut client);
        let posts = posted(&receiver, &path);
        assert!(posts.values().any(|p| p.len() > 1), "a job was retried");
        webhook_ids.extend(one_id_each(&posts, &stored(&mut client)));
    }
    assert_eq!(oids[0], oids[1], "both databases have the same oid");
    assert_eq!(ids[0], ids[1], "both clusters gave the same job ids");
    let distinct: BTreeSet<&String> = webhook_ids.iter().collect();
    assert_eq!(distinct.len(), 10, "{webhook_ids:?}");
}

/// A database dumped while its jobs wait, restored into another cluster:
/// that cluster posts each job under the webhook-id it had, and a job
/// enqueued afterwards in each cluster gets the same job id there but not
/// the same webhook-id.
#[test]
fn a_restore_into_another_cluster_keeps_the_ids_and_new_jobs_differ() {
    let receiver = Receiver::start();
    let source = Cluster::start_with(&[&allow(&receiver), "queue.enabled = off"]);
    let mut client = source.connect();
    webhook_queue(&mut client, &receiver, "/restored");
    enqueue(&mut client, 5);
    let before = stored(&mut client);

    let dump = std::env::temp_dir().join(format!("queue-ids-{}.sql", std::process::id()));
    let file = dump.to_str().unwrap();
    source.run_client("pg_dump", &["-f", file, DB]);
    let target = Cluster::start_bare(&queue_client_tests::pg_config(), &[&allow(&receiver)]);
    target
        .connect_to("postgres")
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .unwrap();
    target.run_client(
        "psql",
        &["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", file],
    );
    let _ = std::fs::remove_file(&dump);

    let mut restored = target.connect();
    all_delivered(&mut restored);
    let ids = one_id_each(&posted(&receiver, "/restored"), &before);
    assert_eq!(ids.len(), 5);

    let next_source = enqueue(&mut client, 1)[0];
    let next_restored = enqueue(&mut restored, 1)[0];
    assert_eq!(next_source, next_restored, "the same job id in both");
    assert_ne!(
        stored(&mut client)[&next_source],
        stored(&mut restored)[&next_restored]
    );
}

/// An asynchronous standby that missed the last jobs is promoted: it hands
/// their job ids out again, and the receiver gets new webhook-ids for the
/// new jobs.
#[test]
fn an_asynchronous_failover_that_lost_jobs_gives_new_jobs_new_ids() {
    let receiver = Receiver::start();
    let primary = Cluster::start_with(&[&allow(&receiver), DURABLE]);
    let mut client = primary.connect();
    webhook_queue(&mut client, &receiver, "/failover");
    let standby = primary.standby(&[]);
    let lsn: String = one(&mut client, "SELECT pg_current_wal_lsn()::text", &[]);
    let mut reader = standby.connect();
    eventually("the standby to replay the queue", || {
        one::<bool>(
            &mut reader,
            "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
            &[&lsn],
        )
    });
    drop(reader);
    standby.stop_server();

    // jobs the standby never sees, delivered by the primary, which dies
    let lost = enqueue(&mut client, 100);
    all_delivered(&mut client);
    let lost_posts = posted(&receiver, "/failover");
    let lost_ids = one_id_each(&lost_posts, &stored(&mut client));
    primary.crash();

    standby.start_server();
    standby.promote();
    let mut new = standby.connect();
    let again = enqueue(&mut new, 100);
    all_delivered(&mut new);
    let reused: BTreeSet<&i64> = again.iter().filter(|id| lost.contains(id)).collect();
    assert!(
        !reused.is_empty(),
        "the new primary handed lost job ids out again"
    );
    let new_ids: BTreeSet<String> = stored(&mut new).into_values().collect();
    let lost_ids: BTreeSet<String> = lost_ids.into_iter().collect();
    assert!(new_ids.is_disjoint(&lost_ids));
    let all_posts: Vec<String> = receiver
        .seen("/failover")
        .iter()
        .map(|s| s.header("webhook-id").unwrap().to_string())
        .collect();
    let distinct: BTreeSet<&String> = all_posts.iter().collect();
    assert_eq!(
        distinct.len(),
        200,
        "200 jobs, each its own webhook-id ({} requests)",
        all_posts.len()
    );
}
