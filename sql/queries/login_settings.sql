-- The settings that a new session of role $1 in database $2 starts with
-- (pg_db_role_setting), lowest priority first: ALTER ROLE ALL SET, then
-- ALTER DATABASE ... SET, then ALTER ROLE ... SET, then ALTER ROLE ... IN
-- DATABASE ... SET (0 in setrole or setdatabase: every role or database).
-- Applied in this order, each later one wins, as at login (postinit.c's
-- process_settings() applies them highest first and keeps the first).
SELECT u.setting
  FROM pg_db_role_setting s
 CROSS JOIN LATERAL unnest(s.setconfig) WITH ORDINALITY AS u(setting, n)
 WHERE s.setdatabase IN (0, $2) AND s.setrole IN (0, $1)
 ORDER BY s.setrole <> 0, s.setdatabase <> 0, u.n
