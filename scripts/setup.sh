#!/usr/bin/env bash
# Installs what building and testing the extension needs on Debian 12, once:
# PostgreSQL 15 with its server headers, clang for bindgen, sudo for
# `cargo pgrx test --runas`, Chromium for the dashboard's browser test, PostgreSQL 18 built from source in
# /usr/local/pgsql-18 (scripts/pg18.sh: Debian 12 has no 18), and cargo-pgrx
# 0.18.1 initialised for both, and the clients that the README's snippets are
# tested with (psycopg 3, node-postgres). Each step is skipped when already
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
# curl: make bench-web's page loads)
packages=(postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config build-essential sudo
          chromium curl)
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

if [ -n "${PG_CONFIG:-}" ] && "$PG_CONFIG" --version 2>/dev/null | grep -q '^PostgreSQL 15\.'; then
    PG15_CONFIG=$PG_CONFIG
fi
# (pgrx keeps its configuration in PGRX_HOME, by default ~/.pgrx)
pgrx_config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
if ! grep -qs "^pg15 = \"$PG15_CONFIG\"" "$pgrx_config" ||
   ! grep -qs "^pg18 = \"$PG18_CONFIG\"" "$pgrx_config"; then
    cargo pgrx init --pg15 "$PG15_CONFIG" --pg18 "$PG18_CONFIG"
fi

# The clients that tests/tests/readme.rs runs the README's consumer loops
# with: psycopg 3 for the python3 on PATH (from PyPI; Debian's package where
# pip cannot install), and node-postgres and the Standard Webhooks library
# (for the README's Node signature check), pinned by tests/readme's lock file.
if ! python3 -c 'import psycopg' 2>/dev/null; then
    stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
    if python3 -m pip --version >/dev/null 2>&1 && [ ! -e "$stdlib/EXTERNALLY-MANAGED" ]; then
        echo "installing psycopg 3 for $(command -v python3)"
        python3 -m pip install --quiet 'psycopg[binary]'
    else
        echo "installing python3-psycopg"
        sudo_if_needed apt-get update -q
        sudo_if_needed apt-get install -y -q --no-install-recommends python3-psycopg
    fi
fi
# The Standard Webhooks reference library, which tests/tests/webhooks.rs
# verifies the worker's signatures with (an implementation not ours). Pinned.
if ! python3 -c 'import standardwebhooks' 2>/dev/null; then
    echo "installing standardwebhooks for $(command -v python3)"
    python3 -m pip install --quiet 'standardwebhooks==1.1.0'
fi
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
# Patroni with its Raft DCS (no etcd), which tests/ha/failover.py (make
# test-ha) runs a three-node cluster with (it talks to PostgreSQL through the
# psycopg 3 installed above). Pinned.
if ! python3 -c 'import patroni' 2>/dev/null; then
    echo "installing patroni for $(command -v python3)"
    python3 -m pip install --quiet 'patroni[raft]==4.1.5'
fi
