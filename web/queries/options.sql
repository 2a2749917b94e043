-- A queue's options. queue_queues is the extension owner's table: a role
-- that may not read it gets 42501, which the page shows instead.
SELECT owner::text AS owner, max_attempts, backoff, retry_delay::text AS retry_delay,
       max_retry_delay::text AS max_retry_delay, lease::text AS lease,
       retention::text AS retention, ordered, max_in_flight, group_max_in_flight,
       rate_limit || '/' || rate_window AS rate_limit,
       group_rate_limit || '/' || group_rate_window AS group_rate_limit,
       date_trunc('second', created_at)::text AS created_at
  FROM queue_queues
 WHERE name = $1
