-- Every queue of this database: its counts and cumulative counters, from
-- queue_stats (finished jobs come from counters there, not a count(*)).
SELECT queue, paused, sender, pending, scheduled, processing, succeeded, failed, cancelled,
       EXTRACT(epoch FROM oldest_due_age)::float8 AS oldest_due_secs,
       enqueued_total, succeeded_total, failed_total
  FROM queue_stats
 ORDER BY queue
