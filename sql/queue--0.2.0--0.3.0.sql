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

-- Groups, order and limits (docs/groups.md): a queue's options, a job's
-- group and turn (every job there is now has none, and turn 0: the claim
-- order stays as it was), the indexes that find a group's jobs, and the
-- claims that rate limits count.
ALTER TABLE queue_queues
    ADD COLUMN ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN max_in_flight integer,
    ADD COLUMN group_max_in_flight integer,
    ADD COLUMN rate_limit integer,
    ADD COLUMN rate_window interval,
    ADD COLUMN group_rate_limit integer,
    ADD COLUMN group_rate_window interval;
ALTER TABLE queue_live
    ADD COLUMN group_key text,
    ADD COLUMN turn bigint NOT NULL DEFAULT 0,
    ADD COLUMN group_counted boolean NOT NULL DEFAULT false,
    ADD COLUMN turn_safe boolean NOT NULL DEFAULT false;
ALTER TABLE queue_done ADD COLUMN group_key text;
ALTER TABLE queue_dead ADD COLUMN group_key text;
DROP INDEX queue_live_ready;
CREATE INDEX queue_live_ready ON queue_live (queue_id, priority DESC, turn, run_at, id)
    WHERE state = 'ready';
CREATE INDEX queue_live_group ON queue_live (queue_id, group_key, id)
    WHERE group_key IS NOT NULL AND state <> 'processing';
CREATE INDEX queue_live_group_busy ON queue_live (queue_id, group_key, id)
    WHERE state = 'processing' AND group_counted;
CREATE TABLE queue_claims (
    queue_id   integer NOT NULL,
    group_key  text,
    claimed_at timestamptz NOT NULL,
    jobs       integer NOT NULL
);
CREATE INDEX queue_claims_window ON queue_claims (queue_id, group_key, claimed_at);
CREATE INDEX queue_claims_age ON queue_claims (queue_id, claimed_at);
SELECT pg_catalog.pg_extension_config_dump('queue_claims', '');
REVOKE ALL ON queue_claims FROM PUBLIC;

-- A job's group in queue_jobs (views.sql).
CREATE OR REPLACE VIEW queue_jobs AS
SELECT j.id, q.name AS queue,
       CASE j.state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       j.payload, j.headers, j.priority, j.attempts, q.max_attempts, j.run_at,
       j.enqueued_at, NULL::timestamptz AS finished_at, j.last_error, j.worker,
       j.lease_expires_at, j.dedup_key, j.group_key
  FROM queue_live j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, j.status, j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key
  FROM queue_done j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, 'failed', j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key
  FROM queue_dead j JOIN queue_queues q ON q.id = j.queue_id;

-- Four functions gain arguments: the old ones are renamed, the new ones
-- made, and what a DBA granted or revoked on an old one is granted or
-- revoked on its new one, then the old ones go. (The privileges the script
-- sets are then forgotten as initial privileges, so that pg_dump keeps
-- dumping them as the DBA's own, as it did before the update.)
ALTER FUNCTION queue_create(text, integer, text, interval, interval, interval, interval)
    RENAME TO queue_create_0_2_0;
ALTER FUNCTION queue_alter(text, integer, text, interval, interval, interval, interval)
    RENAME TO queue_alter_0_2_0;
ALTER FUNCTION queue_enqueue(text, jsonb, interval, integer, text, timestamptz, jsonb)
    RENAME TO queue_enqueue_0_2_0;
ALTER FUNCTION queue_enqueue_batch(text, jsonb[], interval, integer)
    RENAME TO queue_enqueue_batch_0_2_0;

CREATE  FUNCTION "queue_create"(
	"queue" TEXT, /* Option < & str > */
	"max_attempts" INT DEFAULT 5, /* Option < i32 > */
	"backoff" TEXT DEFAULT 'exponential', /* Option < & str > */
	"retry_delay" interval DEFAULT '1 second', /* Option < Interval > */
	"max_retry_delay" interval DEFAULT '1 hour', /* Option < Interval > */
	"lease" interval DEFAULT '5 minutes', /* Option < Interval > */
	"retention" interval DEFAULT '1 day', /* Option < Interval > */
	"ordered" bool DEFAULT false, /* Option < bool > */
	"max_in_flight" INT DEFAULT NULL, /* Option < i32 > */
	"group_max_in_flight" INT DEFAULT NULL, /* Option < i32 > */
	"rate_limit" TEXT DEFAULT NULL, /* Option < & str > */
	"group_rate_limit" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_create_wrapper';

CREATE  FUNCTION "queue_alter"(
	"queue" TEXT, /* Option < & str > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"backoff" TEXT DEFAULT NULL, /* Option < & str > */
	"retry_delay" interval DEFAULT NULL, /* Option < Interval > */
	"max_retry_delay" interval DEFAULT NULL, /* Option < Interval > */
	"lease" interval DEFAULT NULL, /* Option < Interval > */
	"retention" interval DEFAULT NULL, /* Option < Interval > */
	"ordered" bool DEFAULT NULL, /* Option < bool > */
	"max_in_flight" INT DEFAULT NULL, /* Option < i32 > */
	"group_max_in_flight" INT DEFAULT NULL, /* Option < i32 > */
	"rate_limit" TEXT DEFAULT NULL, /* Option < & str > */
	"group_rate_limit" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_alter_wrapper';

CREATE  FUNCTION "queue_enqueue"(
	"queue" TEXT, /* Option < & str > */
	"payload" jsonb, /* Option < Jsonb > */
	"delay" interval DEFAULT '0', /* Option < Interval > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"dedup_key" TEXT DEFAULT NULL, /* Option < & str > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"headers" jsonb DEFAULT NULL, /* Option < Jsonb > */
	"group_key" TEXT DEFAULT NULL /* Option < & str > */
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
	"dedup_keys" TEXT[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS SETOF bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_enqueue_batch_wrapper';

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
           AND o.proname IN ('queue_create_0_2_0', 'queue_alter_0_2_0', 'queue_enqueue_0_2_0',
                             'queue_enqueue_batch_0_2_0')
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

DROP FUNCTION queue_create_0_2_0(text, integer, text, interval, interval, interval, interval);
DROP FUNCTION queue_alter_0_2_0(text, integer, text, interval, interval, interval, interval);
DROP FUNCTION queue_enqueue_0_2_0(text, jsonb, interval, integer, text, timestamptz, jsonb);
DROP FUNCTION queue_enqueue_batch_0_2_0(text, jsonb[], interval, integer);

CREATE  FUNCTION "queue_groups"(
	"queue" TEXT /* Option < & str > */
) RETURNS TABLE (
	"group_key" TEXT,  /* String */
	"pending" bigint,  /* i64 */
	"processing" bigint,  /* i64 */
	"oldest_due_age" interval,  /* Option < Interval > */
	"head_id" bigint  /* Option < i64 > */
)
STABLE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_groups_wrapper';

-- The rotation copies the uid, the group, the turn and whether the job
-- counts in its group's jobs in flight with the job (maintenance.sql).
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
                last_error, headers, payload, uid, group_key, turn, group_counted,
                turn_safe)
            SELECT %s, l.queue_id, l.priority, l.attempts, l.id, l.run_at,
                   l.enqueued_at, l.lease_expires_at, l.lease, l.state, l.worker,
                   l.dedup_key, l.last_error, l.headers, l.payload, l.uid, l.group_key,
                   l.turn, l.group_counted, l.turn_safe
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

-- Schedules (docs/schedules.md): each tick of `cron` on the wall clock of
-- `time_zone` enqueues one job. next_run_at is the first tick not dealt
-- with yet; a tick's job and the schedule's advance past it commit in one
-- transaction, so no tick gets two jobs or none. Ticks before
-- missed_before (when a paused schedule was resumed) are missed ones, for
-- catch_up. The queue cannot go while a schedule names it (queue_drop's
-- force removes the schedules first).
CREATE TABLE queue_recurring (
    name          text PRIMARY KEY,
    queue_id      integer NOT NULL REFERENCES queue_queues (id),
    cron          text NOT NULL,
    time_zone     text NOT NULL,
    payload       jsonb NOT NULL,
    headers       jsonb,
    priority      integer NOT NULL,
    group_key     text,
    catch_up      text NOT NULL CHECK (catch_up IN ('none', 'one', 'all')),
    no_overlap    boolean NOT NULL,
    paused        boolean NOT NULL,
    owner         regrole NOT NULL,
    next_run_at   timestamptz,
    missed_before timestamptz NOT NULL,
    last_run_at   timestamptz,
    last_job_id   bigint,
    runs_total    bigint NOT NULL DEFAULT 0,
    skipped_total bigint NOT NULL DEFAULT 0
);
CREATE INDEX queue_recurring_due ON queue_recurring (next_run_at) WHERE NOT paused;
CREATE INDEX queue_recurring_queue ON queue_recurring (queue_id);
SELECT pg_catalog.pg_extension_config_dump('queue_recurring', '');
REVOKE ALL ON queue_recurring FROM PUBLIC;

-- The schedules of this database (docs/schedules.md).
CREATE VIEW queue_schedules AS
SELECT s.name, q.name AS queue, s.cron, s.time_zone, s.paused, s.catch_up, s.no_overlap,
       s.next_run_at, s.last_run_at, s.last_job_id, s.runs_total, s.skipped_total, s.owner
  FROM queue_recurring s JOIN queue_queues q ON q.id = s.queue_id;
REVOKE ALL ON queue_schedules FROM PUBLIC;
GRANT SELECT ON queue_schedules TO pg_monitor;

-- The schedule functions (src/api/schedules.rs).
CREATE  FUNCTION "queue_schedule"(
	"name" TEXT, /* Option < & str > */
	"queue" TEXT, /* Option < & str > */
	"cron" TEXT, /* Option < & str > */
	"payload" jsonb DEFAULT '{}', /* Option < Jsonb > */
	"headers" jsonb DEFAULT NULL, /* Option < Jsonb > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"group_key" TEXT DEFAULT NULL, /* Option < & str > */
	"time_zone" TEXT DEFAULT 'UTC', /* Option < & str > */
	"catch_up" TEXT DEFAULT 'one', /* Option < & str > */
	"no_overlap" bool DEFAULT false, /* Option < bool > */
	"paused" bool DEFAULT false /* Option < bool > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_schedule_wrapper';

CREATE  FUNCTION "queue_unschedule"(
	"name" TEXT /* Option < & str > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_unschedule_wrapper';

CREATE  FUNCTION "queue_run_schedule"(
	"name" TEXT /* Option < & str > */
) RETURNS bigint /* i64 */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_run_schedule_wrapper';

-- (PostgreSQL takes no OUT parameter of a procedure after one with a
-- default: the timeout's default of 30 seconds is the first form)
CREATE PROCEDURE queue_wait(queue text, OUT ready boolean)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_wait_wrapper';
CREATE PROCEDURE queue_wait(queue text, timeout interval, OUT ready boolean)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_wait_wrapper';

CREATE  FUNCTION "queue_schedule_ticks"(
	"cron" TEXT, /* Option < & str > */
	"time_zone" TEXT DEFAULT 'UTC', /* Option < & str > */
	"after" timestamp with time zone DEFAULT now(), /* Option < TimestampWithTimeZone > */
	"count" INT DEFAULT 5 /* Option < i32 > */
) RETURNS SETOF timestamp with time zone /* TimestampWithTimeZone */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_schedule_ticks_wrapper';
