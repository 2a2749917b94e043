-- queue 0.3.0 -> 0.4.0 (ALTER EXTENSION queue UPDATE).
--
-- Every 0.3.0 function keeps its name, arguments and C symbol, so the 0.3.0
-- objects call the 0.4.0 library correctly until this has run. What it
-- changes is what 0.4.0's install script has that 0.3.0's had not, written
-- the same way (tests/tests/upgrade.rs compares the result with a fresh
-- install object by object).

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
-- gave back, shown by queue_jobs and queue_job().
ALTER TABLE queue_done ADD COLUMN result jsonb;

CREATE OR REPLACE VIEW queue_jobs AS
SELECT j.id, q.name AS queue,
       CASE j.state WHEN 'processing' THEN 'processing' ELSE 'pending' END AS status,
       j.payload, j.headers, j.priority, j.attempts, q.max_attempts, j.run_at,
       j.enqueued_at, NULL::timestamptz AS finished_at, j.last_error, j.worker,
       j.lease_expires_at, j.dedup_key, j.group_key, NULL::jsonb AS result
  FROM queue_live j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, j.status, j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, j.result
  FROM queue_done j JOIN queue_queues q ON q.id = j.queue_id
UNION ALL
SELECT j.id, q.name, 'failed', j.payload, j.headers, j.priority, j.attempts,
       q.max_attempts, j.run_at, j.enqueued_at, j.finished_at, j.last_error, j.worker,
       NULL::timestamptz, j.dedup_key, j.group_key, NULL::jsonb
  FROM queue_dead j JOIN queue_queues q ON q.id = j.queue_id;

-- Functions that gain arguments: the old ones are renamed, the new ones
-- made, and what a DBA granted or revoked on an old one is granted or
-- revoked on its new one, then the old ones go. (The privileges the script
-- sets are then forgotten as initial privileges, so that pg_dump keeps
-- dumping them as the DBA's own, as it did before the update.)
ALTER FUNCTION queue_complete(bigint, uuid) RENAME TO queue_complete_0_3_0;
ALTER FUNCTION queue_complete_batch(bigint[], uuid[]) RENAME TO queue_complete_batch_0_3_0;

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
           AND o.proname IN ('queue_complete_0_3_0', 'queue_complete_batch_0_3_0')
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

-- Awaiting a job (docs/waiting.md).
-- (PostgreSQL takes no OUT parameter of a procedure after one with a
-- default: the timeout's default of 30 seconds is the first form)
CREATE PROCEDURE queue_await(id bigint, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
CREATE PROCEDURE queue_await(id bigint, timeout interval, OUT status text, OUT result jsonb)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_await_wrapper';
