-- queue 0.2.0 -> 0.3.0 (ALTER EXTENSION queue UPDATE).
--
-- Every 0.2.0 function keeps its name, arguments and C symbol, so the 0.2.0
-- objects call the 0.3.0 library correctly until this has run. What it
-- changes is what 0.3.0's install script has that 0.2.0's had not, written
-- the same way (tests/tests/upgrade.rs compares the result with a fresh
-- install object by object).

-- Every job's identity for ever, its webhook-id (schema.sql). Jobs that
-- exist now get one too; the tables are rewritten once.
ALTER TABLE queue_live ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE queue_done ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE queue_done ALTER COLUMN uid DROP DEFAULT;
ALTER TABLE queue_dead ADD COLUMN uid uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE queue_dead ALTER COLUMN uid DROP DEFAULT;

-- The rotation copies the uid with the job (maintenance.sql).
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
    -- mostly empty pages that a sequential scan (queue_stats) still reads
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
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', source);
        PERFORM nextval('queue_live_generation');
        -- Jobs of queues dropped meanwhile are left behind.
        EXECUTE format($sql$
            INSERT INTO queue_live (slot, queue_id, priority, attempts, id, run_at,
                enqueued_at, lease_expires_at, lease, state, worker, dedup_key,
                last_error, headers, payload, uid)
            SELECT %s, l.queue_id, l.priority, l.attempts, l.id, l.run_at,
                   l.enqueued_at, l.lease_expires_at, l.lease, l.state, l.worker,
                   l.dedup_key, l.last_error, l.headers, l.payload, l.uid
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
