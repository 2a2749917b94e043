-- How many jobs of queue $1 were claimed in the window that ends now: of
-- the queue as a whole since $2 (group NULL), and of each group $4 since $3.
-- Two branches, each an index range of exactly its window's claims (one
-- condition with OR would read every claim the queue keeps, 10 seconds
-- past its longest window: limits.rs).
SELECT NULL::text AS group_key, coalesce(sum(jobs), 0)::bigint AS used
  FROM queue_claims
 WHERE queue_id = $1 AND group_key IS NULL AND claimed_at > $2
UNION ALL
SELECT group_key, sum(jobs)::bigint
  FROM queue_claims
 WHERE queue_id = $1 AND group_key = ANY ($4) AND claimed_at > $3
 GROUP BY group_key
