\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Jobs that wait for other jobs: depends_on and on_parent_failure on
-- queue_enqueue and queue_enqueue_batch (races: pg_test/isolation, the
-- worker and crashes: tests/tests/dependencies.rs).
SELECT queue_create('d.work', max_attempts => 1);
SELECT queue_create('d.next', max_attempts => 1);
-- a child of two parents (in another queue) waits until both have succeeded
SELECT queue_enqueue('d.work', '{"part": 1}') AS p1 \gset
SELECT queue_enqueue('d.work', '{"part": 2}') AS p2 \gset
SELECT queue_enqueue('d.next', '{"join": true}', depends_on => ARRAY[:p1, :p2, :p1]) AS child \gset
SELECT status, depends_on = ARRAY[:p1, :p2]::bigint[] AS parents_once, waiting_for
  FROM queue_jobs WHERE id = :child;
SELECT queue, pending, scheduled, processing, blocked FROM queue_stats WHERE queue = 'd.next';
SELECT count(*) AS claimed FROM queue_claim('d.next');
SELECT queue_complete(id, lease, jsonb_build_object('done', payload->'part'))
  FROM queue_claim('d.work');
SELECT waiting_for FROM queue_jobs WHERE id = :child;
SELECT count(*) AS claimed FROM queue_claim('d.next');
SELECT queue_complete(id, lease, jsonb_build_object('done', payload->'part'))
  FROM queue_claim('d.work');
SELECT status, waiting_for FROM queue_jobs WHERE id = :child;
SELECT blocked FROM queue_stats WHERE queue = 'd.next';
-- the parents' outcomes, for a callback
SELECT id = :p1 AS first, queue, status, result FROM queue_parents(:child);
SELECT queue_parents(:child) IS NOT NULL AS typed;
SELECT payload FROM queue_claim('d.next');
SELECT * FROM queue_parents(-1);
SELECT * FROM queue_parents(:p1);
-- and the other way: the jobs that depend on one
SELECT id = :child AS child, queue, status FROM queue_children(:p2);
SELECT * FROM queue_children(:child);
SELECT * FROM queue_children(NULL);
\echo :LAST_ERROR_SQLSTATE

-- a parent that has already succeeded is satisfied; one that does not
-- exist (or is no longer retained) is refused
SELECT queue_enqueue('d.next', '{"after": "done"}', depends_on => ARRAY[:p1]) AS after_done \gset
SELECT status, waiting_for FROM queue_jobs WHERE id = :after_done;
SELECT queue_enqueue('d.next', '{}', depends_on => ARRAY[:p1, -5]);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('d.next', '{}', depends_on => ARRAY[NULL]::bigint[]);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('d.next', '{}', depends_on => ARRAY[:p1], on_parent_failure => 'ignore');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('d.next', '{}', depends_on => ARRAY[:p1], on_parent_failure => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('d.next', '{}', depends_on => (SELECT array_agg(i) FROM generate_series(1, 10001) i));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS enqueued FROM queue_jobs WHERE queue = 'd.next';

-- a failure cancels down the graph, in the same transaction, unless a
-- child runs anyway ('run'); a retry of the parent puts back what it
-- cancelled
SELECT queue_enqueue('d.work', '{"step": "extract"}') AS a \gset
SELECT queue_enqueue('d.next', '{"step": "transform"}', depends_on => ARRAY[:a]) AS b \gset
SELECT queue_enqueue('d.next', '{"step": "load"}', depends_on => ARRAY[:b]) AS c \gset
SELECT queue_enqueue('d.next', '{"step": "report"}', depends_on => ARRAY[:b],
                     on_parent_failure => 'run') AS r \gset
SELECT queue_fail(id, lease, 'source down') FROM queue_claim('d.work');
SELECT id - :a AS n, status, waiting_for, regexp_replace(last_error, '[0-9]+', 'N') AS last_error
  FROM queue_jobs WHERE id IN (:a, :b, :c, :r) ORDER BY id;
SELECT queue_retry(:a);
SELECT id - :a AS n, status, waiting_for FROM queue_jobs WHERE id IN (:a, :b, :c, :r) ORDER BY id;
SELECT queue_complete(id, lease) FROM queue_claim('d.work');
SELECT payload FROM queue_claim('d.next', max_jobs => 10) ORDER BY id;

-- purging an unfinished parent counts as its failure
SELECT queue_create('d.purged');
SELECT queue_enqueue('d.purged', '{}') AS gone \gset
SELECT queue_enqueue('d.next', '{"orphan": true}', depends_on => ARRAY[:gone]) AS orphan \gset
SELECT queue_enqueue('d.next', '{"callback": true}', depends_on => ARRAY[:gone],
                     on_parent_failure => 'run') AS callback \gset
SELECT queue_purge('d.purged');
SELECT id - :orphan AS n, status, waiting_for,
       regexp_replace(last_error, '[0-9]+', 'N') AS last_error
  FROM queue_jobs WHERE id IN (:orphan, :callback) ORDER BY id;
SELECT id = :gone AS purged, queue, status, result FROM queue_parents(:callback);

-- a parent that has already failed cancels a child at once
SELECT queue_enqueue('d.work', '{}') AS dead \gset
SELECT queue_fail(id, lease, 'broken', permanent => true) FROM queue_claim('d.work');
SELECT queue_enqueue('d.next', '{"late": true}', depends_on => ARRAY[:dead]) AS late \gset
SELECT status, regexp_replace(last_error, '[0-9]+', 'N') AS last_error FROM queue_jobs WHERE id = :late;

-- a batch of jobs, each with the same parents
SELECT queue_create('d.batch');
SELECT queue_enqueue('d.batch', '{}') AS bp \gset
SELECT count(*) FROM queue_enqueue_batch('d.next', ARRAY['{"b": 1}', '{"b": 2}']::jsonb[],
                                         depends_on => ARRAY[:bp]);
SELECT count(*) FILTER (WHERE waiting_for = 1) AS waiting FROM queue_jobs
 WHERE queue = 'd.next' AND payload ? 'b';
SELECT queue_enqueue_batch('d.next', ARRAY['{}']::jsonb[], depends_on => ARRAY[-7]);
\echo :LAST_ERROR_SQLSTATE

-- in an ordered queue a blocked job keeps its group's place
SELECT queue_create('d.ordered', ordered => true);
SELECT queue_create('d.gate');
SELECT queue_enqueue('d.gate', '{}') AS gate \gset
SELECT queue_enqueue('d.ordered', '{"n": 1}', group_key => 'g', depends_on => ARRAY[:gate]) > 0 AS first;
SELECT queue_enqueue('d.ordered', '{"n": 2}', group_key => 'g') > 0 AS second;
SELECT count(*) AS claimed FROM queue_claim('d.ordered', max_jobs => 10);
SELECT queue_complete(id, lease) FROM queue_claim('d.gate');
SELECT payload FROM queue_claim('d.ordered', max_jobs => 10);
