#!/usr/bin/env bash
# Starts a throwaway cluster with the installed extension preloaded, shows a
# queue at work (enqueue, claim, fail, retry, complete, the DBA views, a
# dead letter retried, and a queue delivered by a sender), and stops it again.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
DIR=${QUEUE_DEMO_DIR:-/tmp/queue-demo}
PORT=${QUEUE_DEMO_PORT:-54329}

rm -rf "$DIR"
scripts/cluster.sh start "$DIR" "$PORT"
trap 'scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT

"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -d postgres \
    -e -f scripts/demo.sql
echo
echo "Demo done; the cluster in $DIR is stopped and removed."
