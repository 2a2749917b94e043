-- Whether a claim of queue $1 at $2 has work to do first: scheduled jobs that
-- are due (to promote), and leases that expired (to take back). Two index
-- probes: most claims have neither, and an UPDATE that finds nothing still
-- costs the set-up of every partition and index it could write.
SELECT EXISTS (SELECT FROM queue_live
                WHERE queue_id = $1 AND state = 'scheduled' AND run_at <= $2) AS due,
       EXISTS (SELECT FROM queue_live
                WHERE queue_id = $1 AND state = 'processing' AND lease_expires_at < $2) AS expired
