-- The histograms' slots and what was dropped, and the spans the workers
-- exported, since the server started (cluster-wide; 0.4, pg_monitor).
SELECT queue_slots, queue_slots_used, observations_dropped, spans_exported, spans_dropped
  FROM queue_metrics_status()
