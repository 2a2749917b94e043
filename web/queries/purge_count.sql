-- How many jobs queue_purge($1, $2) would delete now ($2 NULL: all), from
-- queue_stats, whose succeeded, failed and cancelled are the jobs retained
-- (and whose pending and scheduled are both of status pending).
SELECT CASE $2::text
         WHEN 'pending' THEN pending + scheduled
         WHEN 'processing' THEN processing
         WHEN 'succeeded' THEN succeeded
         WHEN 'failed' THEN failed
         WHEN 'cancelled' THEN cancelled
         ELSE pending + scheduled + processing + succeeded + failed + cancelled
       END AS jobs
  FROM queue_stats
 WHERE queue = $1
