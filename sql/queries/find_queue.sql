SELECT id, owner::oid, max_attempts, lease, paused, sender, ordered, max_in_flight,
       group_max_in_flight, rate_limit, rate_window, group_rate_limit, group_rate_window,
       retention > interval '0' AS keeps_history
  FROM queue_queues
 WHERE name = $1
