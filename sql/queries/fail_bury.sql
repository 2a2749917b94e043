-- Job $1 becomes failed at $3 with last_error $2.
WITH gone AS (
    DELETE FROM queue_live WHERE id = $1 AND state = 'processing' RETURNING *
)
INSERT INTO queue_dead (id, queue_id, priority, attempts, run_at, enqueued_at, finished_at,
                        worker, dedup_key, last_error, headers, payload)
SELECT id, queue_id, priority, attempts, run_at, enqueued_at, $3, worker, dedup_key, $2,
       headers, payload
  FROM gone
