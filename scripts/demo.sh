#!/usr/bin/env bash
# Starts a throwaway cluster with the installed extension preloaded, shows a
# queue at work (enqueue, claim, fail, retry, complete, the DBA views, a
# dead letter retried, a queue delivered by a SQL sender, and one delivered
# over HTTP to a local receiver), then the dashboard, queue-web, beside it
# for QUEUE_DEMO_WEB_SECS seconds (5; more to look around in a browser), and
# stops it all again.
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
WEB=
trap 'kill $RECEIVER 2>/dev/null; [ -n "$WEB" ] && kill $WEB 2>/dev/null; scripts/cluster.sh stop "$DIR"; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do [ -s "$DIR/receiver.port" ] && break; sleep 0.1; done
HOOK_PORT=$(cat "$DIR/receiver.port")

"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -d postgres \
    -v hook_port="$HOOK_PORT" -v secret="$SECRET" -e -f scripts/demo.sql
echo
echo "== What the receiver saw"
cat "$DIR/receiver.log"

# The dashboard (make demo builds it), on a free port of 127.0.0.1
WEB_BIN=${QUEUE_WEB:-target/debug/queue-web}
WEB_SECS=${QUEUE_DEMO_WEB_SECS:-5}
if [ -x "$WEB_BIN" ]; then
    "$WEB_BIN" --database-url "postgres://postgres@/postgres?host=$DIR&port=$PORT" \
        --listen "${QUEUE_DEMO_WEB_LISTEN:-127.0.0.1:0}" > "$DIR/web.out" 2>&1 &
    WEB=$!
    for _ in $(seq 100); do grep -q listening "$DIR/web.out" && break; sleep 0.1; done
    WEB_URL=$(grep -o 'http://[0-9.:]*/' "$DIR/web.out")
    echo
    echo "== The dashboard: queue-web at $WEB_URL for $WEB_SECS s (QUEUE_DEMO_WEB_SECS=600 make demo for longer)"
    # its cluster page, as text
    curl -s "$WEB_URL" | sed -n '/<main>/,/Background workers/p' | tr -d '\n' |
        sed -e 's#</tr>#\n#g; s#</h[12]>#\n#g; s#</p>#\n#g' | sed -e 's/<[^>]*>/ /g' \
        -e 's/&#x2f;/\//g' -e 's/  */ /g' -e 's/^ //' | grep -v '^ *$' | head -20
    sleep "$WEB_SECS"
    kill "$WEB"
    WEB=
else
    echo "(no $WEB_BIN: cargo build -p queue-web, to see the dashboard too)"
fi
echo
echo "Demo done; the cluster in $DIR is stopped and removed."
