-- Completes the jobs among the pairs (ids $1, leases $2) that are in flight
-- with that very lease: they end `succeeded` at $3, kept for their queue's
-- retention. Returns their ids. One statement: the DELETE locks each job
-- (waiting for a cancel that holds one, and then skipping it).
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $2::uuid[]) AS p(id, lease)
     -- Paired up (an `= ANY` on both arrays would compare every row with
     -- every lease). Only jobs in flight hold a lease (a CHECK says so): a
     -- `state` condition here would only tempt the planner to AND in the
     -- index of every job in flight, for each pair.
     WHERE l.id = p.id AND l.lease = p.lease
    RETURNING l.*
), done AS (
    INSERT INTO queue_done (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                            finished_at, expires_at, status, worker, dedup_key, last_error,
                            headers, payload)
    SELECT queue_done_slot(e.expires), g.queue_id, g.priority, g.attempts, g.id, g.run_at,
           g.enqueued_at, $3, e.expires, 'succeeded', g.worker, g.dedup_key, g.last_error,
           g.headers, g.payload
      FROM gone g
      JOIN queue_queues q ON q.id = g.queue_id
     CROSS JOIN LATERAL (SELECT $3 + least(q.retention, interval '1000 years') AS expires) e
    RETURNING id, queue_id, slot
), tally AS (
    INSERT INTO queue_tallies (queue_id, slot, succeeded_total, succeeded)
    SELECT queue_id, slot, count(*), count(*) FROM done GROUP BY queue_id, slot
)
SELECT id FROM done
