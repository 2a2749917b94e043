-- The front of queue $1's claim order: its first ready job, for
-- ordered_heads.sql, found once (the index entries of the jobs ended since
-- vacuum last ran lie before it, and each look from the start of the index
-- steps over them). Then the claim (claim_heads.sql) or the lock for a
-- delivery in one transaction (lock_set.sql) selects from the heads.
           WITH front AS MATERIALIZED (
               SELECT f.priority, f.turn, f.run_at, f.id FROM queue_live f
                WHERE f.queue_id = $1 AND f.state = 'ready'
                ORDER BY f.priority DESC, f.turn, f.run_at, f.id
                LIMIT 1)
