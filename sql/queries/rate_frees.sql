-- When the first claim of queue $1 in a window that ends after $2 leaves
-- it: of the queue as a whole (group NULL), or of group $3.
SELECT min(c.claimed_at + CASE WHEN c.group_key IS NULL THEN q.rate_window
                               ELSE q.group_rate_window END) AS at
  FROM queue_claims c JOIN queue_queues q ON q.id = c.queue_id
 WHERE c.queue_id = $1
   AND (c.group_key IS NULL OR c.group_key = $3)
   AND c.claimed_at + CASE WHEN c.group_key IS NULL THEN q.rate_window
                           ELSE q.group_rate_window END > $2
