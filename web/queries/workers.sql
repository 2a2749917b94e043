-- The cluster's background workers (every database sees all of them), and
-- the databases waiting for a worker slot (pid NULL).
SELECT pid, database, state,
       date_trunc('second', started_at)::text AS started_at,
       date_trunc('second', last_active_at)::text AS last_active_at,
       jobs_delivered, jobs_failed, last_error
  FROM queue_workers
 ORDER BY pid IS NULL, database, pid
