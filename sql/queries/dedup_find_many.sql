-- The unfinished jobs of queue $1 that hold one of the dedup keys $2.
SELECT DISTINCT ON (dedup_key) dedup_key, id
  FROM queue_live
 WHERE queue_id = $1 AND dedup_key = ANY ($2)
 ORDER BY dedup_key, id
