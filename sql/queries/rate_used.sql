-- How many jobs of queue $1 were claimed in the window that ends now: of
-- the queue as a whole since $2 (group NULL), and of each group $4 since $3.
SELECT group_key, sum(jobs)::bigint AS used
  FROM queue_claims
 WHERE queue_id = $1
   AND ((group_key IS NULL AND claimed_at > $2) OR (group_key = ANY ($4) AND claimed_at > $3))
 GROUP BY group_key
