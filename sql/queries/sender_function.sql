-- What registration checks of function $1 for role $2: its kind, whether
-- it returns a set, its argument types, its schema-qualified signature, and
-- whether the role may execute it.
SELECT p.prokind::text, p.proretset, p.proargtypes::oid[],
       format('%I.%I(%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes)),
       has_function_privilege($2, p.oid, 'EXECUTE')
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.oid = $1
