-- Completes the jobs among the pairs (ids $1, leases $4) that are in flight
-- with that very lease: they end with status $3 ('succeeded') at $2, kept
-- for their queue's retention with their results $5 (one per id, or NULL
-- for none). Returns their ids. One statement: the DELETE locks each job
-- (waiting for a cancel that holds one, and then skipping it). Ends with
-- into_history.sql.
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $4::uuid[], $5::jsonb[]) AS p(id, lease, result)
     -- Paired up (an `= ANY` on both arrays would compare every row with
     -- every lease). Only jobs in flight hold a lease (a CHECK says so): a
     -- `state` condition here would only tempt the planner to AND in the
     -- index of every job in flight, for each pair.
     WHERE l.id = p.id AND l.lease = p.lease
    RETURNING l.*, p.result, NULL::bigint AS cancelled_by
),
