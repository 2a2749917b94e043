\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Schedules: recurring jobs (docs/schedules.md).

SELECT queue_create('s.q');

-- every refusal: a specific SQLSTATE naming the field, nothing stored
SELECT queue_schedule('s.bad', 's.q', '61 * * * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '* 24 * * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 L * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 1W * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 ? * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 * 13 *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 * foo *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 * * 5#2');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 * * mon-jan');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '60 * * * * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '*/0 * * * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 30 2 *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '* * * *');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '0 0 1 1 * 2030');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@annually');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', time_zone => 'Mars/Olympus');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', catch_up => 'some');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', headers => '[1]');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', group_key => '');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('S bad', 's.q', '@daily');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.none', '@daily');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', payload => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.bad', 's.q', '@daily', time_zone => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_run_schedule('s.none');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stored FROM queue_schedules;

-- the view's columns
SELECT queue_schedule('s.nightly', 's.q', '30 2 * * *', payload => '{"digest": true}',
                      headers => '{"source": "cron"}', priority => 5,
                      time_zone => 'Europe/Berlin', catch_up => 'all', no_overlap => true);
SELECT name, queue, cron, time_zone, paused, catch_up, no_overlap,
       next_run_at > now() AS next_is_ahead, last_run_at, last_job_id, runs_total,
       skipped_total, owner = current_user::regrole AS by_me
  FROM queue_schedules;
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_name = 'queue_schedules' ORDER BY ordinal_position;

-- run it now: one job with the schedule's payload, priority and headers
SELECT queue_run_schedule('s.nightly') AS id \gset
SELECT payload, priority, headers->>'source' AS source, headers->>'schedule' AS schedule,
       (headers->>'scheduled_for')::timestamptz <= now() AS scheduled_for_now
  FROM queue_jobs WHERE id = :id;
SELECT last_job_id = :id AS last_job, runs_total, last_run_at IS NOT NULL AS ran
  FROM queue_schedules;

-- replacing keeps the history; a changed expression moves the next tick
SELECT next_run_at AS before FROM queue_schedules \gset
SELECT queue_schedule('s.nightly', 's.q', '30 2 * * *', time_zone => 'Europe/Berlin',
                      paused => true);
SELECT next_run_at = :'before' AS same_tick, paused, runs_total, catch_up
  FROM queue_schedules;
SELECT queue_schedule('s.nightly', 's.q', '@hourly', paused => true);
SELECT next_run_at = date_trunc('hour', now()) + interval '1 hour' AS next_hour, runs_total
  FROM queue_schedules;

-- a queue with schedules goes only with force, which removes them
SELECT queue_drop('s.q');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_schedules;
SELECT queue_drop('s.q', force => true);
SELECT count(*) FROM queue_schedules;

-- unschedule
SELECT queue_create('s.q2');
SELECT queue_schedule('s.every', 's.q2', '*/5 * * * *', paused => true);
SELECT queue_unschedule('s.every'), queue_unschedule('s.every');

-- the owner rule: 42501 for others; monitoring roles read the view
CREATE ROLE s_other;
CREATE ROLE s_monitor IN ROLE pg_monitor;
SELECT queue_schedule('s.mine', 's.q2', '@daily', paused => true);
SET ROLE s_other;
SELECT queue_schedule('s.theirs', 's.q2', '@daily');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_schedule('s.mine', 's.q2', '@hourly');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_run_schedule('s.mine');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_unschedule('s.mine');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_schedules;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE s_monitor;
SELECT name, cron FROM queue_schedules;
RESET ROLE;
SELECT cron FROM queue_schedules;
SELECT queue_unschedule('s.mine');
SELECT queue_drop('s.q2');
DROP ROLE s_other;
DROP ROLE s_monitor;

-- next ticks of tricky expressions, without waiting for the clock
-- day 31: only the months that have one
SELECT queue_schedule_ticks('0 0 31 * *', after => '2026-01-15', count => 4);
-- day of month and day of week together: either one (the 13th, a Sunday
-- in December 2026, or a Friday)
SELECT queue_schedule_ticks('0 12 13 * fri', after => '2026-12-01', count => 5);
-- steps, ranges and names
SELECT queue_schedule_ticks('*/20 9-10 * jan,feb MON-wed', after => '2026-12-31', count => 8);
SELECT queue_schedule_ticks('15 */6 1-7/3 * *', after => '2026-06-01', count => 6);
SELECT queue_schedule_ticks('*/15 * * * * *', after => '2026-06-01 12:00:07', count => 3);
SELECT queue_schedule_ticks('@weekly', after => '2026-06-01', count => 2);
SELECT queue_schedule_ticks('@yearly', after => '2026-06-01', count => 2);
-- Europe/Berlin, spring forward (29 March 2026, 02:00 CET becomes 03:00
-- CEST): 02:30 does not exist and fires once, at 03:00 CEST (01:00 UTC)
SELECT t, t AT TIME ZONE 'Europe/Berlin' AS local
  FROM queue_schedule_ticks('30 2 * * *', 'Europe/Berlin', '2026-03-27', 4) AS t;
-- every 15 minutes across the gap: the skipped ones are one tick at 03:00
SELECT t AT TIME ZONE 'Europe/Berlin' AS local
  FROM queue_schedule_ticks('*/15 * * * *', 'Europe/Berlin', '2026-03-29 00:20:00+00', 6) AS t;
-- Europe/Berlin, fall back (25 October 2026, 03:00 CEST becomes 02:00 CET):
-- 02:30 occurs twice and fires once, at its first occurrence (00:30 UTC)
SELECT t, t AT TIME ZONE 'Europe/Berlin' AS local
  FROM queue_schedule_ticks('30 2 * * *', 'Europe/Berlin', '2026-10-24', 3) AS t;
-- hourly across it: 02:00 once
SELECT t FROM queue_schedule_ticks('0 * * * *', 'Europe/Berlin', '2026-10-24 23:30:00+00', 4) AS t;
-- America/New_York, spring forward (8 March 2026, 02:00 EST becomes 03:00 EDT)
SELECT t, t AT TIME ZONE 'America/New_York' AS local
  FROM queue_schedule_ticks('30 2 * * *', 'America/New_York', '2026-03-07', 3) AS t;
-- America/New_York, fall back (1 November 2026, 02:00 EDT becomes 01:00 EST)
SELECT t, t AT TIME ZONE 'America/New_York' AS local
  FROM queue_schedule_ticks('30 1 * * *', 'America/New_York', '2026-10-31', 3) AS t;
SELECT t FROM queue_schedule_ticks('*/30 * * * *', 'America/New_York', '2026-11-01 04:40:00+00', 5) AS t;
-- count's range
SELECT queue_schedule_ticks('@daily', count => 0);
\echo :LAST_ERROR_SQLSTATE
