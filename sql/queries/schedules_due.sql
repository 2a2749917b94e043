-- The schedules with a tick due at $1 (the firing locks each in turn,
-- after its queue: schedule_due_lock.sql).
SELECT name, queue_id
  FROM queue_recurring
 WHERE NOT paused AND next_run_at <= $1
 ORDER BY next_run_at
 LIMIT 100
