-- A queue's groups with unfinished jobs, the 50 first by key.
SELECT group_key, pending, processing,
       EXTRACT(epoch FROM oldest_due_age)::float8 AS oldest_due_secs, head_id
  FROM queue_groups($1)
 ORDER BY group_key
 LIMIT 50
