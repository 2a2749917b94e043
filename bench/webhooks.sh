#!/usr/bin/env bash
# `make bench-webhooks`: webhook delivery from one database to a local
# receiver that answers 200 at once, against the receiver's own ceiling (the
# same POSTs from a plain load generator, no database) and against the drain
# by a no-op SQL sender, in the same run; and the idle latency from a
# committed enqueue to the request's arrival. A throwaway cluster of its own,
# PostgreSQL's and the extension's defaults. Writes the table into
# BENCHMARKS.md between its webhooks-run markers unless BENCH_DOC is empty.
# Settings: BENCH_ROUNDS (5), BENCH_WEBHOOK_JOBS (20000), BENCH_SECS (5),
# BENCH_IN_FLIGHT (64), BENCH_WIDE_IN_FLIGHT (256, a second webhook queue),
# BENCH_LATENCY_JOBS (50), BENCH_DIR, BENCH_PORT.
. "$(dirname "$0")/common.sh"

DOC=${BENCH_DOC-BENCHMARKS.md}
BINARY=${BENCH_WEBHOOKS_BIN:-target/release/queue-bench-webhooks}
[ -x "$BINARY" ] || { echo "no $BINARY: cargo build --release -p queue-bench-webhooks" >&2; exit 1; }
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cluster_start "${BENCH_DIR:-/tmp/qbench/webhooks}" "${BENCH_PORT:-54470}"
"$BIN/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -c "CREATE DATABASE bench"
"$BIN/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d bench -c "CREATE EXTENSION queue"
table=$("$BINARY" "$DIR" "$PORT")
echo "$table"
if [ -n "$DOC" ]; then
    report=$(printf '%s\n' "<!-- webhooks-run:begin -->" "" \
        "- run: $started; $(build_stamp); $("$BIN/psql" -X -At -h "$DIR" -p "$PORT" -U postgres -c "SELECT version()" | sed 's/ on .*//')" \
        "- machine: $(nproc) cores; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)" \
        "" "$table" "" "<!-- webhooks-run:end -->")
    if grep -q '<!-- webhooks-run:begin -->' "$DOC"; then
        python3 - "$DOC" "$report" <<'PY'
import sys
path, report = sys.argv[1], sys.argv[2]
text = open(path).read()
start = text.index('<!-- webhooks-run:begin -->')
end = text.index('<!-- webhooks-run:end -->') + len('<!-- webhooks-run:end -->')
open(path, 'w').write(text[:start] + report + text[end:])
PY
    else
        printf '\n## Webhooks: delivery to a local receiver (make bench-webhooks)\n\n%s\n' "$report" >> "$DOC"
    fi
    echo "(written to $DOC)"
fi
