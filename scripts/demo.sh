#!/usr/bin/env bash
# Starts a throwaway cluster with the installed extension preloaded, shows a
# queue at work (enqueue, claim, fail, retry, complete, the DBA views, a
# dead letter retried, a queue delivered by a SQL sender, and one delivered
# over HTTP to a local receiver), and stops it again.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
DIR=${QUEUE_DEMO_DIR:-/tmp/queue-demo}
PORT=${QUEUE_DEMO_PORT:-54329}

# the secret the demo's webhook queue signs with, and its receiver checks
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw

rm -rf "$DIR"
scripts/cluster.sh start "$DIR" "$PORT"
# the demo's webhook endpoint, on a free port of 127.0.0.1
python3 scripts/demo_receiver.py "$DIR/receiver.port" "$SECRET" > "$DIR/receiver.log" 2>&1 &
RECEIVER=$!
trap 'kill $RECEIVER 2>/dev/null; scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do [ -s "$DIR/receiver.port" ] && break; sleep 0.1; done
HOOK_PORT=$(cat "$DIR/receiver.port")

"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -d postgres \
    -v hook_port="$HOOK_PORT" -v secret="$SECRET" -e -f scripts/demo.sql
echo
echo "== What the receiver saw"
cat "$DIR/receiver.log"
echo
echo "Demo done; the cluster in $DIR is stopped and removed."
