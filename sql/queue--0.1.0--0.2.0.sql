-- queue 0.1.0 -> 0.2.0 (ALTER EXTENSION queue UPDATE).
--
-- Every 0.1.0 function keeps its name, arguments and C symbol, so the 0.1.0
-- objects call the 0.2.0 library correctly until this has run. What it
-- changes is what 0.2.0's install script has that 0.1.0's had not, written
-- the same way (tests/tests/upgrade.rs compares the result with a fresh
-- install object by object).

-- CREATE EXTENSION takes the comment from the control file, which 0.1.0 left
-- at pgrx's placeholder; an update does not read it again.
COMMENT ON EXTENSION queue IS 'A durable job and event queue: enqueue, claim and retry with leases, dead letters, and push delivery by a background worker';

-- The expired-lease text, once for the claim and the upkeep (schema.sql).
CREATE FUNCTION queue_lease_expired_error(attempts integer, max_attempts integer, worker text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN pg_catalog.format('lease expired during attempt %s of %s%s', attempts, max_attempts,
                         ' (worker ' || worker || ')');

-- The worker's burial of expired leases, now also run by queue_maintain()
-- (src/api/upkeep.rs; as pgrx declares it).
CREATE  FUNCTION "queue_bury_expired"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_bury_expired_wrapper';

-- HTTP delivery: the webhooks of queues (schema.sql), and their registration
-- (src/api/webhooks.rs; as pgrx declares it).
CREATE TABLE queue_webhooks (
    queue_id      integer PRIMARY KEY REFERENCES queue_queues (id) ON DELETE CASCADE,
    url           text NOT NULL,
    headers       jsonb NOT NULL,
    timeout       interval NOT NULL,
    secret        text,
    max_in_flight integer NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('queue_webhooks', '');
REVOKE ALL ON queue_webhooks FROM PUBLIC;
CREATE  FUNCTION "queue_register_webhook"(
	"queue" TEXT, /* Option < & str > */
	"url" TEXT, /* Option < & str > */
	"headers" jsonb DEFAULT NULL, /* Option < JsonB > */
	"timeout" interval DEFAULT '30 seconds', /* Option < Interval > */
	"secret" TEXT DEFAULT NULL, /* Option < & str > */
	"max_in_flight" INT DEFAULT 16 /* Option < i32 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_register_webhook_wrapper';

-- How many wake-ups commits have sent to running workers (src/api/workers.rs;
-- as pgrx declares it).
CREATE  FUNCTION "queue_wakes_sent"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_wakes_sent_wrapper';

-- (maintenance.sql)
CREATE OR REPLACE FUNCTION queue_maintain(force boolean DEFAULT false)
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

-- (grants.sql)
REVOKE ALL ON FUNCTION queue_bury_expired(), queue_wakes_sent() FROM PUBLIC;

-- The partitions of queue_done and the cap on retention, named once
-- (schema.sql), and the functions that use them (schema.sql,
-- maintenance.sql).

CREATE FUNCTION queue_history_partitions() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 8;


CREATE FUNCTION queue_kept_for(retention interval) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN least(retention, interval '1000 years');


CREATE OR REPLACE FUNCTION queue_done_slot(expires timestamptz) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((pg_catalog.floor(EXTRACT(epoch FROM expires - timestamptz '1970-01-01 00:00:00+00') / 14400)::bigint
         % queue_history_partitions() + queue_history_partitions()) % queue_history_partitions())::smallint;


-- (renamed: "expired" is for leases alone)
DROP FUNCTION queue_done_expired(regclass, timestamptz);
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
                EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
                IF queue_done_past_retention(part, at) THEN
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
                last_error, headers, payload)
            SELECT %s, l.queue_id, l.priority, l.attempts, l.id, l.run_at,
                   l.enqueued_at, l.lease_expires_at, l.lease, l.state, l.worker,
                   l.dedup_key, l.last_error, l.headers, l.payload
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

-- (grants.sql)
REVOKE ALL ON FUNCTION queue_done_past_retention(regclass, timestamptz) FROM PUBLIC;
