-- Jobs $1, locked for a delivery in one transaction (lock_set.sql) and
-- delivered, end with status $3 ('succeeded') at $2: as finish.sql, but
-- their claim was never written, so the attempt they were delivered in
-- and the worker $4 that delivered them are written here. Ends with
-- into_history.sql.
WITH gone AS (
    DELETE FROM queue_live WHERE id = ANY ($1)
    RETURNING queue_id, priority, attempts + 1 AS attempts, id, run_at, enqueued_at,
              $4::text AS worker, dedup_key, last_error, headers, payload, uid, group_key
),
