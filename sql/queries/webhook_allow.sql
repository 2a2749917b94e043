-- queue.webhook_allow as it stands now for this database ($1): set for it
-- (ALTER DATABASE ... SET), else for every database (ALTER ROLE ALL SET),
-- else in the configuration files, else empty. Read before each batch of
-- requests, so that a DBA's change reaches delivery without a restart.
SELECT coalesce(
    (SELECT substr(u.setting, length('queue.webhook_allow=') + 1)
       FROM pg_db_role_setting s
      CROSS JOIN LATERAL unnest(s.setconfig) WITH ORDINALITY AS u(setting, n)
      WHERE s.setrole = 0 AND s.setdatabase IN (0, $1)
        AND u.setting LIKE 'queue.webhook\_allow=%'
      ORDER BY s.setdatabase <> 0 DESC, u.n DESC
      LIMIT 1),
    (SELECT f.setting FROM pg_file_settings f
      WHERE f.name = 'queue.webhook_allow' AND f.error IS NULL
      ORDER BY f.seqno DESC
      LIMIT 1),
    '') AS allow
