-- The queue, dedup key and group of job $1 if it is failed or cancelled,
-- whether a sender delivers its queue, and whether the queue is ordered.
SELECT j.queue_id, j.dedup_key, j.group_key, q.sender IS NOT NULL AS has_sender, q.ordered
  FROM (SELECT queue_id, dedup_key, group_key FROM queue_dead WHERE id = $1
        UNION ALL
        SELECT queue_id, dedup_key, group_key FROM queue_done
         WHERE id = $1 AND status = 'cancelled') j
  LEFT JOIN queue_queues q ON q.id = j.queue_id
