-- The earliest tick of this database's schedules; NULL: none.
SELECT min(next_run_at) AS at FROM queue_recurring WHERE NOT paused
