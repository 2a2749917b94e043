-- One job of schedule $1, for its tick $2 (ISO 8601), enqueued at $3: the
-- schedule's payload, priority and group, its headers with "schedule" and
-- "scheduled_for" added. The turn as enqueue.sql gives it.
WITH s AS (
    SELECT queue_id, payload, priority, group_key,
           coalesce(headers, '{}') || pg_catalog.jsonb_build_object('schedule', name,
                                                                    'scheduled_for', $2::text)
               AS headers
      FROM queue_recurring WHERE name = $1
), job AS (
    INSERT INTO queue_live
           (slot, queue_id, priority, id, run_at, enqueued_at, state, headers, payload,
            group_key, turn)
    SELECT (g.last_value % 2)::smallint, s.queue_id, s.priority, nextval('queue_job_id_seq'),
           $3, $3, 'ready', s.headers, s.payload, s.group_key,
           CASE WHEN s.group_key IS NOT NULL THEN
               greatest((SELECT r.turn FROM queue_live r
                          WHERE r.queue_id = s.queue_id AND r.state = 'ready'
                            AND r.priority = s.priority
                          ORDER BY r.turn LIMIT 1),
                        (SELECT l.turn + 1 FROM queue_live l
                          WHERE l.queue_id = s.queue_id AND l.group_key = s.group_key
                            AND l.state <> 'processing'
                          ORDER BY l.id DESC LIMIT 1),
                        0)
           ELSE 0 END
      FROM s, queue_live_generation g
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live) SELECT queue_id, 1, 1 FROM job
)
SELECT id FROM job
