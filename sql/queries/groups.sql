-- The groups of queue $1 with unfinished jobs, by key: their pending and
-- processing jobs, how long their oldest due job has waited, and in an
-- ordered queue ($2) the job the group waits on: its job in flight, else
-- its oldest unfinished one.
-- (Jobs in flight are read apart: the group index holds the others.)
SELECT group_key,
       count(*) FILTER (WHERE state <> 'processing') AS pending,
       count(*) FILTER (WHERE state = 'processing') AS processing,
       greatest(now() - min(run_at) FILTER (WHERE state = 'ready'
                                               OR (state = 'scheduled' AND run_at <= now())),
                interval '0') AS oldest_due_age,
       CASE WHEN $2 THEN coalesce(min(id) FILTER (WHERE state = 'processing'), min(id))
       END AS head_id
  FROM (SELECT group_key, state, run_at, id FROM queue_live
         WHERE queue_id = $1 AND group_key IS NOT NULL AND state <> 'processing'
        UNION ALL
        SELECT group_key, state, run_at, id FROM queue_live
         WHERE queue_id = $1 AND group_key IS NOT NULL AND state = 'processing') j
 GROUP BY group_key
 ORDER BY group_key
