#!/usr/bin/env bash
# How long queue-web's cluster page takes to load for a cluster of many
# tenant databases with a large backlog each (make bench-web; about 5 min).
#
# Builds one tenant database with BENCH_WEB_JOBS unfinished jobs (90% due,
# 10% scheduled for later: all of them in the live table that queue_stats
# counts, the page's most expensive case), copies it to BENCH_WEB_TENANTS
# databases in all, starts queue-web (the release build) against the
# cluster, loads the cluster page once to open its connections, then
# BENCH_WEB_LOADS times, one after the other, and prints the median and the
# slowest load. The page shows the sampler's latest counts (docs/dashboard.md);
# beside it, the page read from every database at once (?fresh=1, median of
# 5), and what that costs the database: queue_stats' execution time in one
# tenant (median of 5), times the number of tenants.
set -euo pipefail
cd "$(dirname "$0")/../.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
DIR=${BENCH_WEB_DIR:-/tmp/qbench/web}
PORT=${BENCH_WEB_PORT:-54481}
TENANTS=${BENCH_WEB_TENANTS:-60}
JOBS=${BENCH_WEB_JOBS:-100000}
LOADS=${BENCH_WEB_LOADS:-20}
WEB=${QUEUE_WEB:-target/release/queue-web}
export PG_CONFIG

psql() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres "$@"; }

rm -rf "$DIR"
# built without the preload (no worker holds the template database open),
# then restarted with it, as a cluster runs
QUEUE_PRELOAD= scripts/cluster.sh start "$DIR" "$PORT"
WEB_PID=
trap '[ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null; scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT

echo "== building tenant_001 with $JOBS jobs"
psql -d postgres -c "CREATE DATABASE tenant_001"
psql -d tenant_001 <<SQL
CREATE EXTENSION queue;
SELECT queue_create('emails');
SELECT queue_create('reports');
SELECT count(*) FROM generate_series(0, ($JOBS * 9 / 10 - 1) / 10000) b,
     LATERAL queue_enqueue_batch('emails',
         ARRAY(SELECT jsonb_build_object('to', 'user' || i || '@example.com')
                 FROM generate_series(1, least(10000, $JOBS * 9 / 10 - b * 10000)) i));
SELECT count(*) FROM generate_series(0, ($JOBS / 10 - 1) / 10000) b,
     LATERAL queue_enqueue_batch('reports',
         ARRAY(SELECT '{"kind": "daily"}'::jsonb
                 FROM generate_series(1, least(10000, $JOBS / 10 - b * 10000)) i),
         delay => '1 hour');
VACUUM ANALYZE;
SQL
echo "== copying it to $TENANTS databases"
for i in $(seq 2 "$TENANTS"); do
    psql -d postgres -c "CREATE DATABASE tenant_$(printf %03d "$i") TEMPLATE tenant_001"
done
psql -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'queue'" \
    -c "ALTER SYSTEM SET max_connections = $((TENANTS * 2 + 40))"
scripts/cluster.sh stop "$DIR"
scripts/cluster.sh start "$DIR" "$PORT"
psql -d tenant_001 -At -c "SELECT 'tenant_001 holds ' || count(*) || ' jobs' FROM queue_jobs"

"$WEB" --database-url "postgres://postgres@/postgres?host=$DIR&port=$PORT" \
    --listen 127.0.0.1:0 > "$DIR/web.out" 2>&1 &
WEB_PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/web.out" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*/' "$DIR/web.out")
echo "== queue-web at $URL"

# the first load opens a connection to each database
curl -s -o "$DIR/page.html" -w 'first load (connections opened): %{time_total} s\n' "$URL"
shown=$(grep -c '<h2 id="db-' "$DIR/page.html")
[ "$shown" -eq "$TENANTS" ] || { echo "the page shows $shown databases, not $TENANTS" >&2; exit 1; }

times=()
for _ in $(seq "$LOADS"); do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' "$URL")")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
slowest=$(echo "$sorted" | tail -1)

# the same page read from every database now (?fresh=1), not the sampler's counts
fresh=$(for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total}\n' "$URL?fresh=1"; done |
    sort -n | sed -n 3p)

# what the page asks of each database: queue_stats, executed in one tenant
stats_ms=$(for _ in 1 2 3 4 5; do
    psql -d tenant_001 -At -c "EXPLAIN (ANALYZE, TIMING OFF) SELECT * FROM queue_stats" |
        sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p'
done | sort -n | sed -n 3p)

echo
echo "== cluster page, $TENANTS databases of $JOBS jobs each, $LOADS loads"
awk -v m="$median" -v s="$slowest" \
    'BEGIN { printf "median %.0f ms, slowest %.0f ms (goal: under 200 ms)\n", m * 1000, s * 1000 }'
awk -v f="$fresh" \
    'BEGIN { printf "read now from every database (?fresh=1): median of 5 %.0f ms\n", f * 1000 }'
awk -v ms="$stats_ms" -v n="$TENANTS" -v cores="$(nproc)" \
    'BEGIN { printf "queue_stats in one tenant: %s ms (median of 5); x %d tenants = %.0f ms of database work per load, on %d cores\n", ms, n, ms * n, cores }'
