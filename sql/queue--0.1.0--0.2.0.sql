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
    WHILE queue_bury_expired() > 0 LOOP
    END LOOP;
    live_rotated := queue_rotate_live(force);
    cleaned := queue_cleanup();
    RETURN NEXT;
END
$$;

-- (grants.sql)
REVOKE ALL ON FUNCTION queue_bury_expired() FROM PUBLIC;
