SELECT id FROM queue_live WHERE queue_id = $1 AND dedup_key = $2 LIMIT 1
