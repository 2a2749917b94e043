-- enqueue_batch.sql with keys: $7 group keys and $8 dedup keys (NULL, or
-- one per payload), $9 the places (1-based) of payloads not to insert
-- (NULL: none), $10 as in enqueue.sql, $11 every job's headers (NULL:
-- none). Turns (and turn_safe) as in
-- enqueue.sql, the jobs of one group in the batch taking one turn after
-- another; the front is looked at only for a batch with group keys. Uids as
-- in enqueue_batch.sql.
WITH r AS MATERIALIZED (
    -- (once for the statement)
    -- (96 random bits: a uuid's 32 hexadecimal digits less its version,
    -- 13th, and its variant, 17th, which carry none)
    SELECT pg_catalog.substr(u, 1, 12) || pg_catalog.substr(u, 14, 3) || pg_catalog.substr(u, 18, 9)
               AS prefix
      FROM (SELECT pg_catalog.replace(gen_random_uuid()::text, '-', '') AS u) g
), front AS (
    SELECT CASE WHEN $7::text[] IS NOT NULL THEN
               coalesce((SELECT r.turn FROM queue_live r
                          WHERE r.queue_id = $1 AND r.state = 'ready' AND r.priority = $3
                          ORDER BY r.turn LIMIT 1), 0)
           ELSE 0 END AS turn
), input AS (
    SELECT p.payload, p.group_key, p.dedup_key, p.ord,
           CASE WHEN p.group_key IS NULL THEN 0 ELSE
               greatest(f.turn, l.turn + 1)
               + row_number() OVER (PARTITION BY p.group_key ORDER BY p.ord) - 1
           END AS turn,
           p.group_key IS NOT NULL AND $10 AND coalesce(l.turn_safe, true)
           AND NOT EXISTS (SELECT FROM queue_live b
                            WHERE b.queue_id = $1 AND b.group_key = p.group_key
                              AND b.state = 'processing' AND b.group_counted) AS turn_safe
      FROM unnest($2, $7::text[], $8::text[]) WITH ORDINALITY AS p(payload, group_key, dedup_key, ord)
     CROSS JOIN front f
      LEFT JOIN LATERAL (SELECT l.turn, l.turn_safe FROM queue_live l
                          WHERE l.queue_id = $1 AND l.group_key = p.group_key
                            AND l.state <> 'processing'
                          ORDER BY l.id DESC LIMIT 1) l ON p.group_key IS NOT NULL
     WHERE p.ord <> ALL (coalesce($9::bigint[], '{}'))
), jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload,
                            group_key, dedup_key, turn, turn_safe, uid, headers)
    SELECT (g.last_value % 2)::smallint, q.id, $3, nextval('queue_job_id_seq'), $4, $6, $5,
           i.payload, i.group_key, i.dedup_key, i.turn, i.turn_safe,
           (r.prefix || pg_catalog.lpad(pg_catalog.to_hex(i.ord), 8, '0'))::uuid, $11::jsonb
      FROM queue_queues q, queue_live_generation g, input i, r
     WHERE q.id = $1
     ORDER BY i.ord
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live)
    SELECT queue_id, count(*), count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
