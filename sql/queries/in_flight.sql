-- How many jobs of queue $1 are in flight, and how many of each group $2.
-- (A group NULL: the queue as a whole.)
SELECT NULL::text AS group_key, count(*) AS busy
  FROM queue_live WHERE queue_id = $1 AND state = 'processing'
UNION ALL
SELECT group_key, count(*)
  FROM queue_live
 WHERE queue_id = $1 AND state = 'processing' AND group_counted AND group_key = ANY ($2)
 GROUP BY group_key
