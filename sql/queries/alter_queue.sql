-- Options that are NULL stay as they are; a limit of 0 is removed. A rate is
-- $11 jobs per $12 (group: $13 per $14).
WITH counted AS (
    -- (an order or a group_max_in_flight set now counts the jobs already
    -- in flight, which claims in a queue without either left out:
    -- claim_set.sql)
    UPDATE queue_live SET group_counted = true
     WHERE queue_id = $1 AND state = 'processing' AND group_key IS NOT NULL
       AND NOT group_counted AND ($8 OR $10 > 0)
)
UPDATE queue_queues
   SET max_attempts        = coalesce($2, max_attempts),
       backoff             = coalesce($3, backoff),
       retry_delay         = coalesce($4, retry_delay),
       max_retry_delay     = coalesce($5, max_retry_delay),
       lease               = coalesce($6, lease),
       retention           = coalesce($7, retention),
       ordered             = coalesce($8, ordered),
       max_in_flight       = CASE WHEN $9 IS NULL THEN max_in_flight ELSE nullif($9, 0) END,
       group_max_in_flight = CASE WHEN $10 IS NULL THEN group_max_in_flight
                                  ELSE nullif($10, 0) END,
       rate_limit          = CASE WHEN $11 IS NULL THEN rate_limit ELSE nullif($11, 0) END,
       rate_window         = CASE WHEN $11 IS NULL THEN rate_window
                                  WHEN $11 > 0 THEN $12 END,
       group_rate_limit    = CASE WHEN $13 IS NULL THEN group_rate_limit ELSE nullif($13, 0) END,
       group_rate_window   = CASE WHEN $13 IS NULL THEN group_rate_window
                                  WHEN $13 > 0 THEN $14 END
 WHERE id = $1
