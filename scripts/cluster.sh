#!/usr/bin/env bash
# A throwaway PostgreSQL cluster with the extension preloaded, for the demo
# and the benchmarks.
#   scripts/cluster.sh start DIR PORT   initdb (if needed) and start
#   scripts/cluster.sh stop DIR         stop it (fast shutdown)
# QUEUE_PRELOAD= (empty) starts a plain cluster, without the extension.
# The server runs as `postgres` when called as root (PostgreSQL refuses
# root). Its socket is in DIR; connect with psql -h DIR -p PORT -U postgres.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:?usage: cluster.sh start DIR PORT | stop DIR}
dir=${2:?cluster directory}
case "$cmd" in
start)
    port=${3:?port}
    if [ "$(id -u)" -eq 0 ]; then install -d -o postgres -g postgres "$dir"; else mkdir -p "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$BIN/initdb" -D "$dir/data" -A trust --locale=C.UTF-8 -E UTF8 -U postgres >/dev/null
        cat >> "$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = '${QUEUE_PRELOAD-queue}'
fsync = on
CONF
    fi
    # a Rust backtrace setting would put backtraces into error details
    (unset RUST_BACKTRACE RUST_LIB_BACKTRACE
     as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null)
    ;;
stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
*)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
