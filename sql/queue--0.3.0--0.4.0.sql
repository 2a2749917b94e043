-- queue 0.3.0 -> 0.4.0 (ALTER EXTENSION queue UPDATE).
--
-- Every 0.3.0 function keeps its name, arguments and C symbol, so the 0.3.0
-- objects call the 0.4.0 library correctly until this has run. What it
-- changes is what 0.4.0's install script has that 0.3.0's had not, written
-- the same way (tests/tests/upgrade.rs compares the result with a fresh
-- install object by object). Jobs enqueued before keep working as they
-- were: none has parents or children, or a result.

-- A webhook's URL as views show it (queue_stats.sender): 0.4.0 hides the
-- part of its path that may be a secret (webhooks/allow.rs); the webhooks
-- registered before are shown so too. (The function is the library's, for
-- this script only.)
CREATE FUNCTION queue_webhook_shown_0_4_0(url text) RETURNS text
    LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'queue_webhook_shown_wrapper';
UPDATE queue_queues q
   SET sender = 'POST ' || queue_webhook_shown_0_4_0(w.url)
  FROM queue_webhooks w
 WHERE w.queue_id = q.id;
DROP FUNCTION queue_webhook_shown_0_4_0(text);

-- Results (docs/pull.md, "Request and reply"): a succeeded job keeps what it
-- gave back. Dependencies (docs/dependencies.md): a job's parents, how many
-- it still waits for, whether jobs wait for it, and the parent whose
-- failure cancelled it; and the edges between them.
ALTER TABLE queue_live
    ADD COLUMN depends_on bigint[],
    ADD COLUMN waiting_for integer NOT NULL DEFAULT 0,
    ADD COLUMN has_children boolean NOT NULL DEFAULT false;
ALTER TABLE queue_done
    ADD COLUMN result jsonb,
    ADD COLUMN depends_on bigint[],
    ADD COLUMN has_children boolean NOT NULL DEFAULT false,
    ADD COLUMN cancelled_by bigint;
ALTER TABLE queue_dead
    ADD COLUMN depends_on bigint[],
    ADD COLUMN has_children boolean NOT NULL DEFAULT false;
CREATE TABLE queue_edges (
    parent  bigint NOT NULL,
    child   bigint NOT NULL,
    cancels boolean NOT NULL,
    PRIMARY KEY (parent, child)
);
CREATE INDEX queue_edges_child ON queue_edges (child);
SELECT pg_catalog.pg_extension_config_dump('queue_edges', '');
REVOKE ALL ON queue_edges FROM PUBLIC;
-- (jobs without parents are in none of these: nothing to build for them)
CREATE INDEX queue_live_children ON queue_live USING gin (depends_on) WHERE depends_on IS NOT NULL;
CREATE INDEX queue_done_children ON queue_done USING gin (depends_on) WHERE depends_on IS NOT NULL;
CREATE INDEX queue_dead_children ON queue_dead USING gin (depends_on) WHERE depends_on IS NOT NULL;

-- queue_stats counts unfinished jobs from the tallies (`live`, schema.sql),
-- seeded here with the jobs there are: under a lock that waits for every
-- transaction that moves jobs, and keeps new ones out until the update
-- commits, so that no move is counted twice or missed.
LOCK TABLE queue_live, queue_tallies IN EXCLUSIVE MODE;
ALTER TABLE queue_counters ADD COLUMN live bigint NOT NULL DEFAULT 0;
ALTER TABLE queue_tallies ADD COLUMN live bigint NOT NULL DEFAULT 0;
INSERT INTO queue_tallies (queue_id, live)
SELECT queue_id, count(*) FROM queue_live GROUP BY queue_id;
CREATE INDEX queue_live_blocked ON queue_live (queue_id) WHERE state = 'blocked';
-- Upkeep takes a table alone only when that comes at once (maintenance.sql:
-- queue_lock_alone): autovacuum held the worker up for lock_timeout.
-- Whether another session holds `tbl` in a way that a request for it alone
-- would wait out: autovacuum, a prepared transaction, or any transaction
-- open for over 10 ms (statements that enqueue, claim or finish a job, or
-- read queue_stats, and commit take a millisecond or two; a transaction
-- that does more holds its lock until it ends).
CREATE FUNCTION queue_table_busy(tbl regclass) RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, @extschema@, pg_temp
BEGIN ATOMIC
    -- (a transaction reads pg_stat_activity once and keeps what it read:
    -- the live locks would meet the xact_start of earlier transactions)
    SELECT pg_stat_clear_snapshot();
    SELECT EXISTS (SELECT FROM pg_locks l
                     LEFT JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'relation' AND l.relation = tbl
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.pid IS DISTINCT FROM pg_backend_pid() AND l.granted
                      AND (l.pid IS NULL  -- a prepared transaction
                           OR a.backend_type = 'autovacuum worker'
                           OR a.xact_start < clock_timestamp() - interval '10 ms'));
END;

-- Takes `tbl` alone (ACCESS EXCLUSIVE, until the transaction ends) if that
-- comes within 20 ms, and says whether it did. The lock is not even asked
-- for while queue_table_busy() says it would not come: every writer queues
-- behind the request for as long as it waits, and the background worker,
-- whose upkeep asks, delivers nothing meanwhile (autovacuum, which keeps a
-- table for seconds after heavy churn, held both up for lock_timeout each
-- second). The worker's upkeep looks once and comes back later; a `patient`
-- caller (a forced rotation, which a DBA asked for) looks again every 10 ms
-- until its lock_timeout has passed, so that a moment's holder (autovacuum
-- analysing a few rows, a transaction that has not yet committed) does not
-- turn it away, and still never queues for the table.
CREATE FUNCTION queue_lock_alone(tbl regclass, patient boolean DEFAULT false) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    previous text := current_setting('lock_timeout');
    give_up timestamptz := clock_timestamp()
        + CASE WHEN patient THEN previous::interval ELSE interval '0' END;
BEGIN
    LOOP
        IF NOT queue_table_busy(tbl) THEN
            BEGIN
                PERFORM set_config('lock_timeout', '20ms', true);
                EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
                PERFORM set_config('lock_timeout', previous, true);
                RETURN true;
            EXCEPTION WHEN lock_not_available THEN
                NULL;  -- (the block's abort restored lock_timeout)
            END;
        END IF;
        EXIT WHEN clock_timestamp() >= give_up;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN false;
END
$$;

CREATE OR REPLACE FUNCTION queue_fold_tallies() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    alone boolean;
BEGIN
    LOCK TABLE queue_counters IN SHARE ROW EXCLUSIVE MODE;
    alone := queue_lock_alone('queue_tallies');
    -- (each of the first two is skipped whole by its constant condition)
    WITH deleted AS (
        DELETE FROM queue_tallies WHERE NOT alone RETURNING *
    ), read AS (
        SELECT * FROM queue_tallies WHERE alone
    ), gone AS (
        SELECT * FROM deleted UNION ALL SELECT * FROM read
    )
    INSERT INTO queue_counters AS c (queue_id, slot, enqueued_total, succeeded_total,
                                     failed_total, succeeded, cancelled, failed, live)
    SELECT g.queue_id, g.slot, sum(g.enqueued_total), sum(g.succeeded_total),
           sum(g.failed_total), sum(g.succeeded), sum(g.cancelled), sum(g.failed), sum(g.live)
      FROM gone g
     WHERE EXISTS (SELECT FROM queue_queues q WHERE q.id = g.queue_id)
     GROUP BY g.queue_id, g.slot
    ON CONFLICT (queue_id, slot) DO UPDATE
       SET enqueued_total  = c.enqueued_total + excluded.enqueued_total,
           succeeded_total = c.succeeded_total + excluded.succeeded_total,
           failed_total    = c.failed_total + excluded.failed_total,
           succeeded       = c.succeeded + excluded.succeeded,
           cancelled       = c.cancelled + excluded.cancelled,
           failed          = c.failed + excluded.failed,
           live            = c.live + excluded.live;
    IF alone THEN
        TRUNCATE queue_tallies;
    END IF;
    DELETE FROM queue_counters c
     WHERE NOT EXISTS (SELECT FROM queue_queues q WHERE q.id = c.queue_id);
END
$$;

CREATE OR REPLACE FUNCTION queue_expire(chunk bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
SET lock_timeout = '200ms'
AS $$
DECLARE
    budget bigint := chunk;
    removed bigint := 0;
    n bigint;
    part regclass;
    at timestamptz := clock_timestamp();
BEGIN
    IF chunk IS NULL OR chunk < 1 THEN
        RAISE EXCEPTION 'chunk must be at least 1, got %', coalesce(chunk::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM queue_check_read_committed('queue_cleanup');

    FOR i IN 0..queue_history_partitions() - 1 LOOP
        part := format('queue_done_%s', i)::regclass;
        IF queue_done_past_retention(part, at) THEN
            BEGIN
                IF queue_lock_alone(part) AND queue_done_past_retention(part, at) THEN
                    -- Every delta of this partition is committed now: fold
                    -- them, then its retained counts go with its rows.
                    PERFORM queue_fold_tallies();
                    SELECT coalesce(sum(c.succeeded + c.cancelled), 0) INTO n
                      FROM queue_counters c WHERE c.slot = i;
                    UPDATE queue_counters c SET succeeded = 0, cancelled = 0
                     WHERE c.slot = i;
                    EXECUTE format('TRUNCATE %s', part);
                    removed := removed + n;
                    CONTINUE;
                END IF;
            EXCEPTION WHEN lock_not_available THEN
                NULL;  -- in use: delete its expired jobs instead
            END;
        END IF;
        CONTINUE WHEN budget <= 0;
        EXECUTE format($sql$
            WITH gone AS (
                DELETE FROM %1$s d
                 WHERE d.ctid = ANY (ARRAY(
                       SELECT x.ctid
                         FROM queue_queues q
                        CROSS JOIN LATERAL (
                              SELECT ctid FROM %1$s x
                               WHERE x.queue_id = q.id
                                 AND x.finished_at <= $1 - queue_kept_for(q.retention)
                               ORDER BY x.finished_at
                               LIMIT $2) x
                        LIMIT $2))
                RETURNING d.queue_id, d.slot, d.status
            ), tally AS (
                INSERT INTO queue_tallies (queue_id, slot, succeeded, cancelled)
                SELECT queue_id, slot, -count(*) FILTER (WHERE status = 'succeeded'),
                       -count(*) FILTER (WHERE status = 'cancelled')
                  FROM gone GROUP BY queue_id, slot
            )
            SELECT count(*) FROM gone
            $sql$, part) INTO n USING at, budget;
        removed := removed + n;
        budget := budget - n;
    END LOOP;
    -- Last: a fold that empties queue_tallies holds it alone until the
    -- caller commits, and every writer waits that long.
    BEGIN
        PERFORM queue_fold_tallies();
    EXCEPTION WHEN lock_not_available THEN
        NULL;  -- another fold is running; the next call folds
    END;
    RETURN removed;
END
$$;

DROP FUNCTION queue_tallies_busy();

-- A job's result, parents and parents waited for in queue_jobs, the jobs
-- waiting for parents in queue_stats (views.sql).
CREATE OR REPLACE VIEW queue_jobs AS
SELECT j.id, q.name AS queue,
       CASE j.state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       j.payload, j.headers, j.priority, j.attempts, q.max_attempts, j.run_at,
       j.enqueued_at, NULL::timestamptz AS finished_at, j.last_error, j.worker,
       j.lease_expires_at, j.dedup_key, j.group_key, NULL::jsonb AS result, j.depends_on,
       j.waiting_for
  FROM queue_live j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, j.status, j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, j.result, j.depends_on, 0
  FROM queue_done j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, 'failed', j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, NULL::jsonb, j.depends_on, 0
  FROM queue_dead j JOIN queue_queues q ON q.id = j.queue_id;

-- When the oldest due job of queue $1 fell due (queue_stats), without
-- reading the backlog: the older of the first due scheduled job and, in the
-- claim order's index, of the first ready job of each priority and turn (a
-- walk of one probe each: a queue without groups has one turn per
-- priority; past 1,000 of them, every ready job is read). A function of its
-- own, so that the view's plan stays small: the planner prices the walk's
-- fallback as if it always ran, which was enough to make it compile the
-- view with JIT.
CREATE FUNCTION queue_oldest_due(queue_id integer) RETURNS timestamptz
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    walked integer;
    oldest timestamptz;
BEGIN
    WITH RECURSIVE front (priority, turn, run_at) AS (
        (SELECT j.priority, j.turn, j.run_at FROM queue_live j
          WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
          ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
        UNION ALL
        SELECT n.priority, n.turn, n.run_at
          FROM front f
         CROSS JOIN LATERAL (
               -- (the next turn of the priority, else the next priority)
               (SELECT j.priority, j.turn, j.run_at FROM queue_live j
                 WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
                   AND j.priority = f.priority AND j.turn > f.turn
                 ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
               UNION ALL
               (SELECT j.priority, j.turn, j.run_at FROM queue_live j
                 WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready'
                   AND j.priority < f.priority
                 ORDER BY j.priority DESC, j.turn, j.run_at, j.id LIMIT 1)
               LIMIT 1) n
    )
    SELECT count(*), min(w.run_at) INTO walked, oldest FROM (SELECT run_at FROM front LIMIT 1000) w;
    IF walked = 1000 THEN
        SELECT min(j.run_at) INTO oldest FROM queue_live j
         WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'ready';
    END IF;
    RETURN least(oldest, (SELECT min(j.run_at) FROM queue_live j
                           WHERE j.queue_id = queue_oldest_due.queue_id AND j.state = 'scheduled'
                             AND j.run_at <= now()));
END
$$;

CREATE OR REPLACE VIEW queue_stats AS
SELECT q.name AS queue,
       q.paused,
       q.sender,
       coalesce(c.live, 0) - l.processing - l.blocked - l.scheduled AS pending,
       l.scheduled,
       l.processing,
       coalesce(c.succeeded, 0) AS succeeded,
       coalesce(c.failed, 0) AS failed,
       coalesce(c.cancelled, 0) AS cancelled,
       CASE WHEN l.oldest_due IS NOT NULL
            THEN greatest(now() - l.oldest_due, interval '0') END AS oldest_due_age,
       coalesce(c.enqueued_total, 0) AS enqueued_total,
       coalesce(c.succeeded_total, 0) AS succeeded_total,
       coalesce(c.failed_total, 0) AS failed_total,
       l.blocked
  FROM queue_queues q
  CROSS JOIN LATERAL (
        SELECT (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'processing') AS processing,
               (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'blocked') AS blocked,
               (SELECT count(*) FROM queue_live j
                 WHERE j.queue_id = q.id AND j.state = 'scheduled' AND j.run_at > now())
                   AS scheduled,
               queue_oldest_due(q.id) AS oldest_due
       ) l
  LEFT JOIN (
        SELECT queue_id,
               sum(enqueued_total)::bigint AS enqueued_total,
               sum(succeeded_total)::bigint AS succeeded_total,
               sum(failed_total)::bigint AS failed_total,
               sum(succeeded)::bigint AS succeeded,
               sum(cancelled)::bigint AS cancelled,
               sum(failed)::bigint AS failed,
               sum(live)::bigint AS live
          FROM (SELECT queue_id, enqueued_total, succeeded_total, failed_total, succeeded,
                       cancelled, failed, live
                  FROM queue_counters
                UNION ALL
                SELECT queue_id, enqueued_total, succeeded_total, failed_total, succeeded,
                       cancelled, failed, live
                  FROM queue_tallies) t
         GROUP BY queue_id) c ON c.queue_id = q.id
 ORDER BY q.name;
REVOKE ALL ON FUNCTION queue_oldest_due(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION queue_table_busy(regclass), queue_lock_alone(regclass, boolean) FROM PUBLIC;

-- (a row type of its own: the function's argument shares its name with the
-- first column)
CREATE TYPE queue_parent AS (id bigint, queue text, status text, result jsonb);
CREATE FUNCTION queue_parents(id bigint) RETURNS SETOF queue_parent
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF queue_parents.id IS NULL THEN
        RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT p.parent, j.queue, j.status, j.result
      FROM (SELECT c.depends_on FROM queue_jobs c WHERE c.id = queue_parents.id LIMIT 1) c
     CROSS JOIN LATERAL unnest(c.depends_on) WITH ORDINALITY AS p(parent, n)
      LEFT JOIN LATERAL (SELECT j.queue, j.status, j.result FROM queue_jobs j
                          WHERE j.id = p.parent LIMIT 1) j ON true
     ORDER BY p.n;
END
$$;

-- The jobs that depend on one job (their depends_on names it), by id, with
-- their outcomes: found through the children indexes, whatever became of
-- the job's edges.
CREATE FUNCTION queue_children(id bigint) RETURNS SETOF queue_parent
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF queue_children.id IS NULL THEN
        RAISE EXCEPTION 'id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT j.id, j.queue, j.status, j.result
      FROM queue_jobs j
     WHERE j.depends_on @> ARRAY[queue_children.id]
     ORDER BY j.id;
END
$$;

-- The rotation copies a job's dependencies with it (maintenance.sql).
CREATE OR REPLACE FUNCTION queue_rotate_live(force boolean DEFAULT false) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
SET lock_timeout = '200ms'
AS $$
DECLARE
    current_slot integer;
    source regclass;
    dead bigint;
    live bigint;
    row_bytes numeric;
    jobs bigint;
    -- vacuum is held back by a snapshot (looked up once: both rules ask)
    held boolean;
    -- the most jobs a rotation copies while vacuum can clean instead
    copy_limit CONSTANT bigint := 10000;
    -- below this many dead tuples, vacuum keeps up: no rotation for them
    dead_floor CONSTANT bigint := 5000;
    -- under a held snapshot, rotate once the dead pass this times the
    -- square root of the jobs (the cost of stepping over them grows with
    -- the square of the time between rotations)
    held_factor CONSTANT numeric := 40;
    -- a partition this large, and this many times what its jobs need, is
    -- mostly empty pages that a sequential scan (queue_jobs) still reads
    sparse_bytes CONSTANT bigint := 8 * 1024 * 1024;
    sparse_ratio CONSTANT numeric := 4;
BEGIN
    IF force IS NULL THEN
        RAISE EXCEPTION 'force must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM queue_check_read_committed('queue_rotate_live');
    current_slot := (SELECT last_value % 2 FROM queue_live_generation);
    source := format('queue_live_%s', current_slot)::regclass;
    dead := pg_stat_get_dead_tuples(source);
    live := pg_stat_get_live_tuples(source);
    held := NOT force AND queue_cleanup_held_back();
    IF NOT (force OR dead > greatest(dead_floor, live)
            OR (dead > greatest(dead_floor, held_factor * sqrt(live)) AND held))
    THEN
        IF pg_relation_size(source) <= sparse_bytes THEN
            RETURN false;
        END IF;
        EXECUTE format('SELECT avg(pg_column_size(s.*)) FROM (SELECT * FROM %s LIMIT 100) s', source)
           INTO row_bytes;
        IF pg_relation_size(source) <= sparse_ratio * live * coalesce(row_bytes, 0) THEN
            RETURN false;
        END IF;
    END IF;
    IF NOT (force OR held) THEN
        -- The jobs the copy would take (the statistics can be far off),
        -- counted from the newest, since the oldest are mostly finished, up
        -- to one past the limit.
        EXECUTE format('SELECT count(*) FROM (SELECT FROM %s ORDER BY id DESC LIMIT %s) s',
                       source, copy_limit + 1)
           INTO jobs;
        IF jobs > copy_limit THEN
            RETURN false;
        END IF;
    END IF;
    BEGIN
        IF NOT queue_lock_alone(source, patient => force) THEN
            RETURN false;
        END IF;
        PERFORM nextval('queue_live_generation');
        -- Jobs of queues dropped meanwhile are left behind.
        EXECUTE format($sql$
            INSERT INTO queue_live (slot, queue_id, priority, attempts, id, run_at,
                enqueued_at, lease_expires_at, lease, state, worker, dedup_key,
                last_error, headers, payload, uid, group_key, turn, group_counted,
                turn_safe, depends_on, waiting_for, has_children)
            SELECT %s, l.queue_id, l.priority, l.attempts, l.id, l.run_at,
                   l.enqueued_at, l.lease_expires_at, l.lease, l.state, l.worker,
                   l.dedup_key, l.last_error, l.headers, l.payload, l.uid, l.group_key,
                   l.turn, l.group_counted, l.turn_safe, l.depends_on, l.waiting_for,
                   l.has_children
              FROM %s l
             WHERE EXISTS (SELECT FROM queue_queues q WHERE q.id = l.queue_id)
            $sql$, 1 - current_slot, source);
        EXECUTE format('TRUNCATE %s', source);
        RETURN true;
    -- Another upkeep holds the partition (two that both read it and then
    -- both ask for it deadlock; PostgreSQL picks one): skip.
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        RETURN false;
    END;
END
$$;

-- Functions that gain arguments: the old ones are renamed, the new ones
-- made, and what a DBA granted or revoked on an old one is granted or
-- revoked on its new one, then the old ones go. (The privileges the script
-- sets are then forgotten as initial privileges, so that pg_dump keeps
-- dumping them as the DBA's own, as it did before the update.)
ALTER FUNCTION queue_complete(bigint, uuid) RENAME TO queue_complete_0_3_0;
ALTER FUNCTION queue_complete_batch(bigint[], uuid[]) RENAME TO queue_complete_batch_0_3_0;
ALTER FUNCTION queue_enqueue(text, jsonb, interval, integer, text, timestamptz, jsonb, text)
    RENAME TO queue_enqueue_0_3_0;
ALTER FUNCTION queue_enqueue_batch(text, jsonb[], interval, integer, text[], text[])
    RENAME TO queue_enqueue_batch_0_3_0;
ALTER FUNCTION queue_purge(text, text) RENAME TO queue_purge_0_3_0;

CREATE  FUNCTION "queue_complete"(
	"id" bigint, /* Option < i64 > */
	"lease" uuid, /* Option < Uuid > */
	"result" jsonb DEFAULT NULL /* Option < Jsonb > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_complete_wrapper';

CREATE  FUNCTION "queue_complete_batch"(
	"ids" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"leases" uuid[], /* :: std :: option :: Option < Vec < Option < Uuid > > > */
	"results" jsonb[] DEFAULT NULL /* Option < JsonbArray > */
) RETURNS SETOF bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_complete_batch_wrapper';

CREATE  FUNCTION "queue_enqueue"(
	"queue" TEXT, /* Option < & str > */
	"payload" jsonb, /* Option < Jsonb > */
	"delay" interval DEFAULT '0', /* Option < Interval > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"dedup_key" TEXT DEFAULT NULL, /* Option < & str > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"headers" jsonb DEFAULT NULL, /* Option < Jsonb > */
	"group_key" TEXT DEFAULT NULL, /* Option < & str > */
	"depends_on" bigint[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"on_parent_failure" TEXT DEFAULT 'cancel' /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_enqueue_wrapper';

CREATE  FUNCTION "queue_enqueue_batch"(
	"queue" TEXT, /* Option < & str > */
	"payloads" jsonb[], /* Option < JsonbArray > */
	"delay" interval DEFAULT '0', /* Option < Interval > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"group_keys" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"dedup_keys" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < String > > > */
	"depends_on" bigint[] DEFAULT NULL, /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"on_parent_failure" TEXT DEFAULT 'cancel' /* Option < & str > */
) RETURNS SETOF bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_enqueue_batch_wrapper';

CREATE  FUNCTION "queue_purge"(
	"queue" TEXT, /* Option < & str > */
	"status" TEXT DEFAULT NULL, /* Option < & str > */
	"ids" bigint[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < i64 > > > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_purge_wrapper';

DO $$
DECLARE
    f record;
    g record;
BEGIN
    FOR f IN
        SELECT o.oid::regprocedure AS old, n.oid::regprocedure AS new, o.proacl
          FROM pg_catalog.pg_proc o
          JOIN pg_catalog.pg_proc n
            ON n.pronamespace = o.pronamespace
           AND n.proname = pg_catalog.left(o.proname, -6)
         WHERE o.pronamespace = '@extschema@'::regnamespace
           AND o.proname IN ('queue_complete_0_3_0', 'queue_complete_batch_0_3_0',
                             'queue_enqueue_0_3_0', 'queue_enqueue_batch_0_3_0',
                             'queue_purge_0_3_0')
           AND o.proacl IS NOT NULL
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.new);
        FOR g IN SELECT a.grantee, a.is_grantable FROM pg_catalog.aclexplode(f.proacl) a
                  WHERE a.privilege_type = 'EXECUTE'
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', f.new,
                CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                     ELSE g.grantee::regrole::text END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs
         WHERE classoid = 'pg_catalog.pg_proc'::regclass AND objoid = f.new;
    END LOOP;
END
$$;

DROP FUNCTION queue_complete_0_3_0(bigint, uuid);
DROP FUNCTION queue_complete_batch_0_3_0(bigint[], uuid[]);
DROP FUNCTION queue_enqueue_0_3_0(text, jsonb, interval, integer, text, timestamptz, jsonb, text);
DROP FUNCTION queue_enqueue_batch_0_3_0(text, jsonb[], interval, integer, text[], text[]);
DROP FUNCTION queue_purge_0_3_0(text, text);

-- Leases that say when their claim was made, and the latency histograms
-- (docs/operations.md, "Metrics and traces").
CREATE  FUNCTION "queue_lease"(
	"at" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS uuid /* Uuid */
VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_lease_wrapper';
CREATE  FUNCTION "queue_latency_histograms"() RETURNS TABLE (
	"queue_id" INT,  /* i32 */
	"kind" TEXT,  /* String */
	"outcome" TEXT,  /* Option < String > */
	"le" double precision[],  /* Vec < f64 > */
	"counts" bigint[],  /* Vec < i64 > */
	"sum_seconds" double precision,  /* f64 */
	"count" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_latency_histograms_wrapper';
CREATE  FUNCTION "queue_metrics_status"() RETURNS TABLE (
	"queue_slots" INT,  /* i32 */
	"queue_slots_used" INT,  /* i32 */
	"observations_dropped" bigint,  /* i64 */
	"spans_exported" bigint,  /* i64 */
	"spans_dropped" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_metrics_status_wrapper';
-- How long this database's jobs waited (due until claimed) and ran
-- (claimed until their attempt ended, by outcome), per queue, since the
-- server started: histograms kept in shared memory by the commits that
-- claim and end jobs (src/metrics). Bucket bounds in seconds, the last
-- +Inf; counts cumulative, as Prometheus writes them. Empty without the
-- preload.
CREATE VIEW queue_latency AS
SELECT q.name AS queue, h.kind, h.outcome, h.le, h.counts, h.sum_seconds, h.count
  FROM queue_latency_histograms() h
  JOIN queue_queues q ON q.id = h.queue_id;
REVOKE ALL ON queue_latency FROM PUBLIC;
GRANT SELECT ON queue_latency TO pg_monitor;
REVOKE ALL ON FUNCTION queue_latency_histograms(), queue_metrics_status(), queue_lease(timestamptz)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION queue_latency_histograms(), queue_metrics_status(), queue_oldest_due(integer)
    TO pg_monitor;

-- Awaiting a job (docs/waiting.md).
-- (PostgreSQL takes no OUT parameter of a procedure after one with a
-- default: the timeout's default of 30 seconds is the first form)
CREATE PROCEDURE queue_await(id bigint, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
CREATE PROCEDURE queue_await(id bigint, timeout interval, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
