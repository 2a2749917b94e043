-- When queue_cleanup() next has a job to remove: the earliest moment a
-- succeeded or cancelled job passes its queue's retention (one index probe
-- per queue). NULL: no such job. A worker leaving its database records it,
-- so that a database nobody uses is visited for its cleanup only then.
SELECT min(d.finished_at + queue_kept_for(q.retention)) AS at
  FROM queue_queues q
 CROSS JOIN LATERAL (SELECT finished_at FROM queue_done
                      WHERE queue_id = q.id ORDER BY finished_at LIMIT 1) d
