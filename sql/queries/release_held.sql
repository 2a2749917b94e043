-- The jobs among the pairs (ids $1, leases $2) still in flight with that
-- lease are ready again, their attempts unchanged: a worker leaving before
-- their webhook requests answered (http.rs). A job cancelled or claimed
-- again meanwhile is left alone.
UPDATE queue_live l
   SET state = 'ready', lease = NULL, lease_expires_at = NULL, worker = NULL
  FROM unnest($1::bigint[], $2::uuid[]) AS p(id, lease)
 WHERE l.id = p.id AND l.lease = p.lease  -- in flight (see complete.sql)
