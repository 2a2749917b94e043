-- The schema-qualified signature of function $1, as a registration stores
-- it and a refusal names it (senders.rs decides what the function is, from
-- the syscache); its oid when a concurrent DROP took it meanwhile.
SELECT coalesce((SELECT format('%I.%I(%s)', n.nspname, p.proname, oidvectortypes(p.proargtypes))
                   FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                  WHERE p.oid = $1),
                $1::text) AS signature
