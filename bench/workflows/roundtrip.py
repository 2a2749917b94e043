"""Item a of bench/workflows.sh: the round trip of a request that needs a
job's result, on an idle system, one request at a time.

    python3 roundtrip.py CONNINFO client SIDES N   N round trips per side
                                                   (SIDES: a comma-separated
                                                   list), the sides taking turns
                                                   trip by trip, after 10 not
                                                   counted; prints "side ms" a
                                                   line each
    python3 roundtrip.py CONNINFO consumer KIND    a consumer, until SIGTERM

Sides (the client's part; each side has a connection of its own, in
autocommit, as docs/pull.md's request handlers have):
  await         CALL queue_await(queue_enqueue('rt', ...), ...): one statement,
                whose CALL commits the enqueue before it waits (docs/pull.md);
                the `wait` consumer completes the job
  await-sender  the same on 'rts', whose jobs the background worker delivers
                to a SQL sender declared RETURNS jsonb (no consumer)
  notify        by hand: INSERT into a plain table and pg_notify('rt_jobs') in
                one statement; waits on LISTEN rt_reply for the notification
                that carries its id and result, sent by the `notify` consumer
  poll          enqueues into 'rt' as `await` does, then reads queue_job(id)
                every 10 ms until the job has ended (the `wait` consumer)
  poll-sender   the same on 'rts' (the worker and its sender)

Consumers (equal work: woken without polling, then one statement, one
transaction, that takes the job, keeps its result and wakes the client):
  wait     loops CALL queue_wait('rt', '1 second', NULL), then
           SELECT queue_complete(id, lease, result) FROM queue_claim('rt', ...)
           until the claim takes nothing (the result is kept with the job,
           and the completion's commit wakes the awaiting client)
  notify   LISTEN rt_jobs; on a notification (or after a second without one),
           DELETE the oldest job (FOR UPDATE SKIP LOCKED), INSERT its result
           into rt_results and pg_notify('rt_reply', its id and result), in
           one statement, until none is left
"""

import json
import signal
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

PAYLOAD = {"to": "ada@example.com", "template": "welcome", "n": 1}
RESULT = {"status": "sent", "message_id": "<42@mail.example.com>"}
WARMUP = 10


class Side:
    """One side's client: its own connection, in autocommit."""

    def __init__(self, conninfo, side):
        self.side = side
        self.conn = psycopg.connect(conninfo, autocommit=True)
        if side == "notify":
            self.conn.execute("LISTEN rt_reply")
        elif side not in ("await", "await-sender", "poll", "poll-sender"):
            raise SystemExit(f"unknown side {side}")

    def trip(self):
        """One round trip; its milliseconds."""
        conn, side = self.conn, self.side
        t0 = time.perf_counter()
        if side in ("await", "await-sender"):
            queue = "rt" if side == "await" else "rts"
            job = "the one enqueued"
            status, result = conn.execute(
                "CALL queue_await(queue_enqueue(%s, %s), '10 seconds', NULL, NULL)",
                (queue, Jsonb(PAYLOAD))).fetchone()
        elif side in ("poll", "poll-sender"):
            queue = "rt" if side == "poll" else "rts"
            (job,) = conn.execute("SELECT queue_enqueue(%s, %s)", (queue, Jsonb(PAYLOAD))).fetchone()
            deadline = t0 + 10
            while True:
                status, result = conn.execute(
                    "SELECT status, result FROM queue_job(%s)", (job,)).fetchone()
                if status in ("succeeded", "failed", "cancelled") or time.perf_counter() > deadline:
                    break
                time.sleep(0.010)
        else:
            (job,) = conn.execute(
                "WITH j AS (INSERT INTO rt_jobs (payload) VALUES (%s) RETURNING id)"
                " SELECT id FROM j, pg_notify('rt_jobs', '')", (Jsonb(PAYLOAD),)).fetchone()
            status = result = None
            for note in conn.notifies(timeout=10):
                reply = json.loads(note.payload)
                if reply["id"] == job:
                    status, result = "succeeded", reply["result"]
                    break
        ms = (time.perf_counter() - t0) * 1000
        if status != "succeeded" or result != RESULT:
            raise SystemExit(f"{side}: job {job} ended {status} with {result!r}")
        return ms


def client(conninfo, sides, n):
    """n round trips per side, the sides taking turns trip by trip (so that
    the load of a shared machine falls on all of them alike); prints
    "side ms" a line each, after WARMUP trips per side not counted."""
    clients = [Side(conninfo, side) for side in sides.split(",")]
    for i in range(WARMUP + n):
        for c in clients:
            ms = c.trip()
            if i >= WARMUP:
                print(f"{c.side} {ms:.3f}")


def consumer(conninfo, kind):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if kind == "wait":
            while not stop:
                conn.execute("CALL queue_wait('rt', '1 second', NULL)")
                while conn.execute(
                        "SELECT queue_complete(id, lease, %s) FROM queue_claim('rt', 'bench', 1)",
                        (Jsonb(RESULT),)).fetchone():
                    pass
        elif kind == "notify":
            conn.execute("LISTEN rt_jobs")
            take = ("WITH j AS (DELETE FROM rt_jobs WHERE id = (SELECT id FROM rt_jobs ORDER BY id"
                    "                  LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id),"
                    "     r AS (INSERT INTO rt_results (id, result) SELECT id, %s FROM j RETURNING id, result)"
                    " SELECT pg_notify('rt_reply', json_build_object('id', id, 'result', result)::text)"
                    " FROM r")
            while not stop:
                # (woken by a notification, or a second without one: a look
                # anyway, as a by-hand consumer must after a missed one)
                for _ in conn.notifies(timeout=1, stop_after=1):
                    pass
                while conn.execute(take, (Jsonb(RESULT),)).fetchone():
                    pass
        else:
            raise SystemExit(f"unknown consumer {kind}")


if __name__ == "__main__":
    conninfo, role, what = sys.argv[1:4]
    if role == "client":
        client(conninfo, what, int(sys.argv[4]))
    else:
        try:
            consumer(conninfo, what)
        except psycopg.OperationalError:
            pass  # the cluster going away at the end of a run
