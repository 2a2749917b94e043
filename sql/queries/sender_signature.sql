-- The schema-qualified signature of function $1, as a registration stores
-- it and a refusal names it (senders.rs decides what the function is, from
-- the syscache). No row: a concurrent DROP took it meanwhile.
SELECT format('%I.%I(%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes)) AS signature
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.oid = $1
