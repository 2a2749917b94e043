//! Throwaway PostgreSQL clusters for the client tests, each with the
//! installed `queue` extension preloaded and created, and connections to them.
//!
//! A cluster lives in its own directory under /tmp, listens only on a Unix
//! socket there, and is stopped and removed when dropped. When the tests run
//! as root the server runs as `postgres`, which PostgreSQL requires. Its
//! data directory is a copy of one `initdb` made once per PostgreSQL build
//! (`template`), and it runs with `fsync = off` unless a test asks for
//! `DURABLE` (those that stop a server the hard way or fail over). Tests
//! run side by side (make test runs them with cargo-nextest), each on its
//! own cluster. With QUEUE_TEST_TIMINGS set, each cluster's start is
//! written to that file (scripts/test-times.py sums them up).

pub mod receiver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use postgres::{Client, NoTls};

const PORT: u16 = 5432;
pub const DB: &str = "queue_test";

/// A setting for a cluster whose durability the test checks (a crash, an
/// immediate stop, a failover): WAL and data flushed to disk, as in
/// production. Others run without (`fsync = off`), which is faster.
pub const DURABLE: &str = "fsync = on";

pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
}

/// The pg_config of the PostgreSQL under test (PG_CONFIG, else Debian's 15).
pub fn pg_config() -> String {
    std::env::var("PG_CONFIG").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_config".into())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

/// Runs a server program as the cluster's owner.
pub fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// A new empty directory that the server's user may write (an archive).
pub fn server_writable_dir(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
    std::fs::create_dir_all(path).unwrap();
    if is_root() {
        run({
            let mut c = Command::new("chown");
            c.args(["postgres:postgres"]).arg(path);
            c
        });
    }
}

pub fn run(mut command: Command) {
    let out = command.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Cluster {
    /// A new cluster, started, with the extension created in database `DB`.
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// `start`, with lines added to postgresql.conf (later lines win, so
    /// `shared_preload_libraries = ''` turns the preload off).
    pub fn start_with(settings: &[&str]) -> Cluster {
        let cluster = Cluster::start_bare(&pg_config(), settings);
        let mut admin = cluster.connect_to("postgres");
        admin
            .batch_execute(&format!("CREATE DATABASE {DB}"))
            .unwrap();
        cluster
            .connect()
            .batch_execute("CREATE EXTENSION queue")
            .unwrap();
        cluster
    }

    /// A new cluster of the PostgreSQL that `pg_config` names, started,
    /// with the library preloaded and `settings` added, and no database of
    /// the tests' own (nor the extension) in it yet.
    pub fn start_bare(pg_config: &str, settings: &[&str]) -> Cluster {
        Cluster::start_bare_with(pg_config, &[], settings)
    }

    /// `start_bare`, with more arguments for initdb.
    pub fn start_bare_with(pg_config: &str, initdb: &[&str], settings: &[&str]) -> Cluster {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let started = Instant::now();
        let bindir = Command::new(pg_config)
            .arg("--bindir")
            .output()
            .expect("pg_config runs");
        let bin = PathBuf::from(String::from_utf8(bindir.stdout).unwrap().trim());
        let dir = PathBuf::from(format!(
            "/tmp/queue-client-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        server_writable_dir(&dir);
        let cluster = Cluster { dir, bin };
        if initdb.is_empty() {
            copy_data_dir(&template(&cluster.bin), &cluster.data());
        } else {
            run(initdb_command(&cluster.bin, &cluster.data(), initdb));
        }
        let conf = format!(
            "port = {PORT}\nlisten_addresses = ''\nunix_socket_directories = '{}'\n\
             shared_preload_libraries = 'queue'\nmax_connections = 50\nfsync = off\n",
            cluster.dir.display()
        );
        let path = cluster.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&conf);
        for line in settings {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        cluster.start_server_untimed();
        record_timing("cluster", started.elapsed());
        cluster
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A directory of its own for a new cluster of the same PostgreSQL,
    /// owned by the server's user.
    fn sibling(&self) -> Cluster {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let dir = PathBuf::from(format!(
            "/tmp/queue-standby-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        server_writable_dir(&dir);
        Cluster {
            dir,
            bin: self.bin.clone(),
        }
    }

    /// A hot standby of this cluster (`pg_basebackup -R`, streaming),
    /// started, with `settings` added: its own socket directory, the same
    /// preload.
    pub fn standby(&self, settings: &[&str]) -> Cluster {
        self.assert_durable("a standby");
        let standby = self.base_backup(&["-R"]);
        standby.own_socket(settings);
        standby.start_server();
        standby
    }

    /// `standby`, and this cluster then waits for it at each commit
    /// (`synchronous_standby_names = '*'`, reloaded): returns once the
    /// standby is synchronous.
    pub fn synchronous_standby(&self, settings: &[&str]) -> Cluster {
        let mut lines = settings.to_vec();
        lines.push("synchronous_standby_names = ''");
        let standby = self.standby(&lines);
        self.configure(&["synchronous_standby_names = '*'"]);
        let mut admin = self.connect_to("postgres");
        admin.batch_execute("SELECT pg_reload_conf()").unwrap();
        eventually("the standby to be synchronous", || {
            one::<i64>(
                &mut admin,
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                &[],
            ) == 1
        });
        standby
    }

    /// A base backup of this cluster (`pg_basebackup -X stream` and
    /// `options`) in a cluster directory of its own, not started.
    pub fn base_backup(&self, options: &[&str]) -> Cluster {
        self.assert_durable("a base backup");
        let backup = self.sibling();
        run({
            let mut c = as_owner(&self.bin.join("pg_basebackup"));
            c.arg("-h")
                .arg(&self.dir)
                .args([
                    "-p",
                    &PORT.to_string(),
                    "-U",
                    "postgres",
                    "-X",
                    "stream",
                    "-c",
                    "fast",
                ])
                .args(options)
                .arg("-D")
                .arg(backup.data());
            c
        });
        backup
    }

    /// Starts a base backup as a point-in-time recovery: WAL from
    /// `archive`, up to the restore point `target`, then promoted; with
    /// `settings` added.
    pub fn recover_to(&self, archive: &Path, target: &str, settings: &[&str]) {
        let restore = format!("restore_command = 'cp {}/%f %p'", archive.display());
        let target = format!("recovery_target_name = '{target}'");
        let mut lines = vec![
            restore.as_str(),
            target.as_str(),
            "recovery_target_action = 'promote'",
            "archive_mode = off",
        ];
        lines.extend_from_slice(settings);
        self.own_socket(&lines);
        std::fs::write(self.data().join("recovery.signal"), "").unwrap();
        if is_root() {
            run({
                let mut c = Command::new("chown");
                c.args(["postgres:postgres"])
                    .arg(self.data().join("recovery.signal"));
                c
            });
        }
        self.start_server();
    }

    /// Points postgresql.conf at this cluster's own socket directory (a
    /// copy of another cluster's data directory names the other's), and
    /// adds `settings`.
    fn own_socket(&self, settings: &[&str]) {
        let socket = format!("unix_socket_directories = '{}'", self.dir.display());
        let mut lines = vec![socket.as_str()];
        lines.extend_from_slice(settings);
        self.configure(&lines);
    }

    /// Promotes this standby and waits until it accepts writes.
    pub fn promote(&self) {
        run(self.pg_ctl(&["-w", "-t", "60", "promote"]));
    }

    /// pg_ctl on this cluster's data directory, as its owner, with `args`.
    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut c = as_owner(&self.bin.join("pg_ctl"));
        c.arg("-D").arg(self.data()).args(args);
        c
    }

    /// Turns this stopped cluster, a former primary, into a standby of
    /// `primary` with pg_rewind (which needs wal_log_hints or checksums),
    /// and starts it.
    pub fn rewind_as_standby_of(&self, primary: &Cluster) {
        let source = format!(
            "host={} port={PORT} user=postgres dbname=postgres",
            primary.dir.display()
        );
        run({
            let mut c = as_owner(&self.bin.join("pg_rewind"));
            c.arg("-D")
                .arg(self.data())
                .arg(format!("--source-server={source}"))
                .arg("-R");
            c
        });
        self.own_socket(&[]);
        self.start_server();
    }

    /// Adds lines to postgresql.conf (they take effect at the next start).
    pub fn configure(&self, settings: &[&str]) {
        let path = self.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path).unwrap();
        for line in settings {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
    }

    /// Stops the server cleanly (a shutdown checkpoint), as before an
    /// upgrade.
    pub fn stop_server(&self) {
        run(self.pg_ctl(&["-m", "fast", "-w", "stop"]));
    }

    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    pub fn bin(&self, program: &str) -> PathBuf {
        self.bin.join(program)
    }

    /// Runs this PostgreSQL's client `program` (pg_dump, pg_restore,
    /// psql) on this cluster as its superuser, with `args`; the test fails
    /// with its output when it fails.
    pub fn run_client(&self, program: &str, args: &[&str]) {
        run({
            let mut c = Command::new(self.bin(program));
            c.arg("-h")
                .arg(&self.dir)
                .args(["-p", &PORT.to_string(), "-U", "postgres"])
                .args(args);
            c
        });
    }

    /// What the server has logged so far.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Starts the server of an existing cluster (after `crash`, say).
    pub fn start_server(&self) {
        let started = Instant::now();
        self.start_server_untimed();
        record_timing("server start", started.elapsed());
    }

    fn start_server_untimed(&self) {
        run({
            let mut c = self.pg_ctl(&["-l"]);
            c.arg(self.dir.join("server.log"))
                .args(["-w", "-t", "60", "start"]);
            // a Rust backtrace setting would put backtraces into error details
            c.env_remove("RUST_BACKTRACE")
                .env_remove("RUST_LIB_BACKTRACE");
            c
        });
    }

    /// Whether the cluster was started `DURABLE` (its last `fsync` line).
    fn durable(&self) -> bool {
        let conf = std::fs::read_to_string(self.data().join("postgresql.conf")).unwrap();
        conf.lines()
            .filter_map(|l| l.trim().strip_prefix("fsync"))
            .filter_map(|rest| rest.trim().strip_prefix('='))
            .next_back()
            .is_some_and(|v| v.trim() == "on")
    }

    /// A test of a crash or a failover checks durability: it runs on a
    /// cluster started `DURABLE`, never on one without fsync.
    fn assert_durable(&self, what: &str) {
        assert!(
            self.durable(),
            "{what}: start this test's cluster with queue_client_tests::DURABLE"
        );
    }

    /// Stops the server the hard way: every process killed, no checkpoint,
    /// as in a power cut. The next start runs crash recovery.
    pub fn crash(&self) {
        self.assert_durable("a crash");
        run(self.pg_ctl(&["-m", "immediate", "-w", "stop"]));
    }

    /// Creates database `name` and runs `setup` in it.
    pub fn create_database(&self, name: &str, setup: &str) {
        self.connect_to("postgres")
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        self.connect_to(name).batch_execute(setup).unwrap();
    }

    pub fn connect(&self) -> Client {
        self.connect_to(DB)
    }

    /// How to connect to database `db` of this cluster.
    pub fn config(&self, db: &str) -> postgres::Config {
        let mut config = postgres::Config::new();
        config
            .host_path(&self.dir)
            .port(PORT)
            .user("postgres")
            .dbname(db);
        config
    }

    pub fn connect_to(&self, db: &str) -> Client {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let result = self.config(db).connect(NoTls);
            match result {
                Ok(client) => return client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("cannot connect to the test cluster: {e}"),
            }
        }
    }
}

/// initdb of a new data directory `data` with `args` added.
fn initdb_command(bin: &Path, data: &Path, args: &[&str]) -> Command {
    let mut c = as_owner(&bin.join("initdb"));
    c.arg("-D")
        .arg(data)
        .args(["-A", "trust", "-U", "postgres"]);
    c.args(["--locale=C.UTF-8", "-E", "UTF8", "--no-sync"]);
    c.args(args);
    c
}

/// The data directory every cluster of the PostgreSQL in `bin` starts from:
/// an `initdb` made once (per build of the server: its version and
/// directory name it) and kept under /tmp, so that each test copies it in a
/// fraction of initdb's time. Made beside its place and renamed into it, so
/// that tests starting at once never see half of one.
fn template(bin: &Path) -> PathBuf {
    let version = Command::new(bin.join("postgres"))
        .arg("--version")
        .output()
        .expect("postgres --version runs");
    let mut key = String::from_utf8_lossy(&version.stdout).into_owned();
    key.push_str(&bin.display().to_string());
    let hash = key.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    let place = PathBuf::from(format!("/tmp/queue-template-{hash:016x}"));
    if place.join("data").join("PG_VERSION").exists() {
        return place;
    }
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let making = PathBuf::from(format!(
        "{}.{}.{}",
        place.display(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    server_writable_dir(&making);
    run(initdb_command(bin, &making.join("data"), &[]));
    if std::fs::rename(&making, &place).is_err() {
        // another test made it first
        let _ = std::fs::remove_dir_all(&making);
    }
    place
}

/// A copy of the template's data directory at `data`, owned as initdb left
/// it.
fn copy_data_dir(template: &Path, data: &Path) {
    run({
        let mut c = Command::new("cp");
        c.arg("-a").arg(template.join("data")).arg(data);
        c
    });
}

/// Appends what took `took` (a cluster's start) to the file that
/// QUEUE_TEST_TIMINGS names, with the test's name: `kind`, test, seconds.
fn record_timing(kind: &str, took: Duration) {
    let Ok(path) = std::env::var("QUEUE_TEST_TIMINGS") else {
        return;
    };
    let test = std::env::var("NEXTEST_TEST_NAME")
        .ok()
        .or_else(|| std::thread::current().name().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    let binary = std::env::var("NEXTEST_BINARY_ID").unwrap_or_default();
    let line = format!("{kind}\t{binary} {test}\t{:.3}\n", took.as_secs_f64());
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

impl Drop for Cluster {
    /// Stops the server and removes the cluster; after a failure the
    /// cluster's directory stays (its server.log, its data), and with
    /// QUEUE_TEST_KEEP set the server keeps running too, to be looked at
    /// (docs/development.md, "Running tests").
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("QUEUE_TEST_KEEP").is_some() {
            eprintln!(
                "QUEUE_TEST_KEEP: the cluster is still running: psql -h {} -p {PORT} -U postgres {DB} \
                 (stop it: pg_ctl -D {} stop, as postgres)",
                self.dir.display(),
                self.data().display()
            );
            return;
        }
        if self.data().join("postmaster.pid").exists() {
            let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]).output();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs `f` on `threads` threads at once, each with a connection of its own;
/// returns what each returned.
pub fn on_connections<T, F>(cluster: &Cluster, threads: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize, &mut Client) -> T + Send + Sync + 'static,
{
    let f = std::sync::Arc::new(f);
    let handles: Vec<_> = (0..threads)
        .map(|n| {
            let mut client = cluster.connect();
            let f = f.clone();
            std::thread::spawn(move || f(n, &mut client))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a worker thread"))
        .collect()
}

/// The id of every job a call returned, as `SETOF bigint` or `id` column.
pub fn ids(rows: &[postgres::Row]) -> Vec<i64> {
    rows.iter().map(|r| r.get::<_, i64>(0)).collect()
}

/// The one value of a query that returns one row of one column.
pub fn one<T: postgres::types::FromSqlOwned>(
    client: &mut impl postgres::GenericClient,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> T {
    client.query_one(sql, params).unwrap().get(0)
}

/// The one row of a query, as a tuple of its columns: `(a,)` up to
/// `(a, b, c, d)`.
pub fn one_row<T: FromRow>(
    client: &mut impl postgres::GenericClient,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> T {
    T::from_row(&client.query_one(sql, params).unwrap())
}

/// The first column of every row of a query.
pub fn column<T: postgres::types::FromSqlOwned>(
    client: &mut impl postgres::GenericClient,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Vec<T> {
    all_rows::<(T,)>(client, sql, params)
        .into_iter()
        .map(|(value,)| value)
        .collect()
}

/// Every row of a query, each as a tuple of its columns (as `one_row`).
pub fn all_rows<T: FromRow>(
    client: &mut impl postgres::GenericClient,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Vec<T> {
    client
        .query(sql, params)
        .unwrap()
        .iter()
        .map(T::from_row)
        .collect()
}

/// A tuple read from a row's columns, in order: what `one_row` and
/// `all_rows` return.
pub trait FromRow {
    fn from_row(row: &postgres::Row) -> Self;
}

macro_rules! from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: postgres::types::FromSqlOwned),+> FromRow for ($($t,)+) {
            fn from_row(row: &postgres::Row) -> Self {
                ($(row.get($i),)+)
            }
        }
    };
}

from_row!(A 0);
from_row!(A 0, B 1);
from_row!(A 0, B 1, C 2);
from_row!(A 0, B 1, C 2, D 3);

/// Claims up to `max_jobs` jobs with an hour's lease: (id, lease) pairs.
pub fn claim(client: &mut Client, queue: &str, max_jobs: i32) -> Vec<(i64, String)> {
    all_rows(
        client,
        "SELECT id, lease::text FROM queue_claim($1, 'client-test', $2, '1 hour')",
        &[&queue, &max_jobs],
    )
}

/// Completes one claimed job; false when its lease is no longer held.
pub fn complete(client: &mut Client, id: i64, lease: &str) -> bool {
    one(
        client,
        "SELECT queue_complete($1, $2::text::uuid)",
        &[&id, &lease],
    )
}

/// Completes the claimed jobs in one call; returns the ids completed.
pub fn complete_all(client: &mut Client, jobs: &[(i64, String)]) -> Vec<i64> {
    let job_ids: Vec<i64> = jobs.iter().map(|j| j.0).collect();
    let leases: Vec<String> = jobs.iter().map(|j| j.1.clone()).collect();
    let rows = client
        .query(
            "SELECT * FROM queue_complete_batch($1, $2::text[]::uuid[])",
            &[&job_ids, &leases],
        )
        .unwrap();
    ids(&rows)
}

/// Enqueues `n` jobs (`{"i": 1}`, `{"i": 2}`, ...) in batches of 1,000.
pub fn enqueue_many(client: &mut Client, queue: &str, n: usize) -> Vec<i64> {
    let mut all = Vec::new();
    let mut left = n;
    while left > 0 {
        let batch = left.min(1000);
        let rows = client
            .query(
                "SELECT * FROM queue_enqueue_batch($1,
                    (SELECT array_agg(jsonb_build_object('i', i)) FROM generate_series(1, $2) i))",
                &[&queue, &(batch as i32)],
            )
            .unwrap();
        all.extend(ids(&rows));
        left -= batch;
    }
    all
}

/// `group`'s `n` jobs, enqueued in batches of 1,000, each with payload
/// `{"g": group}`.
pub fn enqueue_group(client: &mut Client, queue: &str, group: &str, n: i32) {
    let mut left = n;
    while left > 0 {
        let batch = left.min(1000);
        client
            .execute(
                "SELECT count(*) FROM queue_enqueue_batch($1,
                    array_fill(jsonb_build_object('g', $2::text), ARRAY[$3::int]),
                    group_keys => array_fill($2::text, ARRAY[$3::int]))",
                &[&queue, &group, &batch],
            )
            .unwrap();
        left -= batch;
    }
}

/// Unfinished jobs of `queue` (pending or processing).
pub fn unfinished(client: &mut Client, queue: &str) -> i64 {
    one(
        client,
        "SELECT count(*) FROM queue_jobs WHERE queue = $1 AND status IN ('pending', 'processing')",
        &[&queue],
    )
}

/// A table `log` for what consumers do, one row per event, written in the
/// transaction of the event itself. The order tests (ordered_groups.rs)
/// write `claim` with the claim (with the time after it and its lease's
/// end), `done`, `retry`, `dead` and `cancel` in the statement that ended
/// the attempt, `revive` in the `queue_retry` of a dead letter; the rate
/// tests (limits.rs) each `claim` with its time.
pub const EVENT_LOG: &str = "CREATE TABLE log (seq bigserial, job bigint, grp text, event text,
                                               claimed_at timestamptz, lease_until timestamptz)";

/// How long `eventually` waits: generous, since tests assert no timing and
/// the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

/// Waits until `f` holds, or fails the test after DEADLINE.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the backend `pid` waits for a heavyweight lock that another
/// session holds (its wait event says so): the state that shows it is held
/// up, rather than a time it took.
pub fn waits_for_a_lock(cluster: &Cluster, pid: i32, what: &str) {
    let mut observer = cluster.connect();
    eventually(&format!("{what} to wait for a lock"), || {
        one::<bool>(
            &mut observer,
            // (each poll is a transaction of its own: a fresh pg_stat_activity)
            "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')",
            &[&pid],
        )
    });
}

/// How many backends wait in a `CALL` of `procedure` (`queue_wait`,
/// `queue_await`) now, on its wait event.
pub fn waiting_in(client: &mut Client, procedure: &str) -> i64 {
    one(
        client,
        "SELECT count(*) FROM pg_stat_activity
          WHERE query LIKE 'CALL ' || $1::text || '%' AND wait_event_type = 'Extension'",
        &[&procedure],
    )
}

/// A queue `work` with jobs in every status: pending (due, and one
/// scheduled a day ahead), succeeded, failed and cancelled; the caller adds
/// a processing one with the lease it keeps.
pub const JOBS_IN_EVERY_STATUS: &str = "
    SELECT queue_create('work', max_attempts => 1, lease => '1 hour');
    SELECT queue_enqueue('work', jsonb_build_object('n', n)) FROM generate_series(1, 8) n;
    SELECT queue_enqueue('work', '{\"later\": true}', run_at => now() + interval '1 day');
    SELECT queue_complete(id, lease) FROM queue_claim('work', 'w', max_jobs => 2);
    SELECT queue_fail(id, lease, 'broken', permanent => true)
      FROM queue_claim('work', 'w', max_jobs => 1);
    SELECT queue_cancel(id) FROM queue_jobs
     WHERE queue = 'work' AND status = 'pending' ORDER BY id LIMIT 1;";

/// Every job of a database and every queue's counters, to compare a
/// database before and after an upgrade.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueState {
    /// (id, queue, status, attempts) of every job, by id.
    pub jobs: Vec<(i64, String, String, i32)>,
    /// Each queue's pending, scheduled, processing, succeeded, failed,
    /// cancelled and its three totals.
    pub stats: std::collections::BTreeMap<String, Vec<i64>>,
}

impl QueueState {
    pub fn of(client: &mut Client) -> QueueState {
        let jobs = all_rows(
            client,
            "SELECT id, queue, status, attempts FROM queue_jobs ORDER BY id",
            &[],
        );
        let stats = all_rows(
            client,
            "SELECT queue, ARRAY[pending, scheduled, processing, succeeded, failed, cancelled,
                                 enqueued_total, succeeded_total, failed_total]
               FROM queue_stats ORDER BY queue",
            &[],
        )
        .into_iter()
        .collect();
        QueueState { jobs, stats }
    }
}
