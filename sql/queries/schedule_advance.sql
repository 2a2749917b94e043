-- Schedule $1 after a firing (or a run outside the ticks): its next tick
-- $2, the last tick run $3 and its job $4 (NULL: unchanged), $5 more runs,
-- $6 more skipped ticks.
UPDATE queue_recurring
   SET next_run_at = $2,
       last_run_at = coalesce($3, last_run_at),
       last_job_id = coalesce($4, last_job_id),
       runs_total = runs_total + $5,
       skipped_total = skipped_total + $6
 WHERE name = $1
