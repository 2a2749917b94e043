-- Job $1's status and result now (queue_await): no row when it does not
-- exist or is no longer retained.
SELECT CASE state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       NULL::jsonb AS result
  FROM queue_live WHERE id = $1
UNION ALL
SELECT status, result FROM queue_done WHERE id = $1
UNION ALL
SELECT 'failed', NULL FROM queue_dead WHERE id = $1
LIMIT 1
