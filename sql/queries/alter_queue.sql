UPDATE queue_queues
   SET max_attempts    = coalesce($2, max_attempts),
       backoff         = coalesce($3, backoff),
       retry_delay     = coalesce($4, retry_delay),
       max_retry_delay = coalesce($5, max_retry_delay),
       lease           = coalesce($6, lease),
       retention       = coalesce($7, retention)
 WHERE id = $1
