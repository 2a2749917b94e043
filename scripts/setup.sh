#!/usr/bin/env bash
# Installs what building and testing the extension needs on Debian 12, once:
# PostgreSQL 15 with its server headers, clang for bindgen, sudo for
# `cargo pgrx test --runas`, Chromium for the dashboard's browser test, PostgreSQL 18 built from source in
# /usr/local/pgsql-18 (scripts/pg18.sh: Debian 12 has no 18), and cargo-pgrx
# 0.18.1 initialised for both, and the clients that the README's snippets are
# tested with (psycopg 3, node-postgres), and cargo-nextest. Each step is skipped when already
# done. Needs root (or sudo) for the packages.
set -euo pipefail

# PostgreSQL 15's pg_config: Debian's unless PG15_CONFIG, or a PG_CONFIG that
# is a 15 (as before), says otherwise. PostgreSQL 18's: scripts/pg18.sh's.
PG15_CONFIG=${PG15_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG18_CONFIG=${PG18_PREFIX:-/usr/local/pgsql-18}/bin/pg_config
cd "$(dirname "$0")/.."
PGRX_VERSION=$(sed -n 's/^cargo-pgrx = "=\(.*\)"$/\1/p' Cargo.toml)
export PATH="$HOME/.cargo/bin:$PATH" DEBIAN_FRONTEND=noninteractive

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install Rust 1.89 or newer from https://rustup.rs" >&2
    echo "(Debian's own rustc is too old for pgrx $PGRX_VERSION)" >&2
    exit 1
fi
rust_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "$rust_minor" -lt 89 ]; then
    echo "rustc $(rustc --version) is too old: pgrx $PGRX_VERSION needs 1.89 or newer (rustup update)" >&2
    exit 1
fi

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# (chromium: the headless browser of the dashboard's test, web/tests/browser.rs;
# curl: make bench-web's page loads; prometheus: the dashboard's /metrics tests,
# web/tests/metrics.rs, run its promtool (check metrics, check rules) and a
# real Prometheus server that scrapes queue-web)
packages=(postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config build-essential sudo
          chromium curl prometheus)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo_if_needed apt-get update -q
    sudo_if_needed apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

scripts/pg18.sh

if ! cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then
    echo "installing cargo-pgrx $PGRX_VERSION (a few minutes, once)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

# cargo-nextest runs the client and dashboard tests side by side (make
# test); rustup's toolchain on these machines has it, a bare one may not.
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "installing cargo-nextest (a few minutes, once)"
    cargo install cargo-nextest --locked
fi

if [ -n "${PG_CONFIG:-}" ] && "$PG_CONFIG" --version 2>/dev/null | grep -q '^PostgreSQL 15\.'; then
    PG15_CONFIG=$PG_CONFIG
fi
# (pgrx keeps its configuration in PGRX_HOME, by default ~/.pgrx)
pgrx_config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
if ! grep -qs "^pg15 = \"$PG15_CONFIG\"" "$pgrx_config" ||
   ! grep -qs "^pg18 = \"$PG18_CONFIG\"" "$pgrx_config"; then
    cargo pgrx init --pg15 "$PG15_CONFIG" --pg18 "$PG18_CONFIG"
fi

# The Python packages that the tests and the demo run with, in a virtual
# environment of the clone's own, target/python, which the Makefile puts
# first on PATH: Debian's python3 refuses `pip install` (PEP 668), and a
# Python of the user's own stays untouched. psycopg 3 (the README's Python
# consumer loops, tests/tests/readme.rs), the Standard Webhooks reference
# library (tests/tests/webhooks.rs and the demo verify the worker's
# signatures with it: an implementation not ours), and Patroni with its Raft
# DCS, no etcd (tests/ha/failover.py, make test-ha). Pinned where it matters.
VENV=target/python
if [ ! -x "$VENV/bin/python3" ] && ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    # (Debian keeps venv's pip bootstrap in a package of its own)
    rm -rf "$VENV"
    echo "installing python3-venv"
    sudo_if_needed apt-get update -q
    sudo_if_needed apt-get install -y -q --no-install-recommends python3-venv
    python3 -m venv "$VENV"
fi
# OpenTelemetry's protobuf definitions decode what the worker sends a
# collector (tests/otlp/receiver.py), and Prometheus's own client library
# parses queue-web's /metrics (web/tests).
if ! "$VENV/bin/python3" -c 'import psycopg, standardwebhooks, patroni, pysyncobj, prometheus_client
import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
    echo "installing psycopg 3, standardwebhooks, patroni, opentelemetry-proto and prometheus_client into $VENV"
    "$VENV/bin/python3" -m pip install --quiet 'psycopg[binary]' 'standardwebhooks==1.1.0' \
        'patroni[raft]==4.1.5' 'opentelemetry-proto==1.45.2' 'prometheus_client==0.23.1'
fi
# node-postgres and the Standard Webhooks library (the README's Node consumer
# loop and signature check), pinned by tests/readme's lock file.
if ! command -v npm >/dev/null; then
    echo "installing nodejs and npm"
    sudo_if_needed apt-get update -q
    sudo_if_needed apt-get install -y -q --no-install-recommends nodejs npm
fi
if [ ! -e tests/readme/node_modules/pg/package.json ] ||
   [ ! -e tests/readme/node_modules/standardwebhooks/package.json ]; then
    echo "installing node-postgres and standardwebhooks into tests/readme"
    npm ci --prefix tests/readme --no-audit --no-fund
fi
