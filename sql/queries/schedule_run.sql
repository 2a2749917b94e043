-- Schedule $1 ran once outside its ticks at $2, with job $3.
UPDATE queue_recurring
   SET last_run_at = $2, last_job_id = $3, runs_total = runs_total + 1
 WHERE name = $1
