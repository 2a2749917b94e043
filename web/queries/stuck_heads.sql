-- The groups of ordered queues whose head has failed and waits for its
-- retry, or is being tried again: each holds back the jobs behind it
-- (docs/groups.md, "A stuck group"). Asked of the queues $1 only (those
-- with unfinished jobs); queue_groups gives a head in ordered queues only,
-- each looked up by its id.
-- (A retry keeps the last error and sets the attempts to 0: a head run
-- again now is not stuck until it fails again.)
SELECT q.queue, g.group_key, g.pending, g.processing, j.id AS head_id, j.status,
       j.attempts, j.max_attempts,
       EXTRACT(epoch FROM j.run_at - now())::float8 AS due_in_secs,
       left(j.last_error, 300) AS last_error
  FROM unnest($1::text[]) AS q(queue)
 CROSS JOIN LATERAL queue_groups(q.queue) g
  JOIN LATERAL (SELECT * FROM queue_jobs j WHERE j.id = g.head_id LIMIT 1) j ON true
 WHERE j.last_error IS NOT NULL
   AND ((j.status = 'pending' AND j.attempts > 0)
        OR (j.status = 'processing' AND j.attempts > 1))
 ORDER BY q.queue, g.group_key
 LIMIT 50
