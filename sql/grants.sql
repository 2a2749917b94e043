-- The tables belong to the extension owner alone: the API functions reach
-- them as that owner, so no one can forge a job's state. DBAs read the views.
REVOKE ALL ON queue_queues, queue_webhooks, queue_live, queue_live_0, queue_live_1, queue_done,
    queue_dead, queue_counters, queue_tallies, queue_claims, queue_recurring, queue_edges FROM PUBLIC;
DO $$
BEGIN
    FOR i IN 0..queue_history_partitions() - 1 LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON queue_done_%s FROM PUBLIC', i);
    END LOOP;
END
$$;
REVOKE ALL ON SEQUENCE queue_queue_id_seq, queue_job_id_seq, queue_live_generation FROM PUBLIC;
REVOKE ALL ON queue_jobs, queue_stats, queue_failed, queue_workers, queue_schedules, queue_latency
    FROM PUBLIC;
GRANT SELECT ON queue_jobs, queue_stats, queue_failed, queue_workers, queue_schedules, queue_latency
    TO pg_monitor;

-- Storage upkeep takes strong locks: only the owner, and whom the owner
-- grants it to, may run it. The helpers are its parts.
REVOKE ALL ON FUNCTION queue_maintain(boolean), queue_bury_expired(), queue_cleanup(), queue_expire(bigint),
    queue_fold_tallies(), queue_table_busy(regclass), queue_lock_alone(regclass, boolean), queue_rotate_live(boolean), queue_cleanup_held_back(),
    queue_done_past_retention(regclass, timestamptz), queue_check_read_committed(text) FROM PUBLIC;

-- What the workers show of themselves is for monitoring roles (through
-- queue_workers); registering a database is CREATE EXTENSION's business.
-- (A view calls its functions with the reader's privileges.)
REVOKE ALL ON FUNCTION queue_worker_status(), queue_wake_latencies(), queue_wakes_sent(),
    queue_register_database(), queue_queues_changed(), queue_queues_trigger() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION queue_worker_status() TO pg_monitor;

-- The latency histograms likewise (through queue_latency); a lease is made
-- by the claim statements, which run as the owner.
REVOKE ALL ON FUNCTION queue_latency_histograms(), queue_metrics_status(), queue_lease(timestamptz),
    queue_oldest_due(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION queue_latency_histograms(), queue_metrics_status(), queue_oldest_due(integer)
    TO pg_monitor;
