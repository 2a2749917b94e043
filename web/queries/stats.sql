-- Every queue of this database: its counts and cumulative counters, from
-- queue_stats (finished jobs come from counters there, not a count(*)).
-- (blocked, jobs waiting for their parents, is 0.4's: read by name, so
-- that a database on an older version is shown too)
SELECT queue, paused, sender, pending, scheduled, processing, succeeded, failed, cancelled,
       EXTRACT(epoch FROM oldest_due_age)::float8 AS oldest_due_secs,
       enqueued_total, succeeded_total, failed_total,
       coalesce((pg_catalog.to_jsonb(s) ->> 'blocked')::bigint, 0) AS blocked
  FROM queue_stats s
 ORDER BY queue
