-- The queues a worker delivers: those with a sender or a webhook, not
-- paused, in id order, each with find_queue_by_id.sql's columns (the worker
-- caches them: its claims then look no queue up); for a webhook, where and
-- how it is sent (url NULL: a SQL sender).
SELECT q.id, q.name, q.owner::oid, q.max_attempts, q.lease, q.paused, q.sender, q.ordered,
       q.max_in_flight, q.group_max_in_flight, q.rate_limit, q.rate_window,
       q.group_rate_limit, q.group_rate_window, q.retention > interval '0' AS keeps_history,
       q.sender_role::oid AS role, q.batch_size,
       w.url, w.headers, w.timeout, w.secret, w.max_in_flight AS webhook_max_in_flight
  FROM queue_queues q
  LEFT JOIN queue_webhooks w ON w.queue_id = q.id
 WHERE q.sender IS NOT NULL AND NOT q.paused
 ORDER BY q.id
