#!/usr/bin/env bash
# `make soak`: a steady load for SOAK_SECS (600) at about half of queue's
# peak claim + complete rate (one job per statement), the last SOAK_HOLD_SECS
# (300) of it with another session holding a REPEATABLE READ snapshot open,
# which keeps vacuum from removing any dead tuple. Producers enqueue at the
# same rate as consumers claim and complete, so the backlog stays level.
# Then the same load, rate and snapshot on pgmq (read(1) + delete).
# Consumers get the 4 connections of the peak measurement, so half the rate
# leaves them half their capacity.
#
# Every SOAK_SAMPLE (10) seconds it records throughput (jobs completed),
# claim latency (median and p99, from pgbench's per-transaction log), the
# backlog, the on-disk size of every table and index of the side, and their
# dead tuples; and on queue's side runs SELECT queue_maintain(), as the
# scheduled upkeep would, unless the background worker does it itself. Prints the series, writes CSVs under
# bench/results/, plots them into bench/soak.png and, unless SOAK_DOC is
# empty, writes the summary into BENCHMARKS.md (between its soak-run markers).
#
# `make soak` runs it twice: at 2,000 jobs/s (SOAK_RATE=2000, SOAK_TAG=soak-2000)
# and at half of the peak (the default).
#
# Settings (environment): SOAK_SECS, SOAK_HOLD_SECS, SOAK_SAMPLE, SOAK_MERGE,
# SOAK_CONSUMERS (4: connections that claim and complete), SOAK_RETENTION
# (queue's succeeded jobs kept: '1 day', the default; '0' keeps none),
# SOAK_RATE (jobs/s; default: half the peak measured first), SOAK_SIDES
# ("queue pgmq"), SOAK_BACKLOG (jobs waiting at the start: 20 s of the rate),
# SOAK_UPKEEP_INTERVAL (queue.upkeep_interval for the worker; default: the
# extension's), SOAK_TAG (soak: names the result files and the region of
# BENCHMARKS.md, soak-run), SOAK_PLOT (bench/soak.png), SOAK_DOC
# (BENCHMARKS.md), SOAK_DIR, SOAK_PORT, PGMQ_INSTALL.
. "$(dirname "$0")/common.sh"

SECS=${SOAK_SECS:-600}
HOLD=${SOAK_HOLD_SECS:-300}
SAMPLE=${SOAK_SAMPLE:-10}
SIDES=${SOAK_SIDES:-queue pgmq}
CONSUMERS=${SOAK_CONSUMERS:-4}
RETENTION=${SOAK_RETENTION:-1 day}
PLOT=${SOAK_PLOT-bench/soak.png}
DOC=${SOAK_DOC-BENCHMARKS.md}
PGMQ_INSTALL=${PGMQ_INSTALL:-target/debug/pgmq-install}
TAG=${SOAK_TAG:-soak}
OUT=bench/results
PAYLOAD='{"to": "ada@example.com", "template": "welcome", "n": 1}'
mkdir -p "$OUT"
SERIES=$OUT/$TAG-series.csv         # one line per side and sample
RELS=$OUT/$TAG-relations.csv        # one line per side, sample and relation
echo "side,t,held,jobs_per_s,claim_p50_ms,claim_p99_ms,backlog,total_bytes,history_bytes,claim_table_bytes,dead_tuples" > "$SERIES"
echo "side,t,held,relation,kind,bytes,dead_tuples" > "$RELS"
# SOAK_MERGE=DIR/TAG: keep the sides not run now from an earlier run's files
# (DIR/TAG-series.csv and -relations.csv), e.g. pgmq's, which does not change;
# DIR/TAG-run.txt says which run that was
if [ -n "${SOAK_MERGE:-}" ]; then
    merged_from=$(cat "$SOAK_MERGE-run.txt" 2>/dev/null || echo "an earlier run")
    for f in series relations; do
        awk -F, -v run=" $SIDES " 'NR > 1 && index(run, " " $1 " ") == 0' "$SOAK_MERGE-$f.csv" \
            >> "$OUT/$TAG-$f.csv"
    done
fi

cluster_start "${SOAK_DIR:-/tmp/qbench/soak}" "${SOAK_PORT:-54402}"
workdir qbench-soak
keep_server_log "$OUT/$TAG-server.log"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
build=$(build_stamp)
if [ -n "${SOAK_UPKEEP_INTERVAL:-}" ]; then
    sql -c "ALTER SYSTEM SET queue.upkeep_interval = '$SOAK_UPKEEP_INTERVAL'" -c "SELECT pg_reload_conf()" > /dev/null
fi

# ---------------------------------------------------------------- set-up
sql -c "CREATE DATABASE soak_queue" -c "CREATE DATABASE soak_pgmq"
DB=soak_queue sql -c "CREATE EXTENSION queue" -c "SELECT queue_create('soak', retention => '$RETENTION')" > /dev/null
"$PGMQ_INSTALL" "$DIR" "$PORT" soak_pgmq > "$WORK/pgmq-version"
DB=soak_pgmq sql -c "SELECT pgmq.create('soak')" > /dev/null

# Producers: one job per statement. Consumers: a pgbench "transaction" is
# one statement, the claim or the completion, alternately (phase), so that
# the per-transaction log times claims alone: even transaction numbers are
# claims. An empty claim gives (0, '') and a completion that does nothing.
cat > "$WORK/queue_produce.sql" <<SQL
SELECT queue_enqueue('soak', '$PAYLOAD');
SQL
cat > "$WORK/queue_consume.sql" <<'SQL'
\if :phase = 0
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('soak', 'soak', 1) \gset
\set phase 1
\else
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
\set phase 0
\endif
SQL
cat > "$WORK/pgmq_produce.sql" <<SQL
SELECT pgmq.send('soak', '$PAYLOAD');
SQL
cat > "$WORK/pgmq_consume.sql" <<'SQL'
\if :phase = 0
SELECT coalesce(max(msg_id), 0) AS id FROM pgmq.read('soak', 30, 1) \gset
\set phase 1
\else
SELECT pgmq.delete('soak', :id::bigint) WHERE :id <> 0;
\set phase 0
\endif
SQL

# fill SIDE N: about N jobs waiting (batches of 100; each batch depends on g,
# or the planner calls the function once and rescans its rows)
fill() {
    local n=$(( ($2 + 99) / 100 ))
    case $1 in
    queue) DB=soak_queue sql -c "SELECT count(*) FROM generate_series(1, $n) g,
             LATERAL queue_enqueue_batch('soak', array_fill('$PAYLOAD'::jsonb, ARRAY[100 + 0 * g]))" ;;
    pgmq) DB=soak_pgmq sql -c "SELECT count(*) FROM generate_series(1, $n) g,
             LATERAL pgmq.send_batch('soak', array_fill('$PAYLOAD'::jsonb, ARRAY[100 + 0 * g]))" ;;
    esac > /dev/null
}

# the peak: consumers alone, as fast as they go, on 4 connections for 10 s
if [ -z "${SOAK_RATE:-}" ]; then
    fill queue 60000
    out=$(DB=soak_queue pgb -c 4 -j 2 -T 10 -D phase=0 -f queue_consume.sql)
    peak=$(echo "$out" | awk '/^tps = / { printf "%d", $3 / 2 }')
    SOAK_RATE=$(( peak / 2 ))
    echo "queue's peak claim + complete (one job per statement, 4 connections): $peak jobs/s; soak at $SOAK_RATE jobs/s"
    DB=soak_queue sql -c "SELECT queue_purge('soak')" -c "SELECT queue_maintain(true)" > /dev/null
fi
RATE=$SOAK_RATE
# Upkeep on queue's side: the worker runs queue_maintain() itself where it
# has queue.upkeep_interval (issue 5); before that, the sampler calls it.
worker_interval=$(DB=soak_queue sql -c "SELECT current_setting('queue.upkeep_interval', true)")
if [ -n "$worker_interval" ]; then
    UPKEEP="the background worker's own, every $worker_interval (queue.upkeep_interval)"; SAMPLER_UPKEEP=0
else
    UPKEEP="SELECT queue_maintain() by the sampler every $SAMPLE s (this build's worker does no upkeep)"; SAMPLER_UPKEEP=1
fi
echo "upkeep: $UPKEEP"
BACKLOG=${SOAK_BACKLOG:-$(( RATE * 20 ))}

# ---------------------------------------------------------------- sampling
relations_sql() {  # the side's tables and indexes, with storage
    case $1 in
    queue) echo "c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'queue\_%'" ;;
    pgmq) echo "c.relnamespace = 'pgmq'::regnamespace" ;;
    esac
}
claim_table_sql() {  # the table claims scan, and its indexes
    case $1 in
    queue) echo "c.relname ~ '^queue_live_[0-9]+' OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid::regclass::text ~ '^queue_live_[0-9]+$')" ;;
    pgmq) echo "c.relname IN ('q_soak') OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'pgmq.q_soak'::regclass)" ;;
    esac
}
history_sql() {  # the finished jobs kept on purpose (queue's retention; pgmq's archive)
    case $1 in
    queue) echo "c.relname ~ '^queue_done_[0-9]+$'" ;;
    pgmq) echo "c.relname = 'a_soak'" ;;
    esac
}
done_sql() {  # jobs completed so far
    case $1 in
    queue) echo "SELECT succeeded_total FROM queue_stats WHERE queue = 'soak'" ;;
    pgmq) echo "SELECT total_messages - queue_length FROM pgmq.metrics('soak')" ;;
    esac
}
backlog_sql() {
    case $1 in
    queue) echo "SELECT pending + processing FROM queue_stats WHERE queue = 'soak'" ;;
    pgmq) echo "SELECT queue_length FROM pgmq.metrics('soak')" ;;
    esac
}

# sample SIDE T HELD: one line of relation sizes per relation; prints
# "done backlog total_bytes history_bytes claim_bytes dead"
sample() {
    local side=$1 t=$2 held=$3
    DB=soak_$side sql -F , <<SQL | sed "s/^/$side,$t,$held,/" >> "$RELS"
SELECT c.relname, CASE c.relkind WHEN 'i' THEN 'index' ELSE 'table' END, pg_relation_size(c.oid),
       coalesce(s.n_dead_tup, 0)
  FROM pg_class c LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
 WHERE $(relations_sql "$side") AND c.relkind IN ('r', 'i', 't') ORDER BY c.relname;
SQL
    DB=soak_$side sql -F ' ' <<SQL
SELECT ($(done_sql "$side")), ($(backlog_sql "$side")),
       (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE $(relations_sql "$side") AND c.relkind = 'r'),
       (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c WHERE $(relations_sql "$side") AND $(history_sql "$side")),
       (SELECT sum(pg_relation_size(c.oid)) FROM pg_class c WHERE ($(claim_table_sql "$side")) AND c.relkind IN ('r', 'i')),
       (SELECT sum(n_dead_tup) FROM pg_stat_all_tables s JOIN pg_class c ON c.oid = s.relid WHERE $(relations_sql "$side"));
SQL
}

# latencies SIDE START: "t p50 p99" per sample interval, of the claims in the
# consumers' pgbench logs (time minus schedule lag: the claim's own latency)
latencies() {
    cat "$WORK"/lat.* | awk -v start="$2" -v step="$SAMPLE" '
        $2 % 2 == 0 { b = int(($5 + $6 / 1e6 - start) / step) + 1; print b * step, ($3 - $7) / 1000 }' |
        sort -k1,1n -k2,2g | awk '
        function flush() { if (n) printf "%d %.2f %.2f\n", cur, v[int((n + 1) / 2)], v[int(n * 0.99 + 0.999999)] }
        $1 != cur { flush(); cur = $1; n = 0 }
        { v[++n] = $2 }
        END { flush() }'
}

holder_pid=
hold_snapshot() {  # SIDE: a REPEATABLE READ transaction that stays open
    "$BIN/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d "soak_$1" >/dev/null 2>&1 <<SQL &
SET application_name = 'soak snapshot holder';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM pg_class;
SELECT pg_sleep($((HOLD + 120)));
SQL
    holder_pid=$!
}
release_snapshot() {  # SIDE
    DB=soak_$1 sql -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'soak snapshot holder'" > /dev/null
    wait "$holder_pid" 2>/dev/null || true
    holder_pid=
}
at_exit '[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null'

soak() {  # SIDE
    local side=$1 start t=0 held=0 prev_done now_done line producer consumer
    echo
    echo "== $side: $RATE jobs/s for $SECS s, snapshot held for the last $HOLD s"
    fill "$side" "$BACKLOG"
    DB=soak_$side sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
    rm -f "$WORK"/lat.*
    start=$(date +%s.%N)
    started[$side]=$start
    DB=soak_$side pgb -c 2 -j 1 -R "$RATE" -T "$SECS" -f "${side}_produce.sql" > "$WORK/producer.out" 2>&1 &
    producer=$!
    DB=soak_$side pgb -c "$CONSUMERS" -j "$(( CONSUMERS < 2 ? 1 : 2 ))" -R $((RATE * 2)) -T "$SECS" -D phase=0 -l --log-prefix=lat \
        -f "${side}_consume.sql" > "$WORK/consumer.out" 2>&1 &
    consumer=$!
    prev_done=$(DB=soak_$side sql -c "$(done_sql "$side")")
    printf "%6s %5s %9s %8s %9s %10s %10s %10s\n" t held "jobs/s" backlog "total MB" "history MB" "claim MB" dead >&2
    while [ "$t" -lt "$SECS" ]; do
        t=$((t + SAMPLE))
        sleep "$(awk -v s="$start" -v t="$t" -v now="$(date +%s.%N)" 'BEGIN { d = s + t - now; print (d > 0 ? d : 0) }')"
        read -r now_done backlog total history claim dead <<< "$(sample "$side" "$t" "$held")"
        local jps; jps=$(awk -v a="$prev_done" -v b="$now_done" -v s="$SAMPLE" 'BEGIN { printf "%.1f", (b - a) / s }')
        prev_done=$now_done
        echo "$side,$t,$held,$jps,,,$backlog,$total,$history,$claim,$dead" >> "$SERIES"
        printf "%6d %5s %9s %8s %9.1f %10.1f %10.2f %10s\n" "$t" "$held" "$jps" "$backlog" \
            "$(awk -v b="$total" 'BEGIN { print b / 1048576 }')" "$(awk -v b="$history" 'BEGIN { print b / 1048576 }')" \
            "$(awk -v b="$claim" 'BEGIN { print b / 1048576 }')" "$dead" >&2
        # the upkeep a scheduler (or the worker) runs on queue's side
        if [ "$side" = queue ] && [ "$SAMPLER_UPKEEP" = 1 ]; then DB=soak_queue sql -c "SELECT queue_maintain()" > /dev/null; fi
        # the snapshot is taken at the start of the held part
        if [ "$held" = 0 ] && [ "$t" -ge $((SECS - HOLD)) ]; then hold_snapshot "$side"; held=1; fi
    done
    wait "$producer" || { echo "$side producer failed:" >&2; tail -5 "$WORK/producer.out" >&2; }
    wait "$consumer" || { echo "$side consumer failed:" >&2; tail -5 "$WORK/consumer.out" >&2; }
    release_snapshot "$side"
    grep -E "^(tps|number of failed|latency average)" "$WORK/producer.out" | sed "s/^/  $side producer: /"
    grep -E "^(tps|number of failed)" "$WORK/consumer.out" | sed "s/^/  $side consumer (claims + completions): /"
    # fill in the claim latencies of each sample
    latencies "$side" "$start" > "$WORK/lat-series"
    awk -F, -v side="$side" 'NR == FNR { p50[$1] = $2; p99[$1] = $3; next }
        $1 == side { $5 = p50[$2]; $6 = p99[$2] } { print }' OFS=, \
        <(tr ' ' , < "$WORK/lat-series") "$SERIES" > "$SERIES.tmp" && mv "$SERIES.tmp" "$SERIES"
    cat "$WORK"/lat.* > "$OUT/$TAG-$side-consumer.log"   # every claim and completion, for a closer look
    rm -f "$WORK"/lat.*
}

declare -A started   # when each side's load began (goals() splits its claims there)
for side in $SIDES; do soak "$side"; done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "the run of $(date -u '+%Y-%m-%d %H:%M UTC') (sides $SIDES; queue: $build)${merged_from:+; the other sides from $merged_from}" > "$OUT/$TAG-run.txt"

# ---------------------------------------------------------------- report
echo
echo "Series (claim latency: median / p99 ms of the claims completed in each interval):"
series_table() {
    echo "| side | t s | snapshot held | jobs/s | claim ms p50 / p99 | backlog | storage without history | history (retained) | claim table + indexes | dead tuples |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    awk -F, 'NR > 1 { printf "| %s | %d | %s | %.0f | %s / %s | %d | %.2f MB | %.1f MB | %.2f MB | %d |\n",
        $1, $2, ($3 ? "yes" : ""), $4, $5, $6, $7, ($8 - $9) / 1048576, $9 / 1048576, $10 / 1048576, $11 }' "$SERIES"
}
series_table | tee "$OUT/$TAG-series.md"

# med(x, n): the median of x[1..n], for the awk programs below
AWK_MEDIAN='function med(x, n,   i, k, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
    for (i = 1; i <= n; i++) for (k = i + 1; k <= n; k++) if (s[k] + 0 < s[i] + 0) { t = s[i]; s[i] = s[k]; s[k] = t }
    return s[int((n + 1) / 2)] }'

# summary: each side's phases, medians of the samples; sizes and dead tuples
# at the end of each phase
summary() {
    echo "| side | phase | jobs/s | claim p50 ms | claim p99 ms | backlog at end | storage without history: at end (largest) | claim table + indexes: at end (largest) | dead tuples: at end (largest) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    local side held
    for side in $(awk -F, 'NR > 1 && !seen[$1]++ { print $1 }' "$SERIES"); do
        for held in 0 1; do
            awk -F, -v side="$side" -v held="$held" "$AWK_MEDIAN"'
                $1 == side && $3 == held { n++; j[n] = $4; a[n] = $5; b[n] = $6; last = $0
                    w = $8 - $9; if (w > mw) mw = w; if ($10 > mc) mc = $10; if ($11 > md) md = $11 }
                END { if (!n) exit; split(last, f, ",")
                      printf "| %s | %s | %.0f | %s | %s | %d | %.2f MB (%.2f) | %.2f MB (%.2f) | %d (%d) |\n", side,
                          (held ? "snapshot held" : "no snapshot"), med(j, n), med(a, n), med(b, n),
                          f[7], (f[8] - f[9]) / 1048576, mw / 1048576, f[10] / 1048576, mc / 1048576, f[11], md }' "$SERIES"
        done
    done
    echo
    echo "(medians of the ${SAMPLE}-s samples; \"history\" is queue_done, the succeeded jobs kept for the queue's retention of $RETENTION, $(awk -F, '$1 == "queue" { h = $9 } END { printf "%.1f MB", h / 1048576 }' "$SERIES") at the end; pgmq deletes its messages (nothing archived))"
}
echo
summary | tee "$OUT/$TAG-summary.md"

# issue 16's bar for a held snapshot, per side: the part with the snapshot
# against the part without it. Throughput: medians of the samples; claim
# time: the mean of every claim in the part (from the consumers' log); peak
# size: the largest sample of the storage without the history kept on
# purpose. Goal: throughput within 10 %, the other two within 2 x.
goals() {
    echo "| side | jobs/s: without → held (ratio) | claim mean ms: without → held (ratio) | peak storage without history: without → held (ratio) | goal met |"
    echo "|---|---|---|---|---|"
    local side
    for side in $(awk -F, 'NR > 1 && !seen[$1]++ { print $1 }' "$SERIES"); do
        # (a side merged from an earlier run has no start here)
        [ -n "${started[$side]:-}" ] || continue
        read -r m0 m1 <<< "$(awk -v start="${started[$side]}" -v held_at=$((SECS - HOLD)) '
            $2 % 2 == 0 { at = $5 + $6 / 1e6; ms = ($3 - $7) / 1000; from = start + held_at
                          if (at < from) { s0 += ms; n0++ } else { s1 += ms; n1++ } }
            END { printf "%.3f %.3f\n", (n0 ? s0 / n0 : 0), (n1 ? s1 / n1 : 0) }' "$OUT/$TAG-$side-consumer.log")"
        awk -F, -v side="$side" -v m0="$m0" -v m1="$m1" "$AWK_MEDIAN"'
            $1 == side { h = $3; n[h]++; j[h, n[h]] = $4; w = $8 - $9; if (w > peak[h]) peak[h] = w }
            END { for (h = 0; h <= 1; h++) { for (i = 1; i <= n[h]; i++) x[i] = j[h, i]; jm[h] = med(x, n[h]) }
                  rj = (jm[0] ? jm[1] / jm[0] : 0); rm = (m0 ? m1 / m0 : 0); rp = (peak[0] ? peak[1] / peak[0] : 0)
                  printf "| %s | %.0f → %.0f (%.2f) | %.2f → %.2f (%.2f) | %.2f → %.2f MB (%.2f) | %s |\n", side,
                      jm[0], jm[1], rj, m0, m1, rm, peak[0] / 1048576, peak[1] / 1048576, rp,
                      (rj >= 0.9 && rm <= 2 && rp <= 2 ? "yes" : "no") }' "$SERIES"
    done
}
echo
goals | tee "$OUT/$TAG-goals.md"

# per relation: size and dead tuples at the end of each phase
relations_table() {
    echo "Relations larger than 16 kB at some sample (the others stay at 8 or 16 kB):"
    echo
    echo "| side | relation | kind | size, end of no-snapshot part | size, end of held part | largest | dead tuples at the two ends |"
    echo "|---|---|---|---|---|---|---|"
    awk -F, 'NR > 1 { k = $1 SUBSEP $4; kind[k] = $5; side[k] = $1; rel[k] = $4
                      if ($3 == 0) { s0[k] = $6; d0[k] = $7 } else { s1[k] = $6; d1[k] = $7 }
                      if ($6 > mx[k]) mx[k] = $6 }
        END { for (k in kind) if (mx[k] > 16384)
                printf "| %s | %s | %s | %d kB | %d kB | %d kB | %d / %d |\n", side[k], rel[k], kind[k],
                    s0[k] / 1024, s1[k] / 1024, mx[k] / 1024, d0[k], d1[k] }' "$RELS" | sort
}
echo
relations_table | tee "$OUT/$TAG-relations.md"

if [ -n "$PLOT" ]; then
    py=python3
    $py -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
    if ! $py -c 'import matplotlib' 2>/dev/null; then
        echo "installing Debian's python3-matplotlib for the plot"
        apt-get install -y -q --no-install-recommends python3-matplotlib > /dev/null || apt-get update -q > /dev/null &&
            apt-get install -y -q --no-install-recommends python3-matplotlib > /dev/null
        py=/usr/bin/python3
    fi
    $py bench/soak_plot.py "$SERIES" "$PLOT" "$SECS" "$HOLD" "$RATE" && echo "plot: $PLOT"
fi

if [ -n "$DOC" ]; then
    {
        echo
        echo "- run: $(date -u '+%Y-%m-%d %H:%M UTC'), $SECS s per side at $RATE jobs/s (producers: 2 connections, single enqueues; consumers: $CONSUMERS connections, claim one job then complete it), snapshot held for the last $HOLD s, a sample every $SAMPLE s; upkeep on queue's side: $UPKEEP"
        echo "- machine: $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB; load average before: $load_before, after: $load_after; $(DB=soak_queue sql -c "SELECT version()" | sed 's/ on .*//'), fsync and synchronous_commit on; queue: $build; pgmq $(sed 's/^pgmq //' "$WORK/pgmq-version")"
        if [ -n "${SOAK_MERGE:-}" ]; then
            echo "- the sides other than $SIDES: from $merged_from, at the same rate (SOAK_MERGE)"
        fi
        echo
        summary
        echo
        echo "The held part against the part without the snapshot (goal: jobs/s within 10 %, claim mean and peak storage each within 2 x):"
        echo
        goals
        echo
        echo "Every table and index (kB; dead tuples at the end of the part without and with the snapshot):"
        echo
        relations_table
        echo
    } | replace_region "$DOC" "$TAG-run"
    echo "(written to $DOC)"
fi
