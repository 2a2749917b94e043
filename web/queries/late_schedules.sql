-- The schedules whose next tick is more than $1 seconds past and has not
-- fired: no worker serves the database (the preload is off, no slot is
-- free, queue.enabled is off). A paused schedule is not late.
SELECT name, queue, date_trunc('second', next_run_at)::text AS next_run_at,
       EXTRACT(epoch FROM now() - next_run_at)::float8 AS late_secs, catch_up
  FROM queue_schedules
 WHERE NOT paused
   AND next_run_at < now() - make_interval(secs => $1::float8)
 ORDER BY next_run_at
 LIMIT 20
