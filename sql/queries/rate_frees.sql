-- When the first claim of queue $1 in a window that ends after $2 leaves
-- it: of the queue as a whole (group NULL), or of group $3. (Each window's
-- oldest claim still in it, read from the window's start by index.)
SELECT least((SELECT c.claimed_at FROM queue_claims c
               WHERE c.queue_id = $1 AND c.group_key IS NULL
                 AND c.claimed_at > $2 - q.rate_window
               ORDER BY c.claimed_at LIMIT 1) + q.rate_window,
             (SELECT c.claimed_at FROM queue_claims c
               WHERE c.queue_id = $1 AND c.group_key = $3
                 AND c.claimed_at > $2 - q.group_rate_window
               ORDER BY c.claimed_at LIMIT 1) + q.group_rate_window) AS at
  FROM queue_queues q
 WHERE q.id = $1
