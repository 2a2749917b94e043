-- Jobs $1 (one element per parent that ended: a job may come twice) each
-- wait for that many parents fewer; a job that waits for none is due: ready,
-- or scheduled until its run_at. In a statement of its own, after the edges
-- were deleted (settle_edges.sql), so that it sees a child that a resume
-- committed meanwhile. Returns the jobs it changed, whether each was
-- released, and its queue, due time and whether the worker delivers it.
-- Parents that end at once in other transactions update the same row, one
-- after the other: the one that counts the last parent releases the job,
-- exactly once.
UPDATE queue_live l
   SET waiting_for = l.waiting_for - c.n,
       state = CASE WHEN l.waiting_for - c.n > 0 THEN l.state
                    WHEN l.run_at <= $2 THEN 'ready'
                    ELSE 'scheduled' END
  FROM (SELECT child, count(*)::int AS n FROM unnest($1::bigint[]) AS child GROUP BY child) c
 WHERE l.id = c.child AND l.state = 'blocked'
RETURNING l.id, l.state <> 'blocked' AS released, l.queue_id, l.run_at,
          (SELECT q.sender IS NOT NULL FROM queue_queues q WHERE q.id = l.queue_id) AS pushed
