-- The schedules that enqueue into a queue.
SELECT name, cron, time_zone, paused, catch_up, no_overlap,
       date_trunc('second', next_run_at)::text AS next_run_at,
       date_trunc('second', last_run_at)::text AS last_run_at,
       last_job_id, runs_total, skipped_total, owner::text AS owner
  FROM queue_schedules
 WHERE queue = $1
 ORDER BY name
