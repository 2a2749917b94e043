-- A claim of queue $1 at $3 took $5 jobs of each group $4 (NULL: of the
-- queue as a whole). Claims at $2 or earlier are past every window of the
-- queue: they go, unless a claim beside this one is removing them already
-- (claims of a queue run side by side: reservations.rs).
WITH past AS (
    DELETE FROM queue_claims
     WHERE ctid = ANY (ARRAY(SELECT ctid FROM queue_claims
                              WHERE queue_id = $1 AND claimed_at <= $2
                              FOR UPDATE SKIP LOCKED))
)
INSERT INTO queue_claims (queue_id, group_key, claimed_at, jobs)
SELECT $1, g.group_key, $3, g.jobs FROM unnest($4::text[], $5::int[]) AS g(group_key, jobs)
