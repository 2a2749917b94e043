-- Storage upkeep. The background worker runs these; until it serves a
-- database, call queue_maintain() every few seconds (from pg_cron, say).
-- Both refuse to run at REPEATABLE READ or SERIALIZABLE: they copy or check
-- what they see and then truncate, which is only safe when every statement
-- sees everything committed before it.

CREATE FUNCTION queue_check_read_committed(caller text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION '%() must run at isolation level READ COMMITTED, not %',
                        caller, upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'Call it in a transaction of its own.';
    END IF;
END
$$;

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

-- Folds the deltas in queue_tallies into queue_counters, and forgets the
-- counters of dropped queues. One fold at a time (the lock is held until
-- the caller's transaction ends).
--
-- When queue_tallies can be had alone (queue_lock_alone), the folded
-- deltas go with TRUNCATE, which leaves no dead rows: otherwise every fold
-- would add a dead row per statement since the last one, which a snapshot
-- held open would keep from vacuum. Else they are deleted, as any MVCC
-- reader expects.
CREATE FUNCTION queue_fold_tallies() RETURNS void
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

-- Whether every job in the queue_done partition `part` is past its queue's
-- retention at `at` (jobs of dropped queues count as past it), and there
-- is at least one. One index probe per queue.
CREATE FUNCTION queue_done_past_retention(part regclass, at timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    expired boolean;
BEGIN
    EXECUTE format($sql$
        SELECT EXISTS (SELECT FROM %1$s)
           AND NOT EXISTS (
               SELECT FROM queue_queues q
                WHERE EXISTS (SELECT FROM %1$s d
                               WHERE d.queue_id = q.id
                                 AND d.finished_at > $1 - queue_kept_for(q.retention)))
        $sql$, part) INTO expired USING at;
    RETURN expired;
END
$$;

-- Removes succeeded and cancelled jobs past their queue's retention and
-- returns how many. A partition of queue_done whose jobs have all expired is
-- emptied at once with TRUNCATE (if it can be had alone: queue_lock_alone);
-- other expired jobs are deleted, at most `chunk` per call, so that no call
-- holds a long transaction. Failed jobs stay. queue_cleanup() is this with
-- the chunk the documentation gives.
CREATE FUNCTION queue_expire(chunk bigint) RETURNS bigint
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

-- Call it until it returns 0; the background worker does.
CREATE FUNCTION queue_cleanup() RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
RETURN queue_expire(10000);

-- Whether a transaction of this database has kept a snapshot open for more
-- than 10 seconds: until it ends, no dead tuple that it might see can be
-- removed by vacuum, nor its index entry marked dead by the scans that step
-- over it. (Vacuum itself is left out: its snapshot holds nothing back.)
-- Shorter ones, such as a batch statement of a few seconds, are left to
-- vacuum, which catches up as soon as they end.
CREATE FUNCTION queue_cleanup_held_back() RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
RETURN EXISTS (SELECT FROM pg_stat_activity a
                WHERE a.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND a.backend_xmin IS NOT NULL
                  AND a.pid <> pg_backend_pid()
                  AND a.backend_type <> 'autovacuum worker'
                  AND a.xact_start < clock_timestamp() - interval '10 seconds');

-- Rotates the live ring when that costs less than keeping the current
-- partition (force: regardless), and says whether it did. New jobs go to
-- the slot the generation counter names; rotating copies the jobs of that
-- slot to the other one and truncates it, which gives back the space of
-- its dead tuples even while a snapshot pins them, and leaves claims no
-- dead index entries to step over. When to rotate:
--
-- - the dead tuples outnumber the jobs it holds (and a floor): vacuum is
--   behind, and copying the jobs costs less than what claims pay for the
--   dead ones;
-- - a snapshot held open keeps the dead tuples, and their index entries,
--   from being cleaned at all. Every claim then steps over the entries of
--   every job claimed since the last rotation, a cost that grows with the
--   square of the time between rotations, while a rotation costs a copy of
--   the jobs waiting: rotating once the dead tuples pass 40 times the
--   square root of the jobs (and a floor) keeps both small;
-- - vacuum removed the dead tuples but left mostly empty pages, which a
--   sequential scan (queue_jobs) still reads: over 8 MB and four times
--   what its jobs need.
--
-- The copy stalls claims and completions while it runs (about 8 us a job:
-- 1.8 s for 230,000). Past 10,000 jobs it is left to vacuum, unless a
-- snapshot is held: then vacuum cannot clean, and claims that step over
-- ever more dead entries cost more than the stall.
--
-- It never waits long for a lock, and skips the rotation when another
-- upkeep holds the partition. queue_maintain() calls it; the worker also
-- does every second while cleanup is held back.
CREATE FUNCTION queue_rotate_live(force boolean DEFAULT false) RETURNS boolean
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

-- All of the upkeep in one call, the same the background worker does: buries
-- in-flight jobs whose lease expired with no attempt left (in every queue,
-- pull queues too: queue_bury_expired), rotates the ring of live partitions
-- when that is due (force: regardless; see queue_rotate_live), then runs
-- queue_cleanup() once. It never waits long for a lock (lock_timeout) and
-- skips what it cannot lock; run it again later.
CREATE FUNCTION queue_maintain(force boolean DEFAULT false)
RETURNS TABLE (live_rotated boolean, cleaned bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
SET lock_timeout = '200ms'
AS $$
BEGIN
    IF force IS NULL THEN
        RAISE EXCEPTION 'force must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM queue_check_read_committed('queue_maintain');
    -- Each step skips when another upkeep holds what it needs past
    -- lock_timeout (a rotation keeps its partition locked until its caller
    -- commits): the next call does it.
    BEGIN
        WHILE queue_bury_expired() > 0 LOOP
        END LOOP;
    EXCEPTION WHEN lock_not_available THEN
        NULL;
    END;
    BEGIN
        live_rotated := queue_rotate_live(force);
    EXCEPTION WHEN lock_not_available THEN
        live_rotated := false;
    END;
    BEGIN
        cleaned := queue_cleanup();
    EXCEPTION WHEN lock_not_available THEN
        cleaned := 0;
    END;
    RETURN NEXT;
END
$$;
