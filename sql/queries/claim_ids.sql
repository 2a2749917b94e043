-- (claim_set.sql) The jobs $8, those still ready: a claim that holds to
-- its queue's limits chose them (jobs.rs). ($2 is not used.)
           SELECT id FROM queue_live
            WHERE id = ANY ($8) AND queue_id = $1 AND state = 'ready' AND $2 > 0
            FOR UPDATE SKIP LOCKED
