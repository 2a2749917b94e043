-- A new connection finds the extension's objects in the schema it was
-- created in (public unless CREATE EXTENSION said otherwise).
SELECT pg_catalog.set_config(
    'search_path',
    'pg_catalog, ' || coalesce((SELECT pg_catalog.quote_ident(n.nspname)
                                  FROM pg_catalog.pg_extension e
                                  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                                 WHERE e.extname = 'queue'), 'public'),
    false)
