#!/usr/bin/env bash
# How long queue-web's jobs pages (with each filter) and its dead-letter
# triage take at 100,000 jobs (issue 59; the figures are in BENCHMARKS.md).
#
# Builds two databases in a throwaway cluster (scripts/cluster.sh, the
# installed extension, preloaded):
#   jobs100k  queue orders: BENCH_JOBS jobs enqueued in batches of 10,000
#             with group keys and payloads {customer, n, kind}, then claimed
#             by four workers and ended: 70% succeeded, 10% failed (five
#             kinds of errors, each with ids or numbers in it), 5% cancelled,
#             10% pending and due, 5% pending for later. The claim order puts
#             the succeeded ones at the oldest ids.
#   dead100k  queue mail: BENCH_JOBS dead letters of six kinds of errors,
#             nearly every text a different one (ids, addresses, numbers).
# Then starts queue-web (the release build), loads each page once, then
# BENCH_LOADS times one after the other, and prints the median and the
# slowest of each, and queue_stats and the triage statement as the database
# runs them (EXPLAIN ANALYZE, median of 5).
set -euo pipefail
cd "$(dirname "$0")/../.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
DIR=${BENCH_DIR:-/tmp/qbench/web-jobs}
PORT=${BENCH_PORT:-54482}
JOBS=${BENCH_JOBS:-100000}
LOADS=${BENCH_LOADS:-11}
WEB=${QUEUE_WEB:-target/release/queue-web}
export PG_CONFIG

psql() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres "$@"; }

rm -rf "$DIR"
scripts/cluster.sh start "$DIR" "$PORT"
WEB_PID=
trap '[ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null; scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT

echo "== jobs100k: $JOBS jobs in queue orders"
psql -d postgres -c "CREATE DATABASE jobs100k"
psql -d jobs100k <<SQL
CREATE EXTENSION queue;
SELECT queue_create('orders', max_attempts => 1);
SELECT count(*) FROM generate_series(0, ($JOBS - 1) / 10000) b,
     LATERAL queue_enqueue_batch('orders',
         ARRAY(SELECT jsonb_build_object('customer', 'c' || (i % 1000), 'n', i,
                                         'kind', (ARRAY['order','refund','invoice','reminder','export'])[1 + i % 5])
                 FROM generate_series(b * 10000 + 1, least((b + 1) * 10000, $JOBS)) i),
         group_keys => ARRAY(SELECT 'g' || (i % 500)
                 FROM generate_series(b * 10000 + 1, least((b + 1) * 10000, $JOBS)) i));
SQL
# claims of at most 10,000 each, each in a statement of its own, by four
# workers in turn: rounds DB TOTAL SQL (@N@ the claim's size, @W@ its worker)
rounds() {
    local db=$1 left=$2 sql=$3 r=0 n
    while [ "$left" -gt 0 ]; do
        n=$(( left < 10000 ? left : 10000 )); r=$((r + 1))
        psql -d "$db" -c "$(printf %s "$sql" | sed -e "s/@N@/$n/g" -e "s/@W@/w$((1 + r % 4))/g")" >/dev/null
        left=$((left - n))
    done
}
rounds jobs100k $((JOBS * 70 / 100)) "SELECT count(*) FROM (SELECT queue_complete(c.id, c.lease) FROM queue_claim('orders', '@W@', @N@) c) x"
rounds jobs100k $((JOBS * 10 / 100)) "SELECT count(*) FROM (SELECT queue_fail(c.id, c.lease,
    CASE c.id % 5
      WHEN 0 THEN 'SMTP 550: mailbox user' || c.id || '@example.com unavailable'
      WHEN 1 THEN 'timeout after ' || (c.id % 30) || ' s'
      WHEN 2 THEN 'HTTP 503 Service Unavailable from 10.0.' || (c.id % 250) || '.' || (c.id % 7)
      WHEN 3 THEN 'charge ch_' || md5(c.id::text) || ' declined'
      ELSE 'order ' || gen_random_uuid() || ' not found' END, permanent => true)
    FROM queue_claim('orders', '@W@', @N@) c) x"
rounds jobs100k $((JOBS * 5 / 100)) "SELECT count(*) FROM (SELECT queue_cancel(c.id) FROM queue_claim('orders', '@W@', @N@) c) x"
# the last 5% wait for later
psql -d jobs100k -c "SELECT queue_alter('orders', max_attempts => 3)"
rounds jobs100k $((JOBS * 5 / 100)) "SELECT count(*) FROM (SELECT queue_fail(c.id, c.lease, 'busy', retry_in => '1 day') FROM queue_claim('orders', '@W@', @N@) c) x"
psql -d jobs100k -c "VACUUM ANALYZE"
psql -d jobs100k -At -c "SELECT status, count(*) FROM queue_jobs GROUP BY 1 ORDER BY 1"

echo "== dead100k: $JOBS dead letters in queue mail"
psql -d postgres -c "CREATE DATABASE dead100k"
psql -d dead100k <<SQL
CREATE EXTENSION queue;
SELECT queue_create('mail', max_attempts => 1);
SELECT count(*) FROM generate_series(0, ($JOBS - 1) / 10000) b,
     LATERAL queue_enqueue_batch('mail',
         ARRAY(SELECT jsonb_build_object('to', 'user' || i || '@example.com')
                 FROM generate_series(b * 10000 + 1, least((b + 1) * 10000, $JOBS)) i));
SQL
rounds dead100k "$JOBS" "SELECT count(*) FROM (SELECT queue_fail(c.id, c.lease,
        CASE c.id % 6
          WHEN 0 THEN 'SMTP 550: mailbox user' || c.id || '@example.com unavailable'
          WHEN 1 THEN 'connect to 10.1.' || (c.id % 250) || '.' || (c.id % 9) || ':25 timed out after ' || (c.id % 60) || ' s'
          WHEN 2 THEN 'POST https://hooks.example.com/in/' || md5(c.id::text) || ' returned HTTP 502'
          WHEN 3 THEN 'message ' || gen_random_uuid() || ' rejected: spam score ' || (c.id % 10) || '.' || (c.id % 7)
          WHEN 4 THEN 'SMTP 421: try again later (session ' || md5(c.id::text) || ')'
          ELSE 'no such domain example' || (c.id % 100) || '.invalid' END) FROM queue_claim('mail', '@W@', @N@) c) x"
psql -d dead100k -c "VACUUM ANALYZE"
psql -d dead100k -At -c "SELECT 'dead100k holds ' || count(*) || ' dead letters' FROM queue_failed"

"$WEB" --database-url "postgres://postgres@/postgres?host=$DIR&port=$PORT" \
    --listen 127.0.0.1:0 > "$DIR/web.out" 2>&1 &
WEB_PID=$!
for _ in $(seq 100); do grep -q listening "$DIR/web.out" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$DIR/web.out" | head -1)
echo "== queue-web at $URL"

middle=$(psql -d jobs100k -At -c "SELECT (min(id) + max(id)) / 2 FROM queue_jobs")
hour=$(psql -d jobs100k -At -c "SELECT to_char(min(enqueued_at) + (max(enqueued_at) - min(enqueued_at)) / 2, 'YYYY-MM-DD HH24:MI:SS.US') FROM queue_jobs")
late=$(psql -d jobs100k -At -c "SELECT to_char(max(enqueued_at), 'YYYY-MM-DD HH24:MI:SS.US') FROM queue_jobs")
# the triage page's link to its biggest cause, and to a cause of the jobs page
cause=$(curl -s "$URL/db/dead100k/queue/mail/dead" | grep -o '?cause=[0-9a-f]*' | head -1)

# median and slowest of LOADS loads of a page, after one load; the page must answer 200
measure() {
    local label=$1 path=$2 times=() code
    code=$(curl -s -o "$DIR/page.html" -w '%{http_code}' "$URL$path")
    [ "$code" = 200 ] || { echo "$path answered $code" >&2; sed -n '1,40p' "$DIR/page.html" >&2; exit 1; }
    for _ in $(seq "$LOADS"); do
        times+=("$(curl -s -o /dev/null -w '%{time_total}' "$URL$path")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" -v rows="$(grep -cE '<tr( class="cause")?><td' "$DIR/page.html" || true)" \
        '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
          printf "| %s | %.0f | %.0f | %d |\n", label, m * 1000, a[NR] * 1000, rows}'
}

echo
echo "== load average before the loads: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "== jobs pages, jobs100k ($JOBS jobs), median and slowest of $LOADS loads (ms), and the rows shown"
echo "| page | median | slowest | rows |"
echo "|---|---|---|---|"
Q=/db/jobs100k/queue/orders/jobs
measure "all jobs, first page" "$Q"
measure "all jobs, a page from the middle (before=$middle)" "$Q?before=$middle"
measure "pending" "$Q?status=pending"
measure "succeeded (oldest ids)" "$Q?status=succeeded"
measure "cancelled" "$Q?status=cancelled"
measure "failed (queue_failed)" "$Q?status=failed"
measure "failed, error contains 'timeout' (queue_failed)" "$Q?status=failed&error=timeout"
measure "error contains 'mailbox', any status" "$Q?error=mailbox"
measure "payload customer = c7" "$Q?key=customer&value=c7"
measure "payload has key 'refund_of' (none has)" "$Q?key=refund_of"
measure "group g7" "$Q?group=g7"
measure "worker w2" "$Q?worker=w2"
measure "failed by worker w2" "$Q?status=failed&worker=w2"
measure "enqueued from the middle time on" "$Q?time=enqueued&from=$(printf %s "$hour" | sed 's/ /+/')"
measure "enqueued before the middle time" "$Q?time=enqueued&to=$(printf %s "$hour" | sed 's/ /+/')"
measure "finished in the last minute of enqueues or later" "$Q?time=finished&from=$(printf %s "$late" | sed 's/ /+/')"

echo
echo "== dead-letter triage, dead100k ($JOBS dead letters), median and slowest of $LOADS loads (ms)"
echo "| page | median | slowest | rows |"
echo "|---|---|---|---|"
measure "causes of queue mail" "/db/dead100k/queue/mail/dead"
measure "causes of the cluster (both databases)" "/dead"
measure "one cause's page (its newest 100)" "/db/dead100k/queue/mail/dead$cause"
measure "its retry confirmation (counts the cause)" "/db/dead100k/queue/mail/dead/retry$cause"
measure "the cluster page (what is stuck, charts)" "/"

echo
echo "== load average after the loads: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== what the database spends (EXPLAIN ANALYZE, median of 5, ms)"
stmt_ms() {
    local db=$1 sql=$2
    for _ in 1 2 3 4 5; do
        psql -d "$db" -At -c "EXPLAIN (ANALYZE, TIMING OFF) $sql" |
            sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p'
    done | sort -n | sed -n 3p
}
echo "triage statement, dead100k: $(stmt_ms dead100k "SELECT queue, id, left(last_error, 500), EXTRACT(epoch FROM now() - finished_at)::float8 FROM queue_failed WHERE queue = 'mail' ORDER BY id DESC LIMIT 100000")"
echo "what is stuck (groups' heads), jobs100k: $(stmt_ms jobs100k "$(sed -e '/^--/d' -e 's/\$1::text\[\]/ARRAY['"'"'orders'"'"']/' web/queries/stuck_heads.sql)")"
echo "queue_stats, jobs100k: $(stmt_ms jobs100k "SELECT * FROM queue_stats")"
