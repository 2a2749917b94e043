-- What registration checks of function $1: its kind, whether it returns a
-- set, its argument types, and its schema-qualified signature.
SELECT p.prokind::text, p.proretset, p.proargtypes::oid[],
       format('%I.%I(%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes))
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.oid = $1
