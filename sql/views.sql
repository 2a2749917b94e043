-- What a DBA reads. Every job still retained, whatever its status.
CREATE VIEW queue_jobs AS
SELECT j.id, q.name AS queue,
       CASE j.state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       j.payload, j.headers, j.priority, j.attempts, q.max_attempts, j.run_at,
       j.enqueued_at, NULL::timestamptz AS finished_at, j.last_error, j.worker,
       j.lease_expires_at, j.dedup_key, j.group_key, NULL::jsonb AS result, j.depends_on,
       j.waiting_for
  FROM queue_live j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, j.status, j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, j.result, j.depends_on, 0
  FROM queue_done j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, 'failed', j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, NULL::jsonb, j.depends_on, 0
  FROM queue_dead j JOIN queue_queues q ON q.id = j.queue_id;

-- The row of one job; none for an id that does not exist (or no longer does).
CREATE FUNCTION queue_job(id bigint) RETURNS SETOF queue_jobs
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF id IS NULL THEN
        RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY SELECT * FROM queue_jobs j WHERE j.id = queue_job.id;
END
$$;

-- The parents of one job (depends_on, in order), with their outcomes: a
-- callback reads its batch's results here. Status and result NULL for a
-- parent no longer retained; no row for a job without parents, or missing.
-- (a row type of its own: the function's argument shares its name with the
-- first column)
CREATE TYPE queue_parent AS (id bigint, queue text, status text, result jsonb);
CREATE FUNCTION queue_parents(id bigint) RETURNS SETOF queue_parent
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF queue_parents.id IS NULL THEN
        RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT p.parent, j.queue, j.status, j.result
      FROM (SELECT c.depends_on FROM queue_jobs c WHERE c.id = queue_parents.id LIMIT 1) c
     CROSS JOIN LATERAL unnest(c.depends_on) WITH ORDINALITY AS p(parent, n)
      LEFT JOIN LATERAL (SELECT j.queue, j.status, j.result FROM queue_jobs j
                          WHERE j.id = p.parent LIMIT 1) j ON true
     ORDER BY p.n;
END
$$;

-- The jobs that depend on one job (their depends_on names it), by id, with
-- their outcomes: found through the children indexes, whatever became of
-- the job's edges.
CREATE FUNCTION queue_children(id bigint) RETURNS SETOF queue_parent
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF queue_children.id IS NULL THEN
        RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT j.id, j.queue, j.status, j.result
      FROM queue_jobs j
     WHERE j.depends_on @> ARRAY[queue_children.id]
     ORDER BY j.id;
END
$$;

-- When the oldest due job of queue $1 fell due (queue_stats), without
-- reading the backlog: the older of the first due scheduled job and, in the
-- claim order's index, of the first ready job of each priority and turn (a
-- walk of one probe each: a queue without groups has one turn per
-- priority; past 1,000 of them, every ready job is read). A function of its
-- own, so that the view's plan stays small: the planner prices the walk's
-- fallback as if it always ran, which was enough to make it compile the
-- view with JIT.
CREATE FUNCTION queue_oldest_due(queue_id integer) RETURNS timestamptz
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    walked integer;
    oldest timestamptz;
BEGIN
    WITH RECURSIVE front (priority, turn, run_at) AS (
        (SELECT j.priority, j.turn, j.run_at FROM queue_live j
          WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
          ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
        UNION ALL
        SELECT n.priority, n.turn, n.run_at
          FROM front f
         CROSS JOIN LATERAL (
               -- (the next turn of the priority, else the next priority)
               (SELECT j.priority, j.turn, j.run_at FROM queue_live j
                 WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
                   AND j.priority = f.priority AND j.turn > f.turn
                 ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
               UNION ALL
               (SELECT j.priority, j.turn, j.run_at FROM queue_live j
                 WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
                   AND j.priority < f.priority
                 ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
               LIMIT 1) n
    )
    SELECT count(*), min(w.run_at) INTO walked, oldest FROM (SELECT run_at FROM front LIMIT 1000) w;
    IF walked = 1000 THEN
        SELECT min(j.run_at) INTO oldest FROM queue_live j
         WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready';
    END IF;
    RETURN least(oldest, (SELECT min(j.run_at) FROM queue_live j
                           WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'scheduled'
                             AND j.run_at <= now()));
END
$$;

-- One row per queue, also for an empty one, without reading the backlog:
-- the unfinished jobs are counted by the tallies (`live`: every statement
-- that adds jobs to queue_live or takes them out writes its delta, in its
-- own transaction, so the sum is exact in any snapshot), less those in
-- flight, scheduled for later or blocked, each counted in its own partial
-- index (these are few where the backlog is large); the oldest due job by
-- queue_oldest_due. Finished jobs come from the counters.
CREATE VIEW queue_stats AS
SELECT q.name AS queue,
       q.paused,
       q.sender,
       coalesce(c.live, 0) - l.processing - l.blocked - l.scheduled AS pending,
       l.scheduled,
       l.processing,
       coalesce(c.succeeded, 0) AS succeeded,
       coalesce(c.failed, 0) AS failed,
       coalesce(c.cancelled, 0) AS cancelled,
       CASE WHEN l.oldest_due IS NOT NULL
            THEN greatest(now() - l.oldest_due, interval '0') END AS oldest_due_age,
       coalesce(c.enqueued_total, 0) AS enqueued_total,
       coalesce(c.succeeded_total, 0) AS succeeded_total,
       coalesce(c.failed_total, 0) AS failed_total,
       l.blocked
  FROM queue_queues q
  CROSS JOIN LATERAL (
        SELECT (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'processing') AS processing,
               (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'blocked') AS blocked,
               (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'scheduled' AND j.run_at > now())
                   AS scheduled,
               queue_oldest_due(q.id) AS oldest_due
       ) l
  LEFT JOIN (
        SELECT queue_id,
               sum(enqueued_total)::bigint AS enqueued_total,
               sum(succeeded_total)::bigint AS succeeded_total,
               sum(failed_total)::bigint AS failed_total,
               sum(succeeded)::bigint AS succeeded,
               sum(cancelled)::bigint AS cancelled,
               sum(failed)::bigint AS failed,
               sum(live)::bigint AS live
          FROM (SELECT queue_id, enqueued_total, succeeded_total, failed_total, succeeded,
                       cancelled, failed, live
                  FROM queue_counters
                UNION ALL
                SELECT queue_id, enqueued_total, succeeded_total, failed_total, succeeded,
                       cancelled, failed, live
                  FROM queue_tallies) t
         GROUP BY queue_id) c ON c.queue_id = q.id
 ORDER BY q.name;

-- The dead letters: failed jobs, kept until retried or purged.
CREATE VIEW queue_failed AS
SELECT d.id, q.name AS queue, d.payload, d.attempts, d.last_error, d.finished_at
  FROM queue_dead d JOIN queue_queues q ON q.id = d.queue_id;

-- The schedules of this database (docs/schedules.md).
CREATE VIEW queue_schedules AS
SELECT s.name, q.name AS queue, s.cron, s.time_zone, s.paused, s.catch_up, s.no_overlap,
       s.next_run_at, s.last_run_at, s.last_job_id, s.runs_total, s.skipped_total, s.owner
  FROM queue_recurring s JOIN queue_queues q ON q.id = s.queue_id;

-- The background workers of the cluster, from shared memory (so every
-- database sees all of them), and the databases waiting for a worker slot.
-- Empty without the preload.
CREATE VIEW queue_workers AS
SELECT pid, database, state, started_at, last_active_at, jobs_delivered, jobs_failed,
       last_error
  FROM queue_worker_status();

-- How long this database's jobs waited (due until claimed) and ran
-- (claimed until their attempt ended, by outcome), per queue, since the
-- server started: histograms kept in shared memory by the commits that
-- claim and end jobs (src/metrics). Bucket bounds in seconds, the last
-- +Inf; counts cumulative, as Prometheus writes them. Empty without the
-- preload.
CREATE VIEW queue_latency AS
SELECT q.name AS queue, h.kind, h.outcome, h.le, h.counts, h.sum_seconds, h.count
  FROM queue_latency_histograms() h
  JOIN queue_queues q ON q.id = h.queue_id;
