#!/usr/bin/env bash
# The measurement behind the claim index (docs/storage.md): with
# jobs in flight, does a claim of 100 stay O(batch)?
#   A: claims update only unindexed columns (HOT), so the claim index keeps
#      the jobs in flight and every claim walks past them;
#   B: the claim index covers ready jobs only (a partial index on state), so
#      a claim moves its jobs out of it (not HOT).
# Plain tables shaped like queue_live, 200,000 ready jobs, 300 claims of 100
# that are never completed; prints the latency of every 50th claim.
#   bench/claim_design.sh     (PostgreSQL 15 binaries; no extension needed)
. "$(dirname "$0")/common.sh"

# the extension is not needed here
QUEUE_PRELOAD= cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-claim-design}" "${QUEUE_BENCH_PORT:-54331}"
workdir queue-claim-design-scripts
export PGOPTIONS="-c jit=off -c client_min_messages=warning"

run() {
    local name=$1 index=$2 filter=$3
    sql <<SQL
DROP TABLE IF EXISTS jobs;
CREATE TABLE jobs (queue_id int NOT NULL, priority int NOT NULL, id bigint NOT NULL,
    run_at timestamptz NOT NULL, state text NOT NULL, attempts int NOT NULL DEFAULT 0,
    lease uuid, lease_expires_at timestamptz, payload jsonb NOT NULL) WITH (fillfactor = 80);
CREATE INDEX ON jobs (id);
$index;
INSERT INTO jobs (queue_id, priority, id, run_at, state, payload)
SELECT 1, 0, i, now(), 'ready', '{"n": 1}' FROM generate_series(1, 200000) i;
VACUUM ANALYZE jobs;
SQL
    cat > "$WORK/claim.sql" <<SQL
WITH picked AS (SELECT id FROM jobs WHERE queue_id = 1 AND $filter
                 ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET state = 'processing', attempts = attempts + 1, lease = gen_random_uuid(),
       lease_expires_at = now() + interval '5 minutes'
  FROM picked WHERE j.id = picked.id;
SQL
    rm -f "$WORK"/lat*
    pgb -c 1 -t 300 -f claim.sql -l --log-prefix=lat >/dev/null
    local hot
    hot=$(sql -c "SELECT round(100.0 * n_tup_hot_upd / greatest(n_tup_upd, 1)) FROM pg_stat_user_tables WHERE relname = 'jobs'")
    printf "| %s |" "$name"
    awk 'NR % 50 == 0 { printf " %.1f |", $3 / 1000 }' "$WORK"/lat*
    printf " %s%% |\n" "$hot"
}

echo "Claim latency (ms) by jobs in flight; last column: share of HOT updates"
echo
echo "| design | 5,000 | 10,000 | 15,000 | 20,000 | 25,000 | 30,000 | HOT |"
echo "|---|---|---|---|---|---|---|---|"
run "A: HOT claim, in-flight jobs stay in the claim index" \
    "CREATE INDEX ON jobs (queue_id, priority DESC, run_at, id)" \
    "(state = 'ready' OR lease_expires_at < now())"
run "B: claim index on ready jobs only" \
    "CREATE INDEX ON jobs (queue_id, priority DESC, run_at, id) WHERE state = 'ready'" \
    "state = 'ready'"
