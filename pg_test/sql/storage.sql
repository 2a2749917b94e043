\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Rotating the live ring moves every unfinished job, with its state and
-- lease, to the other partition, and empties the old one.
SELECT queue_create('s.ring');
SELECT id AS ring FROM queue_queues WHERE name = 's.ring' \gset
SELECT count(*) FROM queue_enqueue_batch('s.ring', array_fill('{}'::jsonb, ARRAY[4]));
SELECT queue_enqueue('s.ring', '{}', delay => '1 hour') > 0 AS scheduled;
SELECT id, lease FROM queue_claim('s.ring') \gset ring_
SELECT state, count(*) FROM queue_live WHERE queue_id = :ring GROUP BY state ORDER BY state;
SELECT tableoid::regclass AS partition, count(*) FROM queue_live WHERE queue_id = :ring GROUP BY 1 ORDER BY 1;
SELECT * FROM queue_maintain(force => true);
SELECT tableoid::regclass AS partition, count(*) FROM queue_live WHERE queue_id = :ring GROUP BY 1 ORDER BY 1;
SELECT state, count(*) FROM queue_live WHERE queue_id = :ring GROUP BY state ORDER BY state;
-- new jobs go to the new current partition
SELECT queue_enqueue('s.ring', '{}') AS after \gset
SELECT tableoid::regclass AS partition FROM queue_live WHERE id = :after;
-- the lease taken before the rotation still holds
SELECT queue_complete(:ring_id, :'ring_lease') AS completed;
-- and the ring turns back
SELECT * FROM queue_maintain(force => true);
SELECT tableoid::regclass AS partition, count(*) FROM queue_live WHERE queue_id = :ring GROUP BY 1 ORDER BY 1;
-- without force, a ring with few dead tuples is left alone
SELECT live_rotated FROM queue_maintain();

-- Finished jobs are kept for their queue's retention; a partition of them
-- is emptied once everything in it has expired.
SELECT queue_create('s.brief', retention => '1 microsecond');
SELECT count(*) FROM queue_enqueue_batch('s.brief', array_fill('{}'::jsonb, ARRAY[3]));
SELECT array_agg(id) AS ids, array_agg(lease) AS leases
  FROM queue_claim('s.brief', max_jobs => 3) \gset brief_
SELECT count(*) FROM queue_complete_batch(:'brief_ids', :'brief_leases');
SELECT status, count(*) FROM queue_jobs WHERE queue = 's.brief' GROUP BY 1;
SELECT count(*) AS kept_elsewhere FROM queue_jobs WHERE status = 'succeeded' AND queue <> 's.brief' \gset
SELECT cleaned AS removed FROM queue_maintain();
SELECT count(*) FROM queue_jobs WHERE queue = 's.brief';
-- jobs still within their retention stay
SELECT count(*) = :kept_elsewhere AS others_kept FROM queue_jobs WHERE status = 'succeeded';

-- Maintenance copies what it sees and then truncates, so it refuses to run
-- on a snapshot older than its statements.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM queue_maintain(force => true);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT * FROM queue_maintain(NULL);
\echo :LAST_ERROR_SQLSTATE

-- Vacuum may clear the dead tuples of a partition before maintenance sees
-- them, and leave it mostly empty pages (a job at the end keeps them from
-- being truncated): such a partition is rotated too. (The 10,000 jobs that
-- produce.sql left go first: unforced, a rotation copies at most 10,000.)
SELECT queue_purge('p.limit');
SELECT queue_create('s.pages');
SELECT count(*) FROM (
    SELECT queue_enqueue_batch('s.pages', array_fill(jsonb_build_object('pad', repeat('x', 200)), ARRAY[10000]))
      FROM generate_series(1, 4)) s;
SELECT queue_enqueue('s.pages', '{"tail": true}', delay => '1 hour') > 0 AS tail;
SELECT format($$SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                                         FROM queue_claim('s.pages', max_jobs => 10000)) c,
                                      LATERAL queue_complete_batch(c.ids, c.leases)$$)
  FROM generate_series(1, 4) \gexec
-- (this session's own counts of the dead tuples first, or they could reach
-- the statistics after VACUUM's report and count again)
SELECT pg_stat_force_next_flush();
VACUUM queue_live;
SELECT format('queue_live_%s', last_value % 2) AS current FROM queue_live_generation \gset
-- (below the 5,000 dead tuples that would rotate it by themselves: another
-- backend's counts may still reach the statistics after VACUUM's report)
SELECT pg_relation_size(:'current') > 8 * 1024 * 1024 AS mostly_empty_pages,
       pg_stat_get_dead_tuples(:'current'::regclass) < 5000 AS below_dead_floor;
SELECT live_rotated FROM queue_maintain();
SELECT format('queue_live_%s', last_value % 2) AS current FROM queue_live_generation \gset
SELECT pg_relation_size(:'current') < 1024 * 1024 AS compact;
SELECT status, count(*) FROM queue_jobs WHERE queue = 's.pages' AND status <> 'succeeded' GROUP BY 1;

-- The copy stalls claims and completions while it runs: past 10,000 jobs
-- the partition is left to vacuum, however many dead tuples it has, unless
-- a snapshot is held (or the rotation is forced). (Autovacuum is kept off
-- the ring meanwhile, so that the dead tuples are still there when
-- maintenance looks.)
ALTER TABLE queue_live_0 SET (autovacuum_enabled = off);
ALTER TABLE queue_live_1 SET (autovacuum_enabled = off);
SELECT queue_create('s.big');
SELECT count(*) FROM (
    SELECT queue_enqueue_batch('s.big', array_fill('{}'::jsonb, ARRAY[10000]))
      FROM generate_series(1, 3)) s;
SELECT format($$SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                                         FROM queue_claim('s.big', max_jobs => 8000)) c,
                                      LATERAL queue_complete_batch(c.ids, c.leases)$$)
  FROM generate_series(1, 2) \gexec
SELECT pg_stat_force_next_flush();
SELECT format('queue_live_%s', last_value % 2) AS current FROM queue_live_generation \gset
SELECT (SELECT count(*) FROM queue_live) > 10000 AS many_jobs,
       pg_stat_get_dead_tuples(:'current'::regclass) > pg_stat_get_live_tuples(:'current'::regclass) AS more_dead;
SELECT live_rotated FROM queue_maintain();
SELECT live_rotated FROM queue_maintain(force => true);
SELECT pending FROM queue_stats WHERE queue = 's.big';
SELECT queue_drop('s.big', force => true);
ALTER TABLE queue_live_0 RESET (autovacuum_enabled);
ALTER TABLE queue_live_1 RESET (autovacuum_enabled);
