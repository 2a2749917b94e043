-- A claim of queue $1 at $2 took $4 jobs of each group $3 (NULL: of the
-- queue as a whole).
INSERT INTO queue_claims (queue_id, group_key, claimed_at, jobs)
SELECT $1, g.group_key, $2, g.jobs FROM unnest($3::text[], $4::int[]) AS g(group_key, jobs)
