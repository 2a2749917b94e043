-- The queue and dedup key of job $1 if it is failed or cancelled.
SELECT queue_id, dedup_key FROM queue_dead WHERE id = $1
UNION ALL
SELECT queue_id, dedup_key FROM queue_done WHERE id = $1 AND status = 'cancelled'
