//! The server dies (`pg_ctl stop -m immediate`) with work in flight on many
//! connections, and starts again: every acknowledged job is there, every
//! acknowledged completion holds, and nothing uncommitted survives.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use queue_client_tests::{complete, ids, one, Client, Cluster, DURABLE};

/// What the clients know of the work they sent, by outcome of its COMMIT.
#[derive(Default)]
struct Ledger {
    /// Jobs whose enqueue was committed and acknowledged.
    enqueued: HashSet<i64>,
    /// Jobs whose enqueue's COMMIT was sent but not acknowledged.
    enqueue_in_doubt: HashSet<i64>,
    /// Jobs whose completion was committed and acknowledged.
    completed: HashSet<i64>,
    /// Jobs whose completion's COMMIT was sent but not acknowledged.
    complete_in_doubt: HashSet<i64>,
    /// Jobs enqueued in transactions that never sent COMMIT.
    never_committed: HashSet<i64>,
}

fn producer(mut client: Client, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut tx) = client.transaction() else {
            return;
        };
        let Ok(rows) = tx.query(
            "SELECT * FROM queue_enqueue_batch('crash', array_fill('{\"p\": 1}'::jsonb, ARRAY[5]))",
            &[],
        ) else {
            return;
        };
        let batch = ids(&rows);
        ledger.lock().unwrap().enqueue_in_doubt.extend(&batch);
        if tx.commit().is_err() {
            return;
        }
        let mut l = ledger.lock().unwrap();
        for id in batch {
            l.enqueue_in_doubt.remove(&id);
            l.enqueued.insert(id);
        }
    }
}

fn consumer(mut client: Client, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let Ok(rows) = client.query(
            "SELECT id, lease::text FROM queue_claim('crash', 'consumer', 5, '1 hour')",
            &[],
        ) else {
            return;
        };
        if rows.is_empty() {
            thread::sleep(Duration::from_millis(5));
            continue;
        }
        let job_ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        let leases: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
        let Ok(mut tx) = client.transaction() else {
            return;
        };
        let Ok(done) = tx.query(
            "SELECT * FROM queue_complete_batch($1, $2::text[]::uuid[])",
            &[&job_ids, &leases],
        ) else {
            return;
        };
        let done = ids(&done);
        assert_eq!(done.len(), job_ids.len());
        ledger.lock().unwrap().complete_in_doubt.extend(&done);
        if tx.commit().is_err() {
            return;
        }
        let mut l = ledger.lock().unwrap();
        for id in done {
            l.complete_in_doubt.remove(&id);
            l.completed.insert(id);
        }
    }
}

#[test]
fn no_committed_job_is_lost_and_no_completed_job_comes_back() {
    let cluster = Cluster::start_with(&[DURABLE]);
    let mut admin = cluster.connect();
    admin
        .batch_execute("SELECT queue_create('crash', lease => '1 hour')")
        .unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));

    let mut workers = Vec::new();
    for n in 0..4 {
        let (client, ledger, stop) = (cluster.connect(), ledger.clone(), stop.clone());
        workers.push(thread::spawn(move || {
            if n % 2 == 0 {
                producer(client, ledger, stop)
            } else {
                consumer(client, ledger, stop)
            }
        }));
    }
    thread::sleep(Duration::from_millis(1500));

    // Four more connections stop mid-transaction: one enqueue each, and one
    // claimed job completed each, neither committed.
    let mut held = Vec::new();
    let mut held_completions = HashSet::new();
    for _ in 0..4 {
        let mut client = cluster.connect();
        let claimed = client
            .query_opt(
                "SELECT id, lease::text FROM queue_claim('crash', 'held', 1, '1 hour')",
                &[],
            )
            .unwrap();
        client.batch_execute("BEGIN").unwrap();
        let id: i64 = one(
            &mut client,
            "SELECT queue_enqueue('crash', '{\"held\": true}')",
            &[],
        );
        ledger.lock().unwrap().never_committed.insert(id);
        if let Some(job) = claimed {
            let (job_id, lease): (i64, String) = (job.get(0), job.get(1));
            assert!(complete(&mut client, job_id, &lease));
            held_completions.insert(job_id);
        }
        held.push(client);
    }

    cluster.crash();
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().unwrap();
    }
    drop(held);
    cluster.start_server();

    let mut client = cluster.connect();
    let rows = client
        .query(
            "SELECT id, status FROM queue_jobs WHERE queue = 'crash'",
            &[],
        )
        .unwrap();
    let present: HashSet<i64> = rows.iter().map(|r| r.get(0)).collect();
    let status = |id: i64| -> String {
        rows.iter()
            .find(|r| r.get::<_, i64>(0) == id)
            .map(|r| r.get(1))
            .unwrap_or_default()
    };
    let l = ledger.lock().unwrap();
    assert!(
        l.enqueued.len() > 50,
        "enough work was acknowledged ({})",
        l.enqueued.len()
    );
    assert!(
        l.completed.len() > 10,
        "enough completions were acknowledged ({})",
        l.completed.len()
    );

    let lost: Vec<_> = l.enqueued.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged jobs lost: {lost:?}");
    let allowed: HashSet<i64> = l.enqueued.union(&l.enqueue_in_doubt).copied().collect();
    let phantoms: Vec<_> = present.difference(&allowed).collect();
    assert!(
        phantoms.is_empty(),
        "jobs that were never committed: {phantoms:?}"
    );
    assert!(l.never_committed.is_disjoint(&present));

    for id in &l.completed {
        assert_eq!(
            status(*id),
            "succeeded",
            "acknowledged completion of {id} undone"
        );
    }
    for id in &held_completions {
        assert_eq!(
            status(*id),
            "processing",
            "an uncommitted completion of {id} survived"
        );
    }
    for id in present.difference(&l.completed) {
        let s = status(*id);
        let in_doubt = l.complete_in_doubt.contains(id);
        assert!(
            s == "pending" || s == "processing" || (in_doubt && s == "succeeded"),
            "job {id} is {s}"
        );
    }

    // The queue works on after recovery.
    let claimed = client
        .query("SELECT id FROM queue_claim('crash', 'after', 10000)", &[])
        .unwrap();
    let pending = present
        .iter()
        .filter(|id| status(**id) == "pending")
        .count();
    assert_eq!(claimed.len(), pending);
}
