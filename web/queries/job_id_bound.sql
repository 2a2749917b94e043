-- An upper bound of the database's job ids cheaply: the id sequence's last
-- value, which pg_sequences shows to a role that may read the sequence (the
-- extension's owner, a superuser) and gives as NULL to others.
SELECT s.last_value
  FROM pg_catalog.pg_sequences s
  JOIN pg_catalog.pg_extension e ON e.extname = 'queue'
  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
 WHERE s.schemaname = n.nspname AND s.sequencename = 'queue_job_id_seq'
