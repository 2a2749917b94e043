-- The front of queue $1's claim order, for ordered_heads.sql, found once
-- (the index entries of the jobs ended since vacuum last ran lie before it,
-- and each look from the start of the index steps over them): its first
-- ready job that is its group's head (no job of its group in flight, no
-- older one unfinished), among its first 16 × $2 ready jobs (256 at least);
-- else its first ready job. A group whose head runs long falls behind the
-- others' turns, and its waiting jobs then lie at the front: looking from
-- them, the three turns ordered_heads.sql reads would hold nothing to take,
-- and every claim would find the heads group by group (group_firsts.sql), a
-- probe per group. Every job passed over here must wait. The bound keeps
-- the cost of a front made only of such jobs (every head in flight) to a
-- probe or two per row read (docs/groups.md has the figures).
-- Then the claim (claim_heads.sql) or the lock for a delivery in one
-- transaction (lock_set.sql) selects from the heads.
           WITH front AS MATERIALIZED (
               (SELECT c.priority, c.turn, c.run_at, c.id
                  FROM (SELECT f.priority, f.turn, f.run_at, f.id, f.group_key FROM queue_live f
                         WHERE f.queue_id = $1 AND f.state = 'ready'
                         ORDER BY f.priority DESC, f.turn, f.run_at, f.id
                         LIMIT greatest(16 * $2, 256)) c
                 WHERE c.group_key IS NULL
                    OR (NOT EXISTS (SELECT FROM queue_live o
                                     WHERE o.queue_id = $1 AND o.group_key = c.group_key
                                       AND o.state = 'processing' AND o.group_counted
                                    -- (row by row: else the planner may hash
                                    -- every job of the queue in flight, at
                                    -- each claim, for what is mostly one probe)
                                    OFFSET 0)
                        AND NOT EXISTS (SELECT FROM queue_live o
                                         WHERE o.queue_id = $1 AND o.group_key = c.group_key
                                           AND o.state <> 'processing' AND o.id < c.id
                                        OFFSET 0))
                 ORDER BY c.priority DESC, c.turn, c.run_at, c.id
                 LIMIT 1)
               UNION ALL
               (SELECT f.priority, f.turn, f.run_at, f.id FROM queue_live f
                 WHERE f.queue_id = $1 AND f.state = 'ready'
                 ORDER BY f.priority DESC, f.turn, f.run_at, f.id
                 LIMIT 1)
               LIMIT 1)
