-- Storage maintenance: rotates the ring of live partitions when dead tuples
-- have piled up in the current one, and empties each partition of finished
-- jobs once all of its jobs are past their retention. It never waits long
-- for a lock (lock_timeout) and skips what it cannot lock; run it again
-- later. Call it every few seconds; force rotates the live ring regardless.
CREATE FUNCTION queue_maintain(force boolean DEFAULT false)
RETURNS TABLE (live_rotated boolean, done_emptied integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
SET lock_timeout = '200ms'
AS $$
DECLARE
    current_slot integer;
    source regclass;
    part regclass;
    newest timestamptz;
BEGIN
    IF force IS NULL THEN
        RAISE EXCEPTION 'force must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Rotation copies the rows it can see and then truncates: only safe when
    -- every statement sees everything committed before it.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'queue_maintain() must run at isolation level READ COMMITTED, not %',
                        upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'Call it in a transaction of its own.';
    END IF;
    live_rotated := false;
    done_emptied := 0;

    -- The live ring: new jobs go to the slot the generation counter names.
    -- Once the dead tuples in it outnumber the jobs it holds (and a floor),
    -- copying those jobs to the other slot and truncating this one costs
    -- less than keeping it: claims stop wading through dead index entries,
    -- and the space comes back even if a snapshot pins the dead tuples.
    current_slot := (SELECT last_value % 2 FROM queue_live_generation);
    source := format('queue_live_%s', current_slot)::regclass;
    IF force OR pg_stat_get_dead_tuples(source)
                > greatest(5000, pg_stat_get_live_tuples(source)) THEN
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
            live_rotated := true;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END IF;

    -- The done ring: a partition whose newest expiry has passed holds
    -- nothing worth keeping.
    FOR slot IN 0..7 LOOP
        part := format('queue_done_%s', slot)::regclass;
        EXECUTE format('SELECT max(expires_at) FROM %s', part) INTO newest;
        CONTINUE WHEN newest IS NULL OR newest > clock_timestamp();
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
            EXECUTE format('SELECT max(expires_at) FROM %s', part) INTO newest;
            IF newest <= clock_timestamp() THEN
                EXECUTE format('TRUNCATE %s', part);
                done_emptied := done_emptied + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
    END LOOP;
    RETURN NEXT;
END
$$;
