-- The sender of queue $1 as it stands now: its signature (NULL when the
-- queue has none or is gone), the function's oid (NULL when the signature
-- no longer resolves), its role's oid and name, whether that role still
-- exists, whether it may still execute the function; the queue's name and
-- max_attempts; and whether the function is still a plain one (a function
-- dropped and made again under the signature could be a set-returning or
-- window function now, which registration refuses).
SELECT q.sender, f.oid, q.sender_role::oid, q.sender_role::text, r.oid IS NOT NULL,
       CASE WHEN f.oid IS NOT NULL AND r.oid IS NOT NULL
            THEN has_function_privilege(r.oid, f.oid, 'EXECUTE') END,
       q.name, q.max_attempts,
       EXISTS (SELECT FROM pg_proc p WHERE p.oid = f.oid AND p.prokind = 'f' AND NOT p.proretset)
  FROM queue_queues q
 CROSS JOIN LATERAL (SELECT to_regprocedure(q.sender)::oid AS oid) f
  LEFT JOIN pg_roles r ON r.oid = q.sender_role
 WHERE q.id = $1
