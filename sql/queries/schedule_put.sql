-- Creates schedule $1, or replaces it keeping its run history. A
-- replacement keeps its next tick when the ticks stay the same (a tick due
-- and not fired yet is not lost; a schedule the worker stopped, without
-- one, gets one again), and one that resumes a paused schedule makes the
-- ticks it missed meanwhile missed ones, for catch_up.
INSERT INTO queue_recurring AS s
       (name, queue_id, cron, time_zone, payload, headers, priority, group_key, catch_up,
        no_overlap, paused, owner, next_run_at, missed_before)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::regrole, $13, $14)
ON CONFLICT (name) DO UPDATE
   SET queue_id = excluded.queue_id,
       cron = excluded.cron,
       time_zone = excluded.time_zone,
       payload = excluded.payload,
       headers = excluded.headers,
       priority = excluded.priority,
       group_key = excluded.group_key,
       catch_up = excluded.catch_up,
       no_overlap = excluded.no_overlap,
       paused = excluded.paused,
       owner = excluded.owner,
       next_run_at = CASE WHEN s.cron = excluded.cron AND s.time_zone = excluded.time_zone
                               AND s.next_run_at IS NOT NULL
                          THEN s.next_run_at ELSE excluded.next_run_at END,
       missed_before = CASE WHEN s.paused AND NOT excluded.paused
                            THEN excluded.missed_before ELSE s.missed_before END
