#!/usr/bin/env python3
"""Automatic failover with Patroni (`make test-ha`).

Three Patroni nodes on 127.0.0.1 with Patroni's built-in Raft DCS (no
etcd) and `synchronous_mode`, each with its own data directory, PostgreSQL
port and REST API port, run a database with a SQL-sender queue, a webhook
queue (to a receiver this script runs itself) and a pull queue. Under load
(8 connections enqueuing, 2 pull consumers holding leases) the leader is
killed hard (SIGKILL of its Patroni and of its postmaster); once Patroni
has promoted the synchronous replica, the test checks what
tests/tests/replicas.rs checks of a plain failover: no acknowledged job is
lost, each SQL sender's effect exists once, the receiver saw every webhook
job and repeats only of jobs that were in flight, each job under one
`webhook-id`, the held leases complete and `queue_stats` is exact. The
killed node, started again, rejoins as a replica and runs no queue process.

The extension's library is copied into the test's directory first and
found there through `dynamic_library_path`, so that a reinstall of
`queue.so` while this runs (another test run) cannot crash these servers.

As root, Patroni and PostgreSQL run as the OS user `postgres`. Ports
55600-55699 on 127.0.0.1. Deadlines (120 s) only keep it from hanging.
Prints `1 passed, 0 failed` or `0 passed, 1 failed` last; exits non-zero
when it fails, leaving its directory (path printed) for a look.
"""

import ctypes
import http.server
import importlib.metadata
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import psycopg

PG_CONFIG = os.environ.get("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config")
DEADLINE = 120  # seconds: never a measured time, only a bound on waiting

# ports (all in 55600-55699): PostgreSQL, REST API and Raft per node, and
# the webhook receiver
PG_PORTS = [55601, 55602, 55603]
API_PORTS = [55611, 55612, 55613]
RAFT_PORTS = [55621, 55622, 55623]
RECEIVER_PORT = 55630

TOTAL_JOBS = 10_000  # enqueues tried at most
KILL_AFTER = 3_000  # acknowledged enqueues before the leader is killed
IN_FLIGHT = 16  # the webhook queue's max_in_flight
QUEUES = ["ha.sql", "ha.hook", "ha.pull"]

T0 = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - T0:6.1f}s] {message}", flush=True)


def eventually(what, check, timeout=DEADLINE, interval=0.2):
    """Polls `check` until it returns something true; fails after `timeout`."""
    until = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < until:
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 (a server still starting, say)
            last_error = e
        time.sleep(interval)
    raise AssertionError(
        f"gave up waiting {timeout} s for {what}"
        + (f" (last error: {last_error})" if last_error else "")
    )


def pg_config(flag):
    return subprocess.run([PG_CONFIG, flag], check=True, capture_output=True, text=True).stdout.strip()


# --- processes -------------------------------------------------------------

# The pids of the processes that this script started with Popen (they are
# waited for by Popen itself); other children that die are reaped below.
POPEN_PIDS = set()


def become_subreaper():
    """Postmasters (Patroni starts them detached, like pg_ctl) become
    children of this script rather than of init: they are reaped here, so
    a killed one is gone rather than a zombie that its pid file points to."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return

    def reap():
        me = str(os.getpid())
        while True:
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) in POPEN_PIDS:
                    continue
                try:
                    stat = Path(entry.path, "stat").read_text()
                except OSError:
                    continue
                fields = stat.rsplit(")", 1)[1].split()
                if fields[0] == "Z" and fields[1] == me:
                    try:
                        os.waitpid(int(entry.name), os.WNOHANG)
                    except ChildProcessError:
                        pass
            time.sleep(0.2)

    threading.Thread(target=reap, daemon=True).start()


def alive(pid):
    """Whether pid is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def send(pid, sig):
    """Signals pid, which may have exited meanwhile."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def children_of(pid):
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == str(pid):
                found.append(int(entry.name))
    return found


def as_postgres():
    """Popen's user/group for the servers: `postgres` when run as root."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def python_for_patroni(tmp, env):
    """The interpreter (and PYTHONPATH) that Patroni runs with as the
    servers' user. This one when that user can run it and import Patroni;
    otherwise (a Python under /root, say, which `postgres` cannot reach) a
    system interpreter of the same version, with Patroni and the packages
    it needs copied from this interpreter's site-packages into tmp."""
    probe = "import patroni, psycopg, pysyncobj"

    def works(python, extra_env):
        try:
            done = subprocess.run(
                [python, "-c", probe], env={**env, **extra_env}, cwd=tmp,
                capture_output=True, timeout=60, **as_postgres(),
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0

    if works(sys.executable, {}):
        return sys.executable, {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [f"/usr/bin/{version}", f"/usr/local/bin/{version}"]
    python = next((p for p in candidates if os.access(p, os.X_OK)), None)
    if python is None:
        raise RuntimeError(
            f"the user postgres cannot run {sys.executable} with Patroni, and there is no {version} "
            f"in /usr/bin or /usr/local/bin to run it with"
        )
    target = Path(tmp, "python")
    copy_distributions(["patroni", "psycopg", "psycopg-binary", "pysyncobj"], target)
    chown_tree(target)
    extra = {"PYTHONPATH": str(target)}
    if not works(python, extra):
        raise RuntimeError(f"the user postgres cannot import Patroni with {python} and {target}")
    log(f"Patroni runs with {python} and a copy of its packages in {target}")
    return python, extra


def copy_distributions(names, target):
    """Copies the installed distributions `names` and what they require
    (transitively; extras only those named) into target."""
    wanted, seen = list(names), set()
    while wanted:
        name = wanted.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in dist.requires or []:
            spec, _, marker = requirement.partition(";")
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra and not (key == "patroni" and extra.group(1) in ("raft", "psycopg3")):
                continue
            wanted.append(re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0))
        root = Path(dist.locate_file("")).resolve()
        for file in dist.files or []:
            source = Path(dist.locate_file(file)).resolve()
            if root in source.parents and source.is_file():
                dest = target / source.relative_to(root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)


def chown_tree(path):
    if os.geteuid() != 0:
        return
    user = pwd.getpwnam("postgres")
    for root, dirs, files in os.walk(path):
        os.chown(root, user.pw_uid, user.pw_gid)
        for f in files:
            os.chown(os.path.join(root, f), user.pw_uid, user.pw_gid)


def port_free(port):
    with socket.socket() as s:
        # (as the servers do: a port whose old connections linger in
        # TIME_WAIT is free)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# --- the cluster -----------------------------------------------------------


class Node:
    def __init__(self, n, tmp):
        self.name = f"node{n + 1}"
        self.pg_port, self.api_port, self.raft_port = PG_PORTS[n], API_PORTS[n], RAFT_PORTS[n]
        self.dir = Path(tmp, self.name)
        self.data_dir = self.dir / "data"
        self.config = self.dir / "patroni.yml"
        self.proc = None
        self.killed_postmaster = None  # (pid, children) of the postmaster we killed

    def write_config(self, tmp, bin_dir):
        others = [f"127.0.0.1:{p}" for p in RAFT_PORTS if p != self.raft_port]
        parameters = {
            # the copy of the library, found before $libdir's (see main)
            "dynamic_library_path": f"{tmp}/lib:$libdir",
            "shared_preload_libraries": "queue",
            "wal_log_hints": "on",
            "unix_socket_directories": str(self.dir),
            "listen_addresses": "127.0.0.1",
            "queue.webhook_allow": f"http://127.0.0.1:{RECEIVER_PORT}",
            "shared_buffers": "64MB",
            "logging_collector": "on",
            "log_directory": str(self.dir / "pglog"),
            "log_filename": "postgresql.log",
            "log_line_prefix": "%m [%p] %b %d ",
        }
        config = {
            "scope": "queue-ha",
            "name": self.name,
            "log": {"dir": str(self.dir / "log"), "level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{self.api_port}",
                "connect_address": f"127.0.0.1:{self.api_port}",
            },
            "raft": {
                "data_dir": str(self.dir / "raft"),
                "self_addr": f"127.0.0.1:{self.raft_port}",
                "partner_addrs": others,
            },
            "bootstrap": {
                "dcs": {
                    "ttl": 20,
                    "loop_wait": 2,
                    "retry_timeout": 5,
                    "synchronous_mode": True,
                    "postgresql": {"use_pg_rewind": True, "use_slots": True},
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}",
                "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": str(self.data_dir),
                "bin_dir": bin_dir,
                "pgpass": str(self.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                },
                "parameters": parameters,
                "pg_hba": [
                    "local all all trust",
                    "local replication all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
        }
        for d in ("log", "raft", "pglog"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        # JSON is YAML: Patroni reads it as its configuration file
        self.config.write_text(json.dumps(config, indent=2) + "\n")

    def start(self, python, env):
        out = open(self.dir / "patroni.out", "ab")
        self.proc = subprocess.Popen(
            [python, "-m", "patroni", str(self.config)],
            cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, **as_postgres(),
        )
        out.close()
        POPEN_PIDS.add(self.proc.pid)
        log(f"{self.name}: Patroni pid {self.proc.pid} (PostgreSQL on {self.pg_port}, REST API on {self.api_port})")

    def postmaster_pid(self):
        """The postmaster's pid from postmaster.pid, when it is a live
        postmaster of this data directory."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if alive(pid) and str(self.data_dir) in cmdline(pid) else None

    def kill_hard(self):
        """SIGKILL of Patroni and of the postmaster, nothing else. Returns
        when the postmaster was killed (time.monotonic())."""
        postmaster = self.postmaster_pid()
        assert postmaster, f"{self.name}: no postmaster found in {self.data_dir}/postmaster.pid"
        children = children_of(postmaster)
        os.kill(self.proc.pid, signal.SIGKILL)
        os.kill(postmaster, signal.SIGKILL)
        killed_at = time.monotonic()
        self.proc.wait()
        self.killed_postmaster = (postmaster, children)
        log(f"{self.name}: killed Patroni {self.proc.pid} and postmaster {postmaster} (SIGKILL) at "
            f"{time.strftime('%H:%M:%S', time.gmtime())} UTC")
        return killed_at

    def stop(self):
        """Stops this node's Patroni and its postmaster (immediate shutdown),
        and whatever is left of a postmaster killed before."""
        pids = []
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        postmaster = self.postmaster_pid()
        if postmaster:
            send(postmaster, signal.SIGQUIT)
            pids.append(postmaster)
        if self.killed_postmaster:
            # (its children exit by themselves once they see it gone)
            for pid in self.killed_postmaster[1]:
                if alive(pid) and cmdline(pid).startswith("postgres: "):
                    send(pid, signal.SIGKILL)
        until = time.monotonic() + 30
        while any(alive(p) for p in pids) and time.monotonic() < until:
            time.sleep(0.1)
        for pid in pids:
            if alive(pid):
                send(pid, signal.SIGKILL)

    def dsn(self, dbname="app"):
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={dbname} connect_timeout=10"

    def connect(self, dbname="app"):
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def tail_logs(self, lines=40):
        for path in [self.dir / "patroni.out", self.dir / "log" / "patroni.log", self.dir / "pglog" / "postgresql.log"]:
            print(f"----- {self.name}: {path} (last {lines} lines)")
            try:
                print("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
            except OSError as e:
                print(f"({e})")


def cluster_view(nodes):
    """The members as the REST API of the first node that answers sees them."""
    for node in nodes:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{node.api_port}/cluster", timeout=5) as r:
                return {m["name"]: m for m in json.load(r)["members"]}
        except OSError:
            continue
    return {}


def describe(members):
    return ", ".join(f"{n} {m.get('role')}/{m.get('state')}" for n, m in sorted(members.items())) or "none"


def one(conn, sql, params=None):
    return conn.execute(sql, params).fetchone()[0]


def queue_processes(conn):
    return one(conn, "SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('queue launcher', 'queue worker')")


# --- the webhook receiver --------------------------------------------------


class Receiver:
    """Answers every POST with 204, recording the body's `id`, the
    `webhook-id` header, when it came and when its connection was accepted
    (time.monotonic())."""

    def __init__(self):
        self.seen = []  # (id, webhook-id, when, accepted)
        lock = threading.Lock()
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                self.accepted = time.monotonic()
                super().setup()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    seen.append((json.loads(body)["id"], self.headers.get("webhook-id"), time.monotonic(), self.accepted))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # (a connection of the killed server's worker, reset)
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", RECEIVER_PORT), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# --- the test --------------------------------------------------------------


def failover(tmp, nodes, python, env):
    receiver = Receiver()
    try:
        run(tmp, nodes, python, env, receiver)
    finally:
        receiver.close()


def run(tmp, nodes, python, env, receiver):
    for node in nodes:
        node.start(python, env)

    def healthy():
        members = cluster_view(nodes)
        roles = sorted(m.get("role") for m in members.values())
        streaming = [m for m in members.values() if m.get("role") != "leader" and m.get("state") == "streaming"]
        leader = [m for m in members.values() if m.get("role") == "leader" and m.get("state") == "running"]
        if roles == ["leader", "replica", "sync_standby"] and len(streaming) == 2 and leader:
            return members
        return None

    members = eventually("a leader and two streaming replicas, one synchronous", healthy)
    log(f"cluster: {describe(members)}")
    leader = next(n for n in nodes if members[n.name]["role"] == "leader")

    # every server runs the copy of the library, not the installed file
    for node in nodes:
        pid = node.postmaster_pid()
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert f"{tmp}/lib/queue.so" in maps, f"{node.name} (postmaster {pid}) has not loaded {tmp}/lib/queue.so"
        assert f"{pg_config('--pkglibdir')}/queue.so" not in maps, f"{node.name} loaded the installed queue.so"

    with psycopg.connect(leader.dsn("postgres"), autocommit=True) as admin:
        admin.execute("CREATE DATABASE app")
    with leader.connect() as admin:
        admin.execute("CREATE EXTENSION queue")
        admin.execute("CREATE TABLE effects (job_id bigint)")  # no unique key: a repeat would show
        admin.execute(
            "CREATE FUNCTION record_effect(job jsonb) RETURNS void LANGUAGE sql"
            " AS $$ INSERT INTO effects VALUES ((job->>'id')::bigint) $$"
        )
        admin.execute("SELECT queue_create('ha.sql', retention => '1 day')")
        admin.execute("SELECT queue_register_sender('ha.sql', 'record_effect(jsonb)', batch_size => 20)")
        admin.execute("SELECT queue_create('ha.hook', retention => '1 day')")
        admin.execute(
            "SELECT queue_register_webhook('ha.hook', %s, max_in_flight => %s)",
            (f"http://127.0.0.1:{RECEIVER_PORT}/hook", IN_FLIGHT),
        )
        admin.execute("SELECT queue_create('ha.pull', retention => '1 day')")

    # the load: 8 enqueuers, 2 pull consumers holding their leases
    acked, held = [], []  # (queue, id); (id, lease)
    lock = threading.Lock()
    tried = [0]
    stop, killed = threading.Event(), threading.Event()
    errors = []

    def enqueuer(n):
        try:
            conn = leader.connect()
        except Exception as e:  # noqa: BLE001
            errors.append(f"enqueuer {n} could not connect: {e}")
            return
        turn = n
        with conn:
            while True:
                with lock:
                    if tried[0] >= TOTAL_JOBS:
                        return
                    tried[0] += 1
                queue = QUEUES[turn % 3]
                turn += 1
                try:
                    job = one(conn, "SELECT queue_enqueue(%s, '{}')", (queue,))
                except Exception as e:  # noqa: BLE001 (the leader is gone)
                    if not killed.is_set():
                        errors.append(f"enqueuer {n}: {e}")
                    return
                with lock:
                    acked.append((queue, job))

    def puller(n):
        try:
            conn = leader.connect()
        except Exception as e:  # noqa: BLE001
            errors.append(f"puller {n} could not connect: {e}")
            return
        with conn:
            while not stop.is_set():
                try:
                    rows = conn.execute("SELECT id, lease FROM queue_claim('ha.pull', 'puller', 5, '1 hour')").fetchall()
                except Exception as e:  # noqa: BLE001 (the leader is gone)
                    if not killed.is_set():
                        errors.append(f"puller {n}: {e}")
                    return
                with lock:
                    held.extend((job, str(lease)) for job, lease in rows)
                time.sleep(0.005)

    threads = [threading.Thread(target=enqueuer, args=(n,)) for n in range(8)]
    threads += [threading.Thread(target=puller, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    eventually(f"{KILL_AFTER:,} enqueues acknowledged", lambda: len(acked) >= KILL_AFTER or errors, interval=0.01)
    assert not errors, errors
    killed.set()
    killed_at = leader.kill_hard()
    stop.set()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive(), "a load thread did not stop after the leader was killed"
    acked, held = list(acked), list(held)
    log(f"{len(acked):,} enqueues acknowledged, {len(held)} leases held by the pull consumers")
    assert held, "the pull consumers held leases"

    survivors = [n for n in nodes if n is not leader]

    def promoted():
        members = cluster_view(survivors)
        for node in survivors:
            m = members.get(node.name, {})
            if m.get("role") == "leader" and m.get("state") == "running":
                return node
        return None

    new_leader = eventually("Patroni to promote a new leader", promoted)
    promoted_at = time.monotonic()
    new = new_leader.connect()
    eventually("the new leader to leave recovery", lambda: not one(new, "SELECT pg_is_in_recovery()"))
    log(f"new leader: {new_leader.name} ({describe(cluster_view(survivors))})")

    # the held leases complete on the new leader; the rest of ha.pull drains
    for job, lease in held:
        assert one(new, "SELECT queue_complete(%s, %s::uuid)", (job, lease)), (
            f"the lease of job {job}, claimed on the old leader, completes"
        )
    while new.execute("SELECT queue_complete(id, lease) FROM queue_claim('ha.pull', 'after', 100)").fetchall():
        pass
    eventually(
        "the new leader to deliver every pushed job",
        lambda: one(new, "SELECT count(*) FROM queue_jobs WHERE queue IN ('ha.sql', 'ha.hook') AND status <> 'succeeded'") == 0,
    )

    # every acknowledged job is there; every pulled one succeeded but those
    # whose claim committed as the leader died, before its answer reached
    # the consumer (still leased)
    jobs = {job: (queue, status) for job, queue, status in new.execute("SELECT id, queue, status FROM queue_jobs")}
    for queue, job in acked:
        found = jobs.get(job, (None,))[0]
        assert found == queue, f"acknowledged job {job} of {queue}: found {found}"
    unanswered = [(job, q, s) for job, (q, s) in jobs.items() if s != "succeeded"]
    assert len(unanswered) <= 10 and all(q == "ha.pull" and s == "processing" for _, q, s in unanswered), unanswered

    # each SQL sender's effect once, for every ha.sql job
    effects = dict(new.execute("SELECT job_id, count(*) FROM effects GROUP BY job_id").fetchall())
    sql_jobs = {job for job, (q, _) in jobs.items() if q == "ha.sql"}
    assert set(effects) == sql_jobs, (
        f"effects of jobs not in ha.sql: {sorted(set(effects) - sql_jobs)[:20]}, "
        f"ha.sql jobs without an effect: {sorted(sql_jobs - set(effects))[:20]}"
    )
    repeated_effects = {job: n for job, n in effects.items() if n != 1}
    assert not repeated_effects, f"effects repeated: {repeated_effects}"

    # the receiver saw every webhook job; repeats only of jobs in flight,
    # each job under one webhook-id
    # (times in seconds after the kill; `old` marks a request that came
    # after the kill on a connection accepted before it: one of the killed
    # leader's processes sent it, after its postmaster was gone)
    posts, times = defaultdict(list), defaultdict(list)
    orphaned = 0
    for job, webhook_id, when, accepted in list(receiver.seen):
        old = when > killed_at and accepted < killed_at
        orphaned += old
        posts[job].append(webhook_id)
        times[job].append(f"{when - killed_at:+.3f}" + (" old" if old else ""))
    hook_jobs = {job for job, (q, _) in jobs.items() if q == "ha.hook"}
    strays = sorted(set(posts) - hook_jobs)
    assert set(posts) == hook_jobs, (
        f"posted but not ha.hook jobs (when): "
        + ", ".join(f"{job} ({', '.join(times[job])})" for job in strays[:20])
        + f"; ha.hook jobs never posted: {sorted(hook_jobs - set(posts))[:20]}"
    )
    repeated = sum(1 for ids in posts.values() if len(ids) > 1)
    assert repeated <= IN_FLIGHT, (
        f"{repeated} jobs posted again, more than the {IN_FLIGHT} that can be in flight; {orphaned} requests came "
        f"from the old leader after its postmaster was killed (the new leader was found running "
        f"{promoted_at - killed_at:.1f} s after the kill); each repeated job's requests (when): "
        + "; ".join(f"{job}: " + ", ".join(times[job]) for job in sorted(times) if len(times[job]) > 1)
    )
    for job, ids in posts.items():
        assert all(i == ids[0] for i in ids), f"job {job} under {ids}"
    log(f"{len(sql_jobs)} ha.sql effects once each; {len(hook_jobs)} ha.hook jobs posted, {repeated} of them again; "
        f"{orphaned} requests from the old leader after the kill")

    # queue_stats exact
    for queue in QUEUES:
        count = Counter(s for q, s in jobs.values() if q == queue)
        row = new.execute("SELECT enqueued_total, succeeded_total FROM queue_stats WHERE queue = %s", (queue,)).fetchone()
        assert tuple(row) == (sum(count.values()), count["succeeded"]), (
            f"{queue}: queue_stats says enqueued_total, succeeded_total = {tuple(row)}, queue_jobs has "
            f"{sum(count.values())} jobs, {count['succeeded']} succeeded"
        )

    # the killed node rejoins as a replica and runs no queue process
    leader.start(python, env)

    def rejoined():
        m = cluster_view(survivors + [leader]).get(leader.name, {})
        return m.get("role") in ("replica", "sync_standby") and m.get("state") == "streaming"

    eventually(f"{leader.name} to rejoin as a streaming replica", rejoined)
    log(f"{leader.name} rejoined: {describe(cluster_view(nodes))}")
    with leader.connect() as old:
        assert one(old, "SELECT pg_is_in_recovery()"), f"{leader.name} is in recovery"
        until = time.monotonic() + 3
        while time.monotonic() < until:
            assert queue_processes(old) == 0, f"{leader.name}, now a replica, runs a queue process"
            time.sleep(0.1)
    new.close()


def main():
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            print("run as root, this needs the OS user postgres to run PostgreSQL as", file=sys.stderr)
            return 2
    busy = [p for p in PG_PORTS + API_PORTS + RAFT_PORTS + [RECEIVER_PORT] if not port_free(p)]
    if busy:
        print(f"ports in use on 127.0.0.1: {busy} (another make test-ha?)", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1

    bin_dir, pkglibdir = pg_config("--bindir"), pg_config("--pkglibdir")
    tmp = tempfile.mkdtemp(prefix="queue-ha-")
    os.chmod(tmp, 0o755)
    # a copy of the library that no reinstall can overwrite under the servers
    Path(tmp, "lib").mkdir()
    shutil.copy2(f"{pkglibdir}/queue.so", f"{tmp}/lib/queue.so")
    nodes = [Node(n, tmp) for n in range(3)]
    for node in nodes:
        node.write_config(tmp, bin_dir)
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": tmp,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    chown_tree(tmp)
    log(f"directory {tmp}, PostgreSQL from {bin_dir}")

    passed = False
    try:
        python, extra = python_for_patroni(tmp, env)
        env.update(extra)
        become_subreaper()
        failover(tmp, nodes, python, env)
        passed = True
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        for node in nodes:
            node.tail_logs()
    finally:
        for node in nodes:
            try:
                node.stop()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
    log(f"done in {time.monotonic() - T0:.0f} s")
    if passed:
        shutil.rmtree(tmp, ignore_errors=True)
        print("1 passed, 0 failed")
        return 0
    print(f"(kept {tmp})")
    print("0 passed, 1 failed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
