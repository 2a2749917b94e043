-- (claim_set.sql) The first $2 ready jobs in claim order.
           SELECT id FROM queue_live
            WHERE queue_id = $1 AND state = 'ready'
            ORDER BY priority DESC, turn, run_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
