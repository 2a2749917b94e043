-- Backends cache the queues that enqueues and claims look up; any write to
-- queue_queues, by the API or by hand, makes every backend forget them.
CREATE FUNCTION queue_queues_trigger() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    PERFORM queue_queues_changed();
    RETURN NULL;
END
$$;
CREATE TRIGGER queue_queues_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON queue_queues
    FOR EACH STATEMENT EXECUTE FUNCTION queue_queues_trigger();
