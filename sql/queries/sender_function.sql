-- What makes function $1 a sender for role $2 (senders.rs checks it): its
-- kind, whether it returns a set, its argument types, its schema-qualified
-- signature, and whether the role may execute it. No row: no such function.
SELECT p.prokind::text AS kind, p.proretset AS returns_set, p.proargtypes::oid[] AS arguments,
       format('%I.%I(%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes)) AS signature,
       has_function_privilege($2, p.oid, 'EXECUTE') AS executable
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.oid = $1
