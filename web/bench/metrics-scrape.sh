#!/usr/bin/env bash
# How long queue-web's GET /metrics takes for a cluster of many tenant
# databases with a large backlog each (issue 58's goal: 60 databases of
# 100,000 unfinished jobs, at most 0.5 s), beside the live cluster page
# (?fresh=1), which reads the same databases. About 5 minutes.
#
# Builds one tenant database with BENCH_WEB_JOBS unfinished jobs (90% due,
# 10% scheduled for later), and a queue `done` of 10 jobs, copies it with
# CREATE DATABASE ... TEMPLATE to BENCH_WEB_TENANTS databases in all,
# restarts the cluster with the library preloaded, claims and completes the
# 10 jobs of `done` in every database (so that each has latency histograms
# to export), starts queue-web (the release build) with a token, scrapes
# once to open its connections, then BENCH_WEB_SCRAPES times one after the
# other, and as many times BENCH_WEB_SPACING seconds apart (as Prometheus
# does: each such scrape reads the list of databases again), and prints the
# medians and the slowest; then the cluster page read
# now from every database (?fresh=1), median of 5; then what the scrape asks
# of one database: each statement's execution time (EXPLAIN ANALYZE, median
# of 5). The first scrape's text is kept in target/metrics-scrape.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
DIR=${BENCH_WEB_DIR:-/tmp/qbench/metrics}
PORT=${BENCH_WEB_PORT:-54482}
TENANTS=${BENCH_WEB_TENANTS:-60}
JOBS=${BENCH_WEB_JOBS:-100000}
SCRAPES=${BENCH_WEB_SCRAPES:-5}
SPACING=${BENCH_WEB_SPACING:-6}
WEB=${QUEUE_WEB:-target/release/queue-web}
TOKEN=bench-token
export PG_CONFIG

psql() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ms() { awk -v s="$1" 'BEGIN { printf "%.0f ms", s * 1000 }'; }

rm -rf "$DIR"
# built without the preload (no worker holds the template database open),
# then restarted with it, as a cluster runs
QUEUE_PRELOAD= scripts/cluster.sh start "$DIR" "$PORT"
WEB_PID=
trap '[ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null; scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT

echo "== building tenant_001 with $JOBS unfinished jobs"
psql -d postgres -c "CREATE DATABASE tenant_001"
psql -d tenant_001 <<SQL
CREATE EXTENSION queue;
SELECT queue_create('emails');
SELECT queue_create('reports');
SELECT queue_create('done');
SELECT count(*) FROM generate_series(0, ($JOBS * 9 / 10 - 1) / 10000) b,
     LATERAL queue_enqueue_batch('emails',
         ARRAY(SELECT jsonb_build_object('to', 'user' || i || '@example.com')
                 FROM generate_series(1, least(10000, $JOBS * 9 / 10 - b * 10000)) i));
SELECT count(*) FROM generate_series(0, ($JOBS / 10 - 1) / 10000) b,
     LATERAL queue_enqueue_batch('reports',
         ARRAY(SELECT '{"kind": "daily"}'::jsonb
                 FROM generate_series(1, least(10000, $JOBS / 10 - b * 10000)) i),
         delay => '1 hour');
SELECT count(*) FROM queue_enqueue_batch('done', array_fill('{}'::jsonb, ARRAY[10]));
VACUUM ANALYZE;
SQL
echo "== copying it to $TENANTS databases"
for i in $(seq 2 "$TENANTS"); do
    psql -d postgres -c "CREATE DATABASE tenant_$(printf %03d "$i") TEMPLATE tenant_001"
done
psql -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'queue'" \
    -c "ALTER SYSTEM SET max_connections = $((TENANTS * 3 + 40))"
scripts/cluster.sh stop "$DIR"
scripts/cluster.sh start "$DIR" "$PORT"

echo "== claiming and completing the 10 jobs of queue done in each database"
for i in $(seq 1 "$TENANTS"); do
    psql -d "tenant_$(printf %03d "$i")" -At -c \
        "SELECT count(*) FROM queue_claim('done', 'bench', 10) c, queue_complete(c.id, c.lease)" \
        >/dev/null
done
psql -d tenant_001 -At -c "SELECT 'tenant_001: ' || sum(pending + scheduled + processing) || ' unfinished jobs' FROM queue_stats"

"$WEB" --database-url "postgres://postgres@/postgres?host=$DIR&port=$PORT" \
    --listen 127.0.0.1:0 --token "$TOKEN" > "$DIR/web.out" 2>&1 &
WEB_PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/web.out" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*/' "$DIR/web.out")
echo "== queue-web at $URL"
get() { curl -s -H "Authorization: Bearer $TOKEN" "$@"; }

# the first scrape opens a connection to each database
get -o "$DIR/metrics.txt" -w 'first scrape (connections opened): %{time_total} s\n' "${URL}metrics"
up=$(grep -c '^queue_database_up{.*} 1$' "$DIR/metrics.txt" || true)
[ "$up" -eq "$TENANTS" ] || { echo "the scrape read $up databases, not $TENANTS" >&2; exit 1; }
pending=$(grep -c '^queue_jobs{.*queue="emails",status="pending"}' "$DIR/metrics.txt")
waits=$(grep -c '^queue_job_wait_seconds_count{.*queue="done"} 10$' "$DIR/metrics.txt" || true)
echo "$(wc -l < "$DIR/metrics.txt") lines: $pending databases with their pending jobs, $waits with the 10 waits of done"
mkdir -p target && cp "$DIR/metrics.txt" target/metrics-scrape.txt   # (to look at)

times=()
for _ in $(seq "$SCRAPES"); do
    times+=("$(get -o /dev/null -w '%{time_total}' "${URL}metrics")")
done
scrape=$(printf '%s\n' "${times[@]}" | median)
slowest=$(printf '%s\n' "${times[@]}" | sort -n | tail -1)
# spaced as Prometheus spaces them: each scrape also reads the list of
# databases again (queue-web keeps it 5 s) and looks for the extension in each
spaced=()
for _ in $(seq "$SCRAPES"); do
    sleep "$SPACING"
    spaced+=("$(get -o /dev/null -w '%{time_total}' "${URL}metrics")")
done
spaced_median=$(printf '%s\n' "${spaced[@]}" | median)
spaced_slowest=$(printf '%s\n' "${spaced[@]}" | sort -n | tail -1)
slowest_db=$(get "${URL}metrics" | sed -n 's/^queue_database_scrape_duration_seconds{.*} //p' | sort -g | tail -1)

# the cluster page read from every database now (?fresh=1)
page=$(for _ in 1 2 3 4 5; do get -o /dev/null -w '%{time_total}\n' "${URL}?fresh=1"; done | median)

# what a scrape asks of each database, executed in one tenant
explain() {
    for _ in 1 2 3 4 5; do
        psql -d tenant_001 -At -c "EXPLAIN (ANALYZE, TIMING OFF) $1" |
            sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p'
    done | median
}
stats_ms=$(explain "$(sed '/^--/d' web/queries/stats.sql)")
latency_ms=$(explain "$(sed '/^--/d' web/queries/latency.sql)")
workers_ms=$(explain "$(sed '/^--/d' web/queries/worker_states.sql)")

echo
echo "== GET /metrics, $TENANTS databases of $JOBS unfinished jobs each, $SCRAPES scrapes, on $(nproc) cores"
echo "scrape, one after the other: median $(ms "$scrape"), slowest $(ms "$slowest") (goal: at most 500 ms)"
echo "scrape, ${SPACING} s apart (the list of databases read again): median $(ms "$spaced_median"), slowest $(ms "$spaced_slowest")"
echo "the slowest database within the last scrape: $(ms "$slowest_db")"
echo "cluster page read now from every database (?fresh=1): median of 5 $(ms "$page")"
echo "in one tenant (EXPLAIN ANALYZE, median of 5): queue_stats ${stats_ms} ms, queue_latency ${latency_ms} ms, queue_workers ${workers_ms} ms (once a scrape)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
