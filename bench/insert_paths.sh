#!/usr/bin/env bash
# Issue 16's lead for batch enqueue, measured: does COPY's path (multi-insert
# of heap tuples, then their index entries) put 100 jobs into queue_live
# faster than the INSERT ... SELECT unnest(...) that queue_enqueue_batch
# runs? The same 100 rows, written both ways into the extension's own table
# (a queue id no queue has, so that no worker touches them), on 4
# connections, the two statements taking turns, the table emptied before
# each round. Prints rows/s per round and the medians' ratio.
#   bench/insert_paths.sh    BENCH_ROUNDS (5), BENCH_SECS (5)
. "$(dirname "$0")/common.sh"

ROUNDS=${BENCH_ROUNDS:-5}
SECS=${BENCH_SECS:-5}
cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-insert-paths}" "${QUEUE_BENCH_PORT:-54332}"
workdir queue-insert-paths
sql -c "CREATE DATABASE bench"
DB=bench
export DB
sql -c "CREATE EXTENSION queue"

# the rows: what enqueue_batch.sql writes for a batch of 100 small payloads
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
payloads = [json.dumps({"n": i, "to": "user@example.com"}) for i in range(100)]
columns = "slot, queue_id, priority, id, run_at, enqueued_at, state, payload"
with open(f"{work}/rows.tsv", "w") as f:
    for i, p in enumerate(payloads):
        f.write(f"0\t999\t0\t{i}\t2026-12-01 00:00:00+00\t2026-12-01 00:00:00+00\tready\t{p}\n")
array = "ARRAY[" + ",".join(f"'{p}'::jsonb" for p in payloads) + "]"
with open(f"{work}/insert.sql", "w") as f:
    f.write(f"INSERT INTO queue_live ({columns}) SELECT 0, 999, 0, nextval('queue_job_id_seq'), "
            f"now(), now(), 'ready', p FROM unnest({array}) p;\n")
with open(f"{work}/copy.sql", "w") as f:
    f.write(f"COPY queue_live ({columns}) FROM '{work}/rows.tsv';\n")
PY
chmod 644 "$WORK"/*

declare -A rates
for round in $(seq 1 "$ROUNDS"); do
    for path in insert copy; do
        sql -c "DELETE FROM queue_live WHERE queue_id = 999" -c "VACUUM queue_live"
        tps=$(pgb -c 4 -j 2 -T "$SECS" -f "$WORK/$path.sql" | awk '/^tps = / { print $3 }')
        rate=$(awk -v t="$tps" 'BEGIN { printf "%.0f", t * 100 }')
        rates[$path]+="$rate "
        echo "round $round: $path $rate rows/s"
    done
done
insert=$(tr ' ' '\n' <<<"${rates[insert]}" | grep . | median)
copy=$(tr ' ' '\n' <<<"${rates[copy]}" | grep . | median)
echo "| path | rows/s (median of $ROUNDS) | / INSERT ... SELECT unnest |"
echo "|---|---|---|"
echo "| INSERT ... SELECT unnest (queue_enqueue_batch's) | $insert | 1.00 |"
echo "| COPY (multi-insert) | $copy | $(awk -v c="$copy" -v i="$insert" 'BEGIN { printf "%.2f", c / i }') |"
