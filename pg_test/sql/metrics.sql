\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Latency histograms (queue_latency): the wait of each job claimed, from
-- its due time, and the run of each attempt that ended, from its claim, by
-- outcome; kept by the commits that make them, per queue. (The worker's
-- and other databases': tests/tests/metrics.rs.)
SELECT queue_create('m.lat', max_attempts => 2, retry_delay => '0');
SELECT count(*) FROM queue_enqueue_batch('m.lat', array_fill('{}'::jsonb, ARRAY[3]));
SELECT queue_enqueue('m.lat', '{"late": true}', run_at => now() - interval '10 minutes') > 0 AS late;
-- a claim rolled back, or in a subtransaction rolled back, counts nothing
BEGIN;
SELECT count(*) FROM queue_claim('m.lat', max_jobs => 10);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT count(*) FROM queue_claim('m.lat', max_jobs => 10);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT count(*) FROM queue_latency WHERE queue = 'm.lat';
-- four claimed; a lease says when it was claimed (a version 7 uuid)
CREATE TEMP TABLE claimed AS SELECT * FROM queue_claim('m.lat', max_jobs => 10);
SELECT count(*) AS claimed, bool_and(substr(lease::text, 15, 1) = '7') AS v7 FROM claimed;
SELECT kind, outcome, count, le[array_length(le, 1)] AS last_bound,
       counts[array_length(counts, 1)] = count AS cumulative
  FROM queue_latency WHERE queue = 'm.lat' ORDER BY kind DESC, outcome;
-- the late job waited ten minutes: in the bucket up to 1800 s, not 300 s
SELECT counts[array_position(le, 300)] AS within_300s, counts[array_position(le, 1800)] AS within_1800s,
       sum_seconds >= 600 AS sum_has_it
  FROM queue_latency WHERE queue = 'm.lat' AND kind = 'wait';
-- two succeed (one with a result), one fails and is retried, one is cancelled
SELECT queue_complete(id, lease) FROM claimed WHERE id = (SELECT min(id) FROM claimed);
SELECT queue_complete(id, lease, '{"ok": 1}') FROM claimed
 WHERE id = (SELECT min(id) + 1 FROM claimed);
SELECT queue_fail(id, lease, 'no') FROM claimed WHERE id = (SELECT min(id) + 2 FROM claimed);
SELECT queue_cancel(id) FROM claimed WHERE id = (SELECT max(id) FROM claimed);
SELECT kind, outcome, count, counts[1] <= count AS ordered FROM queue_latency
 WHERE queue = 'm.lat' ORDER BY kind DESC, outcome;
-- the retried job is claimed again (its wait counted from its retry) and
-- fails for good; a completion with a lease no longer held counts nothing
SELECT queue_fail(id, lease, 'again') FROM queue_claim('m.lat');
SELECT queue_complete(id, lease) FROM claimed WHERE id = (SELECT min(id) FROM claimed);
SELECT kind, outcome, count FROM queue_latency WHERE queue = 'm.lat' ORDER BY kind DESC, outcome;
-- the table of slots
SELECT queue_slots, queue_slots_used >= 1 AS used, observations_dropped, spans_exported, spans_dropped
  FROM queue_metrics_status();
-- for monitoring roles
CREATE ROLE m_nobody;
SET ROLE m_nobody;
SELECT count(*) FROM queue_latency;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_lease();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT pg_monitor TO m_nobody;
SET ROLE m_nobody;
SELECT count(*) > 0 AS readable FROM queue_latency;
RESET ROLE;
DROP ROLE m_nobody;

-- Trace context: a job takes its headers' traceparent (and tracestate), or
-- else the transaction's queue.traceparent and queue.tracestate
SELECT queue_create('m.trace');
BEGIN;
SET LOCAL queue.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
SET LOCAL queue.tracestate = 'congo=t61rcWkgMzE';
SELECT queue_enqueue('m.trace', '{"n": 1}') AS traced \gset
SELECT queue_enqueue('m.trace', '{"n": 2}', headers => '{"kind": "mail"}') AS kept \gset
SELECT queue_enqueue('m.trace', '{"n": 3}',
       headers => '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}') AS own \gset
SELECT count(*) FROM queue_enqueue_batch('m.trace', ARRAY['{"n": 4}', '{"n": 5}']::jsonb[]);
COMMIT;
SELECT payload->>'n' AS n, headers FROM queue_jobs WHERE queue = 'm.trace' ORDER BY id;
-- outside the transaction, no trace context
SELECT queue_enqueue('m.trace', '{"n": 6}') AS plain \gset
SELECT headers FROM queue_job(:plain);
-- a sender sees it in job->'headers' (push.md); malformed values: 22023,
-- nothing enqueued
SET queue.traceparent = 'garbage';
\echo :LAST_ERROR_SQLSTATE
SET queue.traceparent = '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01';
\echo :LAST_ERROR_SQLSTATE
SET queue.traceparent = '00-00000000000000000000000000000000-00f067aa0ba902b7-01';
\echo :LAST_ERROR_SQLSTATE
SET queue.tracestate = 'not a state';
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('m.trace', '{}', headers => '{"traceparent": "00-abc-def-01"}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('m.trace', '{}', headers => '{"traceparent": 7}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('m.trace', '{}',
       headers => '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "tracestate": "a b"}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_jobs WHERE queue = 'm.trace';
SHOW queue.traceparent;
