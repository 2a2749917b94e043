-- The edges from parents $1, which ended as $2 says ('succeeded', 'failed'
-- or 'cancelled'), that their ends count for their children: every edge of
-- a parent that succeeded, and of one that did not to a child that runs
-- anyway (cancels false). Deleted (each counted once: a concurrent resume
-- of the child, which locks its edges, waits for this, and this for it);
-- one row per edge, its child.
-- (parent = ANY: the edges are found through their index whatever plan the
-- statement has; a join alone was planned as a scan of every edge)
DELETE FROM queue_edges e
 USING unnest($1::bigint[], $2::text[]) AS p(id, outcome)
 WHERE e.parent = ANY ($1) AND e.parent = p.id AND (p.outcome = 'succeeded' OR NOT e.cancels)
RETURNING e.child
