-- Schedule $1 if a tick of it is still due at $2, locked for the firing
-- transaction; no row: fired, changed or locked by someone else meanwhile
-- (a replacement, another worker), left for a later round.
SELECT s.queue_id, s.cron, s.time_zone, s.catch_up, s.no_overlap, s.next_run_at,
       s.missed_before, s.last_job_id, s.group_key, q.ordered
  FROM queue_recurring s JOIN queue_queues q ON q.id = s.queue_id
 WHERE s.name = $1 AND NOT s.paused AND s.next_run_at <= $2
   FOR UPDATE OF s SKIP LOCKED
