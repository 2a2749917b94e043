-- The extension, in the database every golden test shares. Each test shows
-- its errors as psql prints them by default, followed by their SQLSTATE.
CREATE EXTENSION queue;
SELECT extname, extrelocatable FROM pg_extension WHERE extname = 'queue';
-- Every table, partition and sequence that holds user data is dumped by pg_dump.
SELECT c.relname
  FROM pg_extension e, unnest(e.extconfig) AS t(oid)
  JOIN pg_class c ON c.oid = t.oid
 WHERE e.extname = 'queue'
 ORDER BY 1;
