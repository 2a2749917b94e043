-- One job, whatever its status (queue_job is open to every role). Its
-- result and its parents' count (0.4) are read by name, so that a database
-- on an older version shows its jobs too.
SELECT id, queue, status, jsonb_pretty(payload) AS payload, jsonb_pretty(headers) AS headers,
       priority, attempts, max_attempts,
       date_trunc('second', run_at)::text AS run_at,
       date_trunc('second', enqueued_at)::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       date_trunc('second', lease_expires_at)::text AS lease_expires_at,
       last_error, worker, dedup_key, group_key,
       jsonb_pretty(nullif(pg_catalog.to_jsonb(j) -> 'result', 'null')) AS result,
       (pg_catalog.to_jsonb(j) ->> 'waiting_for')::integer AS waiting_for
  FROM queue_job($1) j
