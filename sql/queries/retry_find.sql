-- The queue and dedup key of job $1 if it is failed or cancelled, and
-- whether a sender delivers its queue.
SELECT j.queue_id, j.dedup_key, q.sender IS NOT NULL AS has_sender
  FROM (SELECT queue_id, dedup_key FROM queue_dead WHERE id = $1
        UNION ALL
        SELECT queue_id, dedup_key FROM queue_done WHERE id = $1 AND status = 'cancelled') j
  LEFT JOIN queue_queues q ON q.id = j.queue_id
