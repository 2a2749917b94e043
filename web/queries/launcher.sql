-- What can be seen of the background workers' launcher, to say why no
-- worker runs: a standby runs none; the launcher (a background worker that
-- names itself "queue launcher") in pg_stat_activity, whose backend_type
-- a pg_monitor role reads (others see its application_name); the preload
-- list, for a role that may read it (pg_read_all_settings, in pg_monitor);
-- and queue.enabled and queue.idle_exit as this session sees them.
SELECT pg_catalog.pg_is_in_recovery() AS standby,
       EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity
                WHERE backend_type = 'queue launcher'
                   OR (backend_type IS NULL AND application_name = 'queue launcher')) AS launcher,
       CASE WHEN pg_catalog.pg_has_role('pg_read_all_settings', 'USAGE')
            THEN pg_catalog.current_setting('shared_preload_libraries') END AS preload,
       pg_catalog.current_setting('queue.enabled', true) AS enabled,
       pg_catalog.current_setting('queue.idle_exit', true) AS idle_exit
