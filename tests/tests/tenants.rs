//! Many tenant databases on the default four worker slots, as a team with a
//! database per customer uses them: every tenant's jobs are delivered,
//! exactly once, however many tenants wait at once. Deadlines are generous
//! limits (60 s); nothing here asserts a timing.

use std::sync::{Arc, Barrier};

use queue_client_tests::{column, eventually, one, one_row, Client, Cluster};

/// A sender queue `events` in the current database whose sender records
/// each call in `deliveries` (qualified names, so that only the scheduling
/// is under test here; tests/senders.rs covers unqualified ones).
const TENANT: &str = "
    CREATE EXTENSION queue;
    CREATE TABLE public.deliveries (job bigint);
    CREATE FUNCTION public.record(job jsonb) RETURNS void LANGUAGE sql AS
        $$ INSERT INTO public.deliveries VALUES ((job->>'id')::bigint) $$;
    SELECT queue_create('events');
    SELECT queue_register_sender('events', 'public.record(jsonb)');";

/// (calls, distinct jobs called for) in `database`.
fn deliveries(client: &mut Client) -> (i64, i64) {
    one_row(
        client,
        "SELECT count(*), count(DISTINCT job) FROM public.deliveries",
        &[],
    )
}

#[test]
fn a_dozen_tenants_on_four_slots_all_get_their_jobs() {
    // the default queue.max_workers (4) and queue.idle_exit (60 s)
    let cluster = Cluster::start_with(&["max_connections = 100"]);
    let names: Vec<String> = (1..=12).map(|i| format!("tenant_{i:02}")).collect();
    for name in &names {
        cluster.create_database(name, TENANT);
    }
    // two more databases with the extension and nothing to deliver
    cluster.create_database(
        "other",
        "CREATE EXTENSION queue; SELECT queue_create('pull');",
    );
    let mut clients: Vec<Client> = names.iter().map(|n| cluster.connect_to(n)).collect();
    for client in clients.iter_mut() {
        client
            .batch_execute("SELECT queue_enqueue('events', '{}') FROM generate_series(1, 20)")
            .unwrap();
    }
    eventually("every tenant's 20 jobs delivered", || {
        clients.iter_mut().all(|c| deliveries(c).1 == 20)
    });
    for (name, client) in names.iter().zip(clients.iter_mut()) {
        assert_eq!(deliveries(client), (20, 20), "{name}: each job called once");
        let succeeded: i64 = one(
            client,
            "SELECT count(*) FROM queue_jobs WHERE status = 'succeeded'",
            &[],
        );
        assert_eq!(succeeded, 20, "{name}");
    }
}

#[test]
fn sixty_tenants_made_from_a_template_are_served_after_one_commit_each() {
    let cluster = Cluster::start_with(&["max_connections = 100"]);
    let mut admin = cluster.connect_to("postgres");
    admin
        .batch_execute("CREATE DATABASE tenant_template")
        .unwrap();
    cluster
        .connect_to("tenant_template")
        .batch_execute(TENANT)
        .unwrap();
    admin
        .batch_execute("ALTER DATABASE tenant_template WITH IS_TEMPLATE true")
        .unwrap();
    let names: Vec<String> = (1..=60).map(|i| format!("tenant_{i:02}")).collect();
    for name in &names {
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {name} TEMPLATE tenant_template STRATEGY FILE_COPY"
            ))
            .unwrap();
    }
    let clients: Vec<Client> = names.iter().map(|n| cluster.connect_to(n)).collect();
    // one job in every database, committed at the same moment
    let barrier = Arc::new(Barrier::new(clients.len()));
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                client
                    .batch_execute("BEGIN; SELECT queue_enqueue('events', '{}');")
                    .unwrap();
                barrier.wait();
                client.batch_execute("COMMIT").unwrap();
                client
            })
        })
        .collect();
    let mut clients: Vec<Client> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    eventually("the job of every tenant delivered", || {
        clients.iter_mut().all(|c| deliveries(c).1 == 1)
    });
    for (name, client) in names.iter().zip(clients.iter_mut()) {
        assert_eq!(deliveries(client), (1, 1), "{name}: its job called once");
    }
    // the template itself is never served
    let mut main = cluster.connect();
    let template_workers: i64 = one(
        &mut main,
        "SELECT count(*) FROM queue_workers WHERE database = 'tenant_template'",
        &[],
    );
    assert_eq!(template_workers, 0);
}

#[test]
fn a_database_nobody_uses_still_has_its_finished_jobs_cleaned_up() {
    // a worker leaves after 1 s idle; a database without a worker is visited
    // for its cleanup at most every 6 upkeep intervals (here 6 s)
    let cluster = Cluster::start_with(&["queue.idle_exit = 1", "queue.upkeep_interval = 1"]);
    let mut main = cluster.connect();
    main.batch_execute(
        "SELECT queue_create('pull', retention => '2 seconds');
         SELECT queue_enqueue('pull', '{}') FROM generate_series(1, 3);
         SELECT queue_complete(id, lease) FROM queue_claim('pull', 'me', max_jobs => 3);",
    )
    .unwrap();
    let succeeded = |client: &mut Client| -> i64 {
        one(
            client,
            "SELECT count(*) FROM queue_jobs WHERE status = 'succeeded'",
            &[],
        )
    };
    assert_eq!(succeeded(&mut main), 3);
    // from here on, no commit in the database: only reads
    let mut pids = std::collections::HashSet::new();
    let mut idle_seen = false;
    eventually("the finished jobs cleaned up without a commit", || {
        let running: Vec<i32> = column(
            &mut main,
            "SELECT pid FROM queue_workers WHERE database = current_database() AND pid IS NOT NULL",
            &[],
        );
        idle_seen |= running.is_empty();
        pids.extend(running);
        succeeded(&mut main) == 0
    });
    assert!(
        idle_seen,
        "the database was left without a worker meanwhile"
    );
    // one visit for the cleanup (plus the first worker), not a worker
    // every few seconds
    assert!(pids.len() <= 3, "worker starts: {pids:?}");
}
