-- What a DBA reads. Every job still retained, whatever its status.
CREATE VIEW queue_jobs AS
SELECT j.id, q.name AS queue,
       CASE j.state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       j.payload, j.headers, j.priority, j.attempts, q.max_attempts, j.run_at,
       j.enqueued_at, NULL::timestamptz AS finished_at, j.last_error, j.worker,
       j.lease_expires_at, j.dedup_key
  FROM queue_live j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, j.status, j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key
  FROM queue_done j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, 'failed', j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key
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
