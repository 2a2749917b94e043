-- The jobs among the pairs (ids $1, leases $2) that are in flight with that
-- very lease, locked until the end of the transaction. Joined pair by pair
-- (an `= ANY` on both arrays would compare every row with every lease).
-- Only jobs in flight hold a lease (a CHECK says so): a `state` condition
-- here would only tempt the planner to AND in the index of every job in
-- flight, for each pair.
SELECT l.id
  FROM unnest($1::bigint[], $2::uuid[]) AS p(id, lease)
  JOIN queue_live l ON l.id = p.id AND l.lease = p.lease
   FOR UPDATE OF l
