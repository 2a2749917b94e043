-- The extension's version, if it is installed in this database.
SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'queue'
