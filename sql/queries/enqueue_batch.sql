-- $1 queue id, $2 payloads, $3 priority, $4 run_at, $5 state, $6 now,
-- $7 group keys and $8 dedup keys (NULL, or one per payload), $9 the
-- positions (1-based) of payloads not to insert (NULL: none). Ids are drawn
-- after sorting, so they ascend in input order. They come back as one
-- array, ascending.
--
-- Turns as in enqueue.sql, the jobs of one group in the batch taking one
-- turn after another.
--
-- Each job's uid is the statement's one random value (its first 8 bytes)
-- followed by the job's id: unique for ever like a random uuid per job (ids
-- differ within the statement, random values between statements), for a
-- fraction of the cost of 100 calls of gen_random_uuid().
WITH front AS (
    SELECT coalesce((SELECT r.turn FROM queue_live r
                      WHERE r.queue_id = $1 AND r.state = 'ready' AND r.priority = $3
                      ORDER BY r.turn LIMIT 1), 0) AS turn
), input AS (
    SELECT p.payload, p.group_key, p.dedup_key, p.ord,
           CASE WHEN p.group_key IS NULL THEN f.turn ELSE
               greatest(f.turn, (SELECT l.turn + 1 FROM queue_live l
                                  WHERE l.queue_id = $1 AND l.group_key = p.group_key
                                  ORDER BY l.id DESC LIMIT 1))
               + row_number() OVER (PARTITION BY p.group_key ORDER BY p.ord) - 1
           END AS turn
      FROM unnest($2, $7::text[], $8::text[]) WITH ORDINALITY AS p(payload, group_key, dedup_key, ord),
           front f
     WHERE p.ord <> ALL (coalesce($9::bigint[], '{}'))
), jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload,
                            group_key, dedup_key, turn, uid)
    SELECT n.slot, n.queue_id, $3, n.id, $4, $6, $5, n.payload, n.group_key, n.dedup_key, n.turn,
           pg_catalog.encode(overlay(r.bytes PLACING pg_catalog.int8send(n.id) FROM 9),
                             'hex')::uuid
      FROM (SELECT (g.last_value % 2)::smallint AS slot, q.id AS queue_id,
                   nextval('queue_job_id_seq') AS id, i.payload, i.group_key, i.dedup_key, i.turn
              FROM queue_queues q, queue_live_generation g, input i
             WHERE q.id = $1
             ORDER BY i.ord) n,
           (SELECT pg_catalog.uuid_send(gen_random_uuid()) AS bytes) r
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total)
    SELECT queue_id, count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
