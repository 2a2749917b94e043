-- This database's latency histograms (queue_latency, 0.4; pg_monitor and
-- the owner): each queue's wait (outcome NULL) and its run by outcome,
-- bounds in seconds (the last Infinity), counts cumulative. Read from
-- shared memory: it costs the same whatever the backlog.
SELECT queue, kind, outcome, le, counts, sum_seconds, count
  FROM queue_latency
 ORDER BY queue, kind, outcome
