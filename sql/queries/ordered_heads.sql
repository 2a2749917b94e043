-- (ordered_front.sql) The first $2 ready jobs in claim order that are
-- their group's oldest unfinished job, of a group with no job in flight (a
-- dead letter retried while a later job of its group is in flight waits
-- for it): an ordered queue without limits that count (docs/groups.md).
-- Only a group's head qualifies, one row per group, and FOR UPDATE SKIP
-- LOCKED hands each to one claimer. (A head locked by a worker's batch in
-- one transaction is still 'ready': the later jobs of its group wait for
-- it all the same.)
--
-- It looks only at the front's priority and turn and the two turns after
-- it, so that the jobs waiting behind heads in flight (a busy group's
-- next 100,000, say) are never probed one by one. That holds every group
-- that is served turn by turn; when it comes back short, the claim finds
-- the heads group by group (group_firsts.sql). The scan starts at the
-- front itself, past the entries of the jobs ended since vacuum.
--
-- A job at the front's turn itself that is turn_safe (schema.sql) is its
-- group's head without the probe of its group's older jobs, when no ready
-- job of the queue has a lower priority than the front's and none waits as
-- 'scheduled' (two probes for the whole statement): each older unfinished
-- job of its group has a smaller turn, so it is in flight (the second
-- probe, kept), or scheduled, or ready before the front: then it was passed
-- over (ordered_front.sql), for a job of its group in flight or an older
-- one unfinished, which is in turn in flight, scheduled or passed over.
             FROM queue_live r
            WHERE r.queue_id = $1 AND r.state = 'ready'
              AND r.priority = (SELECT priority FROM front)
              AND (r.turn, r.run_at, r.id) >= (SELECT turn, run_at, id FROM front)
              AND r.turn <= (SELECT turn + 2 FROM front)
              AND (r.group_key IS NULL
                   OR (((r.turn_safe
                         AND r.turn = (SELECT turn FROM front)
                         AND r.priority = (SELECT f.priority FROM queue_live f
                                            WHERE f.queue_id = $1 AND f.state = 'ready'
                                            ORDER BY f.priority
                                            LIMIT 1)
                         AND NOT EXISTS (SELECT FROM queue_live s
                                          WHERE s.queue_id = $1 AND s.state = 'scheduled'))
                        OR NOT EXISTS (SELECT FROM queue_live o
                                        WHERE o.queue_id = $1 AND o.group_key = r.group_key
                                          AND o.state <> 'processing' AND o.id < r.id))
                       -- (a group's jobs in flight: an index of their own)
                       AND NOT EXISTS (SELECT FROM queue_live o
                                        WHERE o.queue_id = $1 AND o.group_key = r.group_key
                                          AND o.state = 'processing' AND o.group_counted)))
            ORDER BY r.priority DESC, r.turn, r.run_at, r.id
            LIMIT $2
            FOR UPDATE OF r SKIP LOCKED
